# Augmenting declarations for Cython: compiling dissector/amqp/scan.py with this file
# next to it types the scanner's hot loop; the .py stays plain Python and is the
# module that runs when nothing is compiled.
import cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

@cython.final
cdef class ScanResult:
    cdef public Py_ssize_t code
    cdef public object name
    cdef public Py_ssize_t perf_end
    cdef public Py_ssize_t count
    cdef public bint spans

cpdef bytes buffer_bytes(bytearray buf, Py_ssize_t a, Py_ssize_t b)
cpdef scan_performative(buf, Py_ssize_t pos, Py_ssize_t end, budget=*)
cpdef scan_into(bytearray buf, Py_ssize_t pos, Py_ssize_t end, list budget, ScanResult res)

cdef inline void _put(values, Py_ssize_t i, v)

@cython.locals(n=Py_ssize_t, p=Py_ssize_t, layout=tuple)
cdef _scan(bytearray buf, Py_ssize_t pos, Py_ssize_t end, list budget, ScanResult res)

@cython.locals(c=int, lend=Py_ssize_t, count=Py_ssize_t, size=Py_ssize_t)
cdef inline Py_ssize_t _list_start(bytearray buf, Py_ssize_t p, Py_ssize_t end, Py_ssize_t nfields, ScanResult res)

@cython.locals(nfields=Py_ssize_t, count=Py_ssize_t, lend=Py_ssize_t, c=int, a=int, i=Py_ssize_t,
               actions=tuple, row=tuple, absent=tuple, kinds=tuple, mandatory=tuple, charged=bint,
               state=bint, spans=bint)
cdef _scan_fields(bytearray buf, Py_ssize_t p, tuple layout, list budget, ScanResult res)

@cython.locals(u="unsigned long long")
cdef inline Py_ssize_t _read_plain(bytearray buf, int c, int a, Py_ssize_t p, Py_ssize_t end, values, Py_ssize_t i)

@cython.locals(q=Py_ssize_t)
cdef inline Py_ssize_t _sized_end(bytearray buf, bint one_byte, Py_ssize_t p, Py_ssize_t end)

@cython.locals(q=Py_ssize_t)
cdef inline Py_ssize_t _read_binary(bytearray buf, int c, Py_ssize_t p, Py_ssize_t end, values, Py_ssize_t i)

cdef inline _empty_state_name(bytearray buf, Py_ssize_t p, Py_ssize_t end, bint state)

@cython.locals(i=Py_ssize_t)
cdef inline bint _complete(values, Py_ssize_t count, Py_ssize_t nfields, tuple mandatory)
