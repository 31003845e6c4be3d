# Augmenting declarations for Cython (see state.pxd): the session window is an extension type.
import cython
cdef Py_ssize_t RESYNCED, BEYOND
cdef long long _MASK
cdef long long UNKNOWN_LEFT
from amqp_dissect.model.serial cimport grant_left, serial_add, serial_diff

cdef class SessionWindow:
    cdef public list init_noid, noid, limit, prev, pending, last_iw, last_ow
    cdef public Py_ssize_t found

    cpdef riw(self, Py_ssize_t d)
    cpdef bint beyond(self, Py_ssize_t d)
    cpdef begin(self, Py_ssize_t d, noid, iw, ow)
    cpdef bint grant(self, Py_ssize_t sender, nii, iw)
    cpdef bint forget(self, Py_ssize_t sender)
    cpdef Py_ssize_t own_count(self, Py_ssize_t d, noid, bint lost) except -1
    cpdef bint peer_count(self, Py_ssize_t sender, nii)
    @cython.locals(left="long long")
    cpdef send(self, Py_ssize_t d, bint lossy)
    @cython.locals(n="long long", lim="long long", size="long long", used="long long", left="long long", known=bint)
    cpdef long long send_left(self, Py_ssize_t d, bint lossy) except? -1
