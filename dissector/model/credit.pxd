# Augmenting declarations for Cython (see state.pxd): link credit is an extension type.
import cython
from amqp_dissect.model.serial cimport grant_left, serial_add, serial_diff

cdef long long _M32C

@cython.final
cdef class LinkCredit:
    cdef public object initial, count, limit, prev, pending
    cdef public bint granted, lost, count_low, guessed
    cdef public list grants
    cdef public object last_count
    cdef public long long lowered

    cpdef left(self, Py_ssize_t r)
    @cython.locals(lim="long long", cnt="long long", size="long long", used="long long")
    cpdef Py_ssize_t left_sign(self, Py_ssize_t r) except? -2
    cpdef bint beyond(self, Py_ssize_t r)
    cpdef sender_attach(self, idc)
    cpdef bint sender_flow(self, dc, lc)
    cpdef bint receiver_flow(self, dc, lc, known)
    cpdef bint resync_count(self, dc)
    cpdef bint resync_from_grant(self, Py_ssize_t r, Py_ssize_t g)
    cpdef bint replay(self, rdc, rlc, sdc)
    cpdef lost_whole(self, n, bint known)
    cpdef delivered(self)
