# Augmenting declarations for Cython (dissector/model/deliveries.py): a session's table of deliveries
# per sending peer is an extension type whose methods the tracker calls in C (a local typed
# DeliveryTable); the ordered ids are read and grown in the array's buffer.  The tables stay untyped
# (any mapping: tests count their look-ups).
import cython
from cpython cimport array as _carray
from amqp_dissect.model.delivery cimport _Delivery
from amqp_dissect.model.serial cimport serial_add, serial_diff, serial_range_len

cdef long long _M32

cdef class DeliveryTable:
    cdef public object session
    cdef public Py_ssize_t direction
    cdef public object by_id
    cdef public object order
    cdef public Py_ssize_t stale
    cdef public object first_id
    cdef public object next_id
    cdef public object store
    cdef public Py_ssize_t compact_at

    @cython.locals(tbl=dict, known=bint)
    cpdef add(self, did, dlv)
    @cython.locals(tbl=dict, mine=bint)
    cpdef forget(self, _Delivery dlv)
    @cython.locals(hits=list, i=Py_ssize_t, j=Py_ssize_t)
    cpdef list find_each(self, long long first, long long n)
    cpdef Py_ssize_t folded_in_range(self, long long first, long long last) except -1
    cpdef bint due(self)
    @cython.locals(off="long long", order=_carray.array, k=Py_ssize_t, i=Py_ssize_t)
    cpdef _order_add(self, long long did)
    @cython.locals(offs=list, base="long long", k=object, tbl=dict, n=Py_ssize_t, i=Py_ssize_t, off="long long",
                   order=_carray.array, sorted_=bint)
    cpdef _order_rebuild(self)
    @cython.locals(a="long long", b="long long")
    cpdef list _pieces(self, long long first, long long n)
    @cython.locals(hits=list, base="long long", dead=Py_ssize_t)
    cpdef list in_range(self, long long first, long long n)
    @cython.locals(k=Py_ssize_t)
    cpdef Py_ssize_t range_count(self, long long first, long long n) except -1
    cpdef compact(self)


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bisect_left_q(_carray.array order, long long x)
@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bisect_right_q(_carray.array order, long long x)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, dead=Py_ssize_t, i=Py_ssize_t, k="long long", tbl=dict)
cpdef Py_ssize_t _collect(_carray.array order, table, long long base, long long a, long long b, list hits) except -1
