# Augmenting declarations for Cython: compiling dissector/model/state.py with this file next to
# it makes the state machines, the per-link delivery statistics and the per-delivery / per-link /
# per-session objects extension types (attributes in a C struct, every one public, so reading and
# setting them from Python behaves as with __slots__; the containers the hot path indexes are typed
# list / tuple / dict, the rest are Python objects) and lets the hot methods type their locals
# (@cython.locals in the .py).  The .py stays plain Python and is what runs when nothing is compiled.
import cython
from cpython cimport array as _carray
from amqp_dissect.amqp.framing cimport Frame
# the rooms of the model: C calls across modules
from amqp_dissect.model.serial cimport serial_add, serial_diff, serial_lt, serial_range_len, serial_in_range, grant_left
from amqp_dissect.model.machine cimport Machine, Endpoints
from amqp_dissect.model.delivery cimport _Delivery
from amqp_dissect.model.deliveries cimport DeliveryTable
from amqp_dissect.model.stats cimport Latencies, DeliveryStats
from amqp_dissect.amqp.values cimport read_uint as _uint, read_bool as _bool, read_binary as _bin
from amqp_dissect.amqp.values cimport read_delivery_state as _delivery_state_value, delivery_state_plan as _state_plan

# the hot performatives' field indices (from the generated spec tables): C integers, so that
# frame.fields[i] is a C-indexed look-up
cdef Py_ssize_t T_HANDLE, T_DELIVERY_ID, T_DELIVERY_TAG, T_SETTLED, T_MORE, T_RCV_SETTLE_MODE, T_STATE, T_RESUME, T_ABORTED
cdef Py_ssize_t F_NII, F_IW, F_NOID, F_OW, F_HANDLE, F_DC, F_LC, F_AVAILABLE, F_DRAIN, F_ECHO
cdef dict _CONN_LEVEL
cdef Py_ssize_t _K_PLAIN, _K_RECEIVED, _K_REJECTED, _K_MODIFIED, _K_DECLARED
cdef Py_ssize_t D_ROLE, D_FIRST, D_LAST, D_SETTLED, D_STATE

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
    cdef public object after_stall
    cdef public object partial
    cdef public dict live
    cdef public DeliveryStats stats
    cdef public long long n_deliveries
    cdef public object coordinator
    cdef public long long transfers
    cdef public object terminated
    cdef public bint credit_lost
    cdef public Py_ssize_t compacted
    cdef public bint reordered

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
    cdef public list after_win
    cdef public list transfers
    cdef public list flows
    cdef public object handles
    cdef public object links
    cdef public tuple deliveries
    cdef public object late_dispositions
    cdef public object unseen_dispositions
    cdef public long long touch_budget
    cdef public object terminated
    cdef public object last_iw
    cdef public object last_ow

    cpdef riw(self, d)
    cpdef beyond_window(self, d)

cdef class _ConnBase:
    cdef public object id
    cdef public object client
    cdef public object server
    cdef public object syn_seen
    cdef public object known_start
    cdef public object lossy
    cdef public object tls
    cdef public Endpoints state
    cdef public object transport_end
    cdef public object transport_time
    cdef public object fins
    cdef public object first_ts
    cdef public object first_packet
    cdef public object last_ts
    cdef public object last_packet
    cdef public object seq  # (an int: -j N workers store a key of more than 64 bits, see pipelines.parallel.conn_rank)
    cdef public object tls_undecrypted
    cdef public object tls_reason
    cdef public object gaps


cdef class _Conn(_ConnBase):
    cdef public long long events
    cdef public object unknown
    cdef public object inferred
    cdef public object headers
    cdef public object header_keys
    cdef public object sasl
    cdef public object sasl_mechanisms
    cdef public object sasl_mechanism
    cdef public object sasl_hostname
    cdef public object sasl_outcome
    cdef public object sasl_time
    cdef public object sasl_frames
    cdef public object open
    cdef public object close
    cdef public object sessions
    cdef public object links
    cdef public tuple chan
    cdef public tuple pending
    cdef public object idle
    cdef public object idle_ref
    cdef public object last_frame
    cdef public object frames
    cdef public object heartbeats
    cdef public object txns
    cdef public object negotiation
    cdef public object stalls
    cdef public tuple frame_counts
    cdef public object placeholders


cdef class StateTracker:
    cdef public dict connections
    cdef public dict others, other_info
    cdef public list stalls, violations, frame_errors, transactions, internal_errors
    cdef public object first_ts, last_ts, end_ts, finished, _settling, fold_lag
    cdef public long long _seq
    cdef public dict _held
    cdef public dict _repeats
    cdef public Py_ssize_t _placeholders

    cpdef feed(self, event)

    @cython.locals(x=_Delivery, link=_Link)
    cpdef _settled(self, _Delivery dlv)

    @cython.locals(link=_Link, live=dict, s=_Session, sender=Py_ssize_t, table=DeliveryTable)
    cpdef _fold(self, _Delivery dlv)

    @cython.locals(x=_Delivery, q=object)
    cpdef Py_ssize_t fold_lagged(self, Py_ssize_t lag, Py_ssize_t popped, k_hi, k_mid, k_lo) except -1

    cpdef _on_fold(self, dlv)

    cpdef _delivery_state(self, _Delivery dlv, by, state, Frame f)

    @cython.locals(name=str, transactional=bint, terminal=bint, link=_Link, kind=Py_ssize_t, rcv=bint)
    cpdef _apply_state(self, _Delivery dlv, str by, tuple plan, Frame f)

    @cython.locals(c=_ConnBase)
    cpdef _conn(self, ev, client=*, server=*, syn_seen=*)

    @cython.locals(c=_Conn)
    cpdef _session_step(self, _Session s, d, x, f, what)

    @cython.locals(c=_Conn)
    cpdef _link_step(self, _Link link, d, x, f, what)

    @cython.locals(c=_Conn, c0=_ConnBase, d=Py_ssize_t, fc=dict, handlers=dict, level=Py_ssize_t)
    cpdef _frame(self, Frame f)

    @cython.locals(s=_Session, chans=dict)
    cpdef _session_for(self, _Conn c, Py_ssize_t d, Frame f, what)

    @cython.locals(hs=dict)
    cpdef _link_for(self, _Conn c, _Session s, Py_ssize_t d, h, f, what)

    cpdef _credit_check(self, _Link link, Frame f)

    @cython.locals(s=_Session)
    cpdef _flow(self, _Conn c, Py_ssize_t d, Frame f, p)

    @cython.locals(s=_Session, link=_Link, dlv=_Delivery, table=DeliveryTable)
    cpdef _transfer(self, _Conn c, Py_ssize_t d, Frame f, p)

    @cython.locals(s=_Session, dlv=_Delivery, table=DeliveryTable)
    cpdef _disposition(self, _Conn c, Py_ssize_t d, Frame f, p)

