# Augmenting declarations for Cython (see scan.pxd): compiling codec.py with this file beside
# it makes Described, Composite and Reader extension types and types the decoder's hot paths
# (a typed bytes buffer with C offsets, one branch per constructor kind).  The .py stays plain
# Python and is the module that runs when nothing is compiled.
import cython

cdef bytes _KIND, _WIDTH
cdef tuple _CLASS, _TYPE_NAME, _SMALL_ULONGS, _SMALL_COMPOSITES
cdef int _K_INVALID, _K_CONST, _K_LIST0, _K_BOOL, _K_UNSIGNED, _K_SIGNED, _K_FLOAT, _K_DOUBLE
cdef int _K_RAW, _K_CHAR, _K_UUID, _K_BINARY, _K_STRING, _K_SYMBOL, _K_LIST, _K_MAP, _K_ARRAY

cdef class Described:
    cdef public object descriptor, value, name

cdef class Composite(Described):
    cdef public object spec

cdef class Reader:
    cdef public object buf
    cdef bytes data
    cdef Py_ssize_t base, p, lim
    cdef public Py_ssize_t depth, max_depth, elements_left

    @cython.locals(p=Py_ssize_t)
    cdef Py_ssize_t _need(self, Py_ssize_t n) except -1
    @cython.locals(p=Py_ssize_t)
    cdef int _u8(self) except -1
    @cython.locals(p=Py_ssize_t)
    cdef long long _u32(self) except -1
    cdef int _count(self, Py_ssize_t n) except -1
    cdef int _enter(self) except -1
    @cython.locals(p=Py_ssize_t, code=int)
    cpdef value(self)
    @cython.locals(p=Py_ssize_t, code=int)
    cdef _described(self)
    @cython.locals(kind=int, width=int, p=Py_ssize_t)
    cdef _body(self, int code)
    @cython.locals(p=Py_ssize_t, n=Py_ssize_t)
    cdef _variable(self, int code, int kind)
    @cython.locals(width=int, p=Py_ssize_t, b=int, cp=cython.ulonglong)
    cdef _fixed(self, int code, int kind)
    @cython.locals(size=Py_ssize_t, count=Py_ssize_t, end=Py_ssize_t)
    cdef (Py_ssize_t, Py_ssize_t) _compound_header(self, int width) except *
    @cython.locals(count=Py_ssize_t, end=Py_ssize_t, saved_lim=Py_ssize_t, items=list, i=Py_ssize_t)
    cdef list _list(self, int width)
    @cython.locals(count=Py_ssize_t, end=Py_ssize_t, saved_lim=Py_ssize_t, pairs=list, i=Py_ssize_t)
    cdef _map(self, int width)
    @cython.locals(count=Py_ssize_t, end=Py_ssize_t, saved_lim=Py_ssize_t, items=list, code=int, kind=int,
                   i=Py_ssize_t)
    cdef _array(self, int width)

@cython.locals(v=cython.ulonglong, i=int)
cdef unsigned long long uint_at(bytes data, Py_ssize_t p, int width)

@cython.locals(v=cython.longlong, i=int)
cdef long long int_at(bytes data, Py_ssize_t p, int width)

@cython.locals(c=Composite)
cdef Composite _composite(spec, list value, descriptor)

@cython.locals(d=Described)
cdef Described _described(descriptor, value, name)

cpdef make_described(descriptor, value)

@cython.locals(r=Reader, out=list)
cpdef list decode_all(data, Py_ssize_t max_depth=*, Py_ssize_t max_elements=*)
