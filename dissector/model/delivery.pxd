# Augmenting declarations for Cython (dissector/model/delivery.py): a delivery is an extension type
# (attributes in a C struct, every one public, so reading and setting them from Python behaves as
# with __slots__); the other rooms cimport it.
import cython

@cython.final
cdef class DeliveryRecord:
    cdef public object link
    cdef public object session
    cdef public object direction
    cdef public object delivery_id
    cdef public object tag
    cdef public object first_ts
    cdef public object first_packet
    cdef public object last_ts
    cdef public object last_packet
    cdef public long long frames
    cdef public long long size  # (the sum of its frames' payload sizes: C integers, no int object per frame)
    cdef public object complete
    cdef public object presettled
    cdef public object aborted
    cdef public object resumed
    cdef public object snd_settled
    cdef public object rcv_settled
    cdef public object outcome
    cdef public object outcome_by
    cdef public object outcome_ts
    cdef public object outcome_packet
    cdef public object outcome_error
    cdef public object delivery_failed
    cdef public object undeliverable_here
    cdef public object received_state
    cdef public object txn_id
    cdef public long long disp0, disp1
    cdef public object rcv_settle_mode
    cdef public object payload
    cdef public object sender_state
    cdef public object settled
    cdef public object txn
    cdef public object enlisted_in
    cdef public Py_ssize_t seq
    cdef public object folded
    cdef public object message
    cdef public Py_ssize_t live_at

    @cython.locals(at=tuple)
    cpdef settle(self, str by, ts, packet)
    cpdef _init(self, link, session, direction, delivery_id, tag, ts, packet)


cdef tuple _last_at

@cython.final
cdef class LiveDeliveries:
    cdef public list slots
    cdef public Py_ssize_t off, head, n

    cpdef add(self, DeliveryRecord x)
    @cython.locals(slots=list, i=Py_ssize_t, h=Py_ssize_t, k=Py_ssize_t)
    cpdef bint drop(self, DeliveryRecord x) except -1
    @cython.locals(off=Py_ssize_t, kept=list, j=Py_ssize_t)
    cpdef _pack(self)
    cpdef list values(self)
