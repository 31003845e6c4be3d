# Augmenting declarations for Cython: compiling dissector/model/state.py with this file next to
# it makes the state machines, the per-link delivery statistics and the per-delivery / per-link /
# per-session objects extension types (attributes in a C struct, every one public, so reading and
# setting them from Python behaves as with __slots__; the containers the hot path indexes are typed
# list / tuple / dict, the rest are Python objects) and lets the hot methods type their locals
# (@cython.locals in the .py).  The .py stays plain Python and is what runs when nothing is compiled.
import cython
from cpython cimport array as _carray
from amqp_dissect.amqp.framing cimport Frame

# serial numbers are 32-bit (the model passes only values _uint accepted): C arithmetic
cdef long long _M32, _MOD32, _HALF32
# the hot performatives' field indices (from the generated spec tables): C integers, so that
# frame.fields[i] is a C-indexed look-up
cdef Py_ssize_t T_HANDLE, T_DELIVERY_ID, T_DELIVERY_TAG, T_SETTLED, T_MORE, T_RCV_SETTLE_MODE, T_STATE, T_RESUME, T_ABORTED
cdef Py_ssize_t F_NII, F_IW, F_NOID, F_OW, F_HANDLE, F_DC, F_LC, F_AVAILABLE, F_DRAIN, F_ECHO
cdef dict _STATE_KIND
cdef Py_ssize_t _K_PLAIN, _K_RECEIVED, _K_REJECTED, _K_MODIFIED, _K_DECLARED
cdef Py_ssize_t D_ROLE, D_FIRST, D_LAST, D_SETTLED, D_STATE
cpdef long long serial_add(long long s, long long n=*)
@cython.locals(d="long long")
cpdef long long serial_diff(long long a, long long b)
cpdef bint serial_lt(long long a, long long b)
cpdef long long serial_range_len(long long first, long long last)
cpdef bint serial_in_range(long long x, long long first, long long last)
@cython.locals(used="long long")
cpdef object grant_left(long long limit, long long size, long long count)

cpdef _uint(v, top=*)
cpdef _bool(v)
cpdef _bin(v)
cpdef _delivery_state_value(v)
cpdef tuple _state_plan(state)

cdef class Machine:
    cdef public object name, states, inputs, transitions, initial, deferrable, steady
    cdef public tuple names, table, defer
    cdef public dict codes, in_codes, explained
    cdef public Py_ssize_t steady_code, s_frame, r_frame
    cdef public tuple moves

    cpdef tuple step_code(self, Py_ssize_t sc, Py_ssize_t ic, inp=*)


cdef class Endpoints:
    cdef public Machine machine
    cdef public list codes
    cdef public tuple queue

    cpdef list advance(self, d, s_in, r_in)
    @cython.locals(m=Machine, codes=list, q=list, e=Py_ssize_t)
    cpdef list advance_codes(self, Py_ssize_t d, Py_ssize_t s_ic, Py_ssize_t r_ic, s_in=*, r_in=*)
    @cython.locals(m=Machine, codes=list)
    cpdef list frame(self, Py_ssize_t d)




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
    cdef public long long frames
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
    cdef public Py_ssize_t seq
    cdef public object folded

    cpdef settle(self, by, ts, packet)
    cpdef _init(self, link, session, direction, delivery_id, tag, ts, packet)

cdef class Latencies:
    cdef public _carray.array values
    cdef public dict counts
    cdef public Py_ssize_t n, fold_at

    @cython.locals(k=Py_ssize_t)
    cpdef append(self, double x)
    cpdef _fold(self)
    @cython.locals(m=Py_ssize_t, size=Py_ssize_t, mask=Py_ssize_t, i=Py_ssize_t, h=Py_ssize_t,
                   a="long long", distinct=Py_ssize_t, v=double, b="unsigned long long",
                   u="unsigned long long", vals="double[:]", bits="long long[:]", at="long long[:]",
                   cnt="long long[:]")
    cpdef bint _fold_hashed(self)

@cython.locals(a="long long", b="long long", d="long long")
cpdef double _seconds(t, t0) except? -1.0

cdef class DeliveryStats:
    cdef public long long deliveries, bytes, no_outcome, unsettled, presettled, aborted, resumed
    cdef public dict outcomes
    cdef public Latencies latency, outcome_latency

    cpdef add(self, _Delivery d)

# (the session ``s`` is untyped here: its class is declared in entities.pxd, which cimports this file)
# the ordered delivery-ids of a session's table (a wide disposition range bisects them): C calls
# with C integers (one _order_add per transfer once a session has sent a wide range); the tables
# stay untyped (any mapping: tests count their look-ups)
@cython.locals(off="long long", order=_carray.array, k=Py_ssize_t, i=Py_ssize_t)
cpdef _order_add(s, Py_ssize_t d, long long did)
@cython.locals(offs=list, base="long long", k=object)
cpdef _order_rebuild(s, Py_ssize_t d)
@cython.locals(hits=list, base="long long", a="long long", b="long long", dead=Py_ssize_t)
cpdef list _in_range(s, Py_ssize_t sender, long long first, long long n)
@cython.locals(a="long long", b="long long", k=Py_ssize_t, lo="long long", hi="long long")
cpdef Py_ssize_t _range_count(s, Py_ssize_t sender, long long first, long long n) except -1
@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, dead=Py_ssize_t, i=Py_ssize_t, k="long long", tbl=dict)
cpdef Py_ssize_t _collect(_carray.array order, table, long long base, long long a, long long b, list hits) except -1
