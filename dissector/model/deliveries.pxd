# Augmenting declarations for Cython (dissector/model/deliveries.py): a session's table of deliveries
# per sending peer is an extension type whose methods the tracker calls in C (a local typed
# DeliveryTable); the ordered ids are read and grown in the array's buffer.  The tables stay untyped
# (any mapping: tests count their look-ups).
import cython
from cpython cimport array as _carray
from amqp_dissect.model.delivery cimport DeliveryRecord
from amqp_dissect.model.serial cimport serial_add, serial_diff, serial_range_len

cdef long long _M32

@cython.final
cdef class DeliveryTable:
    cdef public object session
    cdef public Py_ssize_t direction
    cdef public list run
    cdef public long long run_off
    cdef public Py_ssize_t run_head, run_n
    cdef public object by_id
    cdef public object order
    cdef public Py_ssize_t stale
    cdef public object first_id
    cdef public object last_id
    cdef public object store
    cdef public Py_ssize_t compact_at

    @cython.locals(i="long long")
    cdef Py_ssize_t _run_slot(self, did) except -2
    @cython.locals(i=Py_ssize_t, x=object)
    cpdef get(self, did)
    @cython.locals(run=list, k=Py_ssize_t, i="long long", known=bint)
    cpdef add(self, did, dlv)
    @cython.locals(tbl=dict, known=bint)
    cdef _add_other(self, did, dlv)
    cdef bint _pop_other(self, did) except -1
    cdef _other_dropped(self)
    @cython.locals(run=list, i=Py_ssize_t)
    cdef _spill(self)
    @cython.locals(run=list, h=Py_ssize_t, k=Py_ssize_t)
    cdef _run_drop(self, Py_ssize_t i)
    @cython.locals(tbl=dict, mine=bint, i=Py_ssize_t)
    cpdef forget(self, DeliveryRecord dlv)
    @cython.locals(run=list, a="long long", b="long long", i="long long", dead=Py_ssize_t, other=list, both=list)
    cpdef _objects_in(self, long long lo, long long hi, list hits)
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
    @cython.locals(hits=list)
    cpdef list in_range(self, long long first, long long n)
    @cython.locals(k=Py_ssize_t, a="long long", b="long long")
    cpdef Py_ssize_t range_count(self, long long first, long long n) except -1
    cpdef compact(self)
    cdef list _compactable(self, keep)
    cdef _store_moved(self, list moving)


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bisect_left_q(_carray.array order, long long x)
@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t)
cdef Py_ssize_t _bisect_right_q(_carray.array order, long long x)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, dead=Py_ssize_t, i=Py_ssize_t, k="long long", tbl=dict)
cpdef Py_ssize_t _collect(_carray.array order, table, long long base, long long a, long long b, list hits) except -1
