# Augmenting declarations for Cython: compiling dissector/model/state.py with this file next to
# it makes the state machines, the per-link delivery statistics and the per-delivery / per-link /
# per-session objects extension types (attributes in a C struct, every one public, so reading and
# setting them from Python behaves as with __slots__; the containers the hot path indexes are typed
# list / tuple / dict, the rest are Python objects) and lets the hot methods type their locals
# (@cython.locals in the .py).  The .py stays plain Python and is what runs when nothing is compiled.
import cython

cpdef serial_add(s, n=*)
cpdef serial_diff(a, b)
cpdef serial_lt(a, b)
cpdef serial_range_len(first, last)
cpdef serial_in_range(x, first, last)

cdef class Machine:
    cdef public object name, states, inputs, transitions, initial, deferrable, steady


cdef class Endpoints:
    cdef public Machine machine
    cdef public list state
    cdef public tuple queue

    cpdef list advance(self, d, s_in, r_in)
    cpdef list frame(self, d)


cdef class DeliveryStats:
    cdef public object deliveries, bytes, no_outcome, unsettled, presettled, aborted, resumed
    cdef public dict outcomes
    cdef public object latency, outcome_latency


cdef class _Delivery:
    cdef public object link
    cdef public object session
    cdef public object direction
    cdef public object delivery_id
    cdef public object tag
    cdef public object first_ts
    cdef public object first_packet
    cdef public object last_ts
    cdef public object last_packet
    cdef public object frames
    cdef public object size
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
    cdef public list dispositions
    cdef public object rcv_settle_mode
    cdef public object payload
    cdef public object sender_state
    cdef public object settled
    cdef public object txn
    cdef public object enlisted_in
    cdef public object seq
    cdef public object folded

    cpdef settle(self, by, ts, packet)

cdef class _Link:
    cdef public object conn
    cdef public object session
    cdef public object index
    cdef public object name
    cdef public object handle
    cdef public Endpoints state
    cdef public object attach
    cdef public object detach
    cdef public object sender_dir
    cdef public object known
    cdef public object guessed
    cdef public object unknown
    cdef public object initial_dc
    cdef public object dc
    cdef public object limit
    cdef public object limit_prev
    cdef public object pending_credit
    cdef public object got_credit
    cdef public object available
    cdef public object avail_base
    cdef public object drain
    cdef public object echo
    cdef public object last_flow
    cdef public object flows
    cdef public object stall
    cdef public object drain_stall
    cdef public object partial
    cdef public dict live
    cdef public DeliveryStats stats
    cdef public object n_deliveries
    cdef public object coordinator
    cdef public object transfers
    cdef public object terminated

    cpdef credit(self)
    cpdef beyond_credit(self)

cdef class _Session:
    cdef public object conn
    cdef public object index
    cdef public object channel
    cdef public object initiator
    cdef public Endpoints state
    cdef public object begin
    cdef public object end
    cdef public object known
    cdef public object guessed
    cdef public object unknown
    cdef public object init_noid
    cdef public list noid
    cdef public list win_limit
    cdef public list win_prev
    cdef public object pending_iw
    cdef public list win_stall
    cdef public list transfers
    cdef public list flows
    cdef public object handles
    cdef public object links
    cdef public tuple deliveries
    cdef public list next_did
    cdef public list first_did
    cdef public object late_dispositions
    cdef public object unseen_dispositions
    cdef public object terminated
    cdef public object last_iw
    cdef public object last_ow

    cpdef riw(self, d)
    cpdef beyond_window(self, d)
