# Augmenting declarations for Cython (see state.pxd): the entities are extension types (attributes
# in a C struct, every one public).
import cython
from cpython.long cimport PyLong_AsLongLongAndOverflow
from amqp_dissect.model.machine cimport Endpoints
from amqp_dissect.model.stats cimport DeliveryStats
from amqp_dissect.model.deliveries cimport DeliveryTable
from amqp_dissect.model.delivery cimport LiveDeliveries
from amqp_dissect.model.credit cimport LinkCredit
from amqp_dissect.model.window cimport SessionWindow
from amqp_dissect.model.loss cimport LossRecord

cdef long long NO_INT, INT_MAX

@cython.final
cdef class Silence:
    cdef public object longest, start, end, end_packet, start_packet
    cdef public long long unknown

@cython.final
cdef class Link:
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
    cdef public LinkCredit link_credit
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
    cdef public LiveDeliveries live
    cdef public DeliveryStats stats
    cdef public long long n_deliveries
    cdef public object coordinator
    cdef public long long transfers
    cdef public object terminated
    cdef public Py_ssize_t compacted
    cdef public bint reordered
    cdef public long long lost_whole
    cdef public long long not_captured
    cdef public dict tags
    cdef public dict tag_repeats

    cpdef credit(self)
    @cython.locals(tags=dict)
    cpdef untag(self, tag, did)
    cpdef beyond_credit(self)

@cython.final
cdef class Session:
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
    cdef public SessionWindow window
    cdef public list win_stall
    cdef public list after_win
    cdef public long long transfers0, transfers1
    cdef public list flows
    cdef public object handles
    cdef public object links
    cdef public tuple deliveries
    cdef public object late_dispositions
    cdef public object unseen_dispositions, cut_outcomes
    cdef public long long touch_budget
    cdef public object terminated
    cdef public long long lost_whole
    cdef public list last_sender
    cdef public list loss_mark
    cdef public list lost_upto
    cdef public long long not_captured
    cdef public list cut_mark
    # link_on's cache (see there): per peer, the handle object of the last look-up and its link
    cdef public object _hk0, _hk1
    cdef public Link _hl0, _hl1

    @cython.locals(link=Link, m=dict)
    cpdef Link link_on(self, Py_ssize_t d, h)
    cpdef map_handle(self, Py_ssize_t d, h, link)
    cpdef unmap_handle(self, Py_ssize_t d, h)
    cdef _forget_handles(self)
    cpdef riw(self, d)
    cpdef beyond_window(self, d)
    @cython.locals(x=Link)
    cpdef count_lost_whole(self, Py_ssize_t d, prev, long long n, long long since)
    cpdef count_not_captured(self, Py_ssize_t d, prev, long long n, long long since)
    @cython.locals(x=Link)
    cpdef count_unknown_link(self, Py_ssize_t d, long long n, str why)
    @cython.locals(x=Link)
    cpdef bint other_senders(self, Py_ssize_t d, link)

cdef class ConnectionBase:
    cdef public object id
    cdef public object client
    cdef public object server
    cdef public object syn_seen
    cdef public object known_start
    cdef public Endpoints state
    # first_ts, first_packet, last_ts, last_packet and seq are properties over C integers (issue 40: no int
    # object per connection); NO_INT in one of them: None, or a value that is not a C integer (-j N workers
    # store a seq of more than 64 bits, see pipelines.parallel.conn_rank), kept in _big by its name
    cdef public long long _first_ts, _first_packet, _last_ts, _last_packet, _seq
    cdef public object _big
    @cython.locals(v=cython.longlong)
    cdef long long _int_field(self, str name, object value, long long current)
    @cython.locals(t=cython.longlong, p=cython.longlong, over_t=cython.int, over_p=cython.int)
    cdef void _seen(self, object ts, object packet) except *
    cdef bint _no_first_ts(self) except -1
    cdef public LossRecord loss
    cdef public object one_way
    cdef public object transport_end
    cdef public object transport_time


cdef class ConnectionHeaders(ConnectionBase):
    cdef public long long events
    cdef public object unknown
    cdef public object inferred
    cdef public object headers
    cdef public object header_keys
    cdef public object sasl
    cdef public object negotiation
    cdef public object lossy, tls, fins, tls_undecrypted, tls_reason
    cdef public bint told_before_frames


@cython.final
cdef class Connection(ConnectionHeaders):
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
    cdef public long long _frames0, _frames1
    cdef public object heartbeats
    cdef public object txns
    cdef public object stalls
    cdef public tuple _frame_counts
    cdef public object _fc_key0, _fc_key1
    cdef public long long _fc_run0, _fc_run1
    cdef public object placeholders
    cdef public object silence
    cdef public object last_act
    cdef public object end_notes
    # session_on's cache (see there): per peer, the channel of the last look-up (-1: none) and its session
    cdef public Py_ssize_t _ck0, _ck1
    cdef public Session _cs0, _cs1

    @cython.locals(s=Session, m=dict)
    cpdef Session session_on(self, Py_ssize_t d, Py_ssize_t ch)
    cpdef map_channel(self, Py_ssize_t d, ch, s)
    cpdef unmap_channel(self, Py_ssize_t d, ch)
    cdef _forget_channels(self)

    @cython.locals(fc=dict)
    cpdef count_frame(self, Py_ssize_t d, key)
    @cython.locals(fc=dict, run="long long")
    cdef _fc_flush(self, Py_ssize_t d)
