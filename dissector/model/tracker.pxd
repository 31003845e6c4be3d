# Augmenting declarations for Cython (see findings.pxd): the tracker owns the ledger and the rule
# rooms (typed references: their hot methods are C calls) and is their Hooks.
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport Connection, ConnectionBase
from amqp_dissect.model.connection cimport ConnectionRules
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.model.hooks cimport Hooks
from amqp_dissect.model.links cimport LinkRules
from amqp_dissect.model.sessions cimport SessionRules
from amqp_dissect.model.settlement cimport SettlementRules
from amqp_dissect.model.stall_rules cimport StallRules
from amqp_dissect.model.transactions cimport TransactionRules
from amqp_dissect.model.transfers cimport TransferRules

# what a performative name is to _dispatch (StateTracker._kind_code): C constants
cdef Py_ssize_t _K_NONE, _K_TRANSFER, _K_DISPOSITION, _K_FLOW, _K_OTHER

cdef class StateTracker(Hooks):
    cdef public dict connections
    cdef public dict others, other_info
    cdef public object first_ts, last_ts, end_ts, finished
    cdef public Recorder ledger
    cdef public StallRules stall_rules
    cdef public TransactionRules transaction_rules
    cdef public ConnectionRules connection_rules
    cdef public SessionRules session_rules
    cdef public SettlementRules settlement_rules
    cdef public LinkRules link_rules
    cdef public TransferRules transfer_rules
    cdef public list violations, frame_errors, internal_errors, stalls, transactions
    cdef public dict _repeats
    cdef public object _settling
    cdef public object _kind_name
    cdef public bint _kind_fields
    cdef public Py_ssize_t _kind_code
    cdef object _seen_c, _seen_ts, _seen_packet
    cdef long long _seen_t, _seen_p

    cpdef feed(self, event)

    @cython.locals(c=ConnectionBase)
    cpdef _conn(self, ev, client=*, server=*, syn_seen=*)

    @cython.locals(c=Connection, d=Py_ssize_t)
    cpdef _frame(self, Frame f)

    @cython.locals(c=Connection, c0=ConnectionBase)
    cdef Connection _frame_conn(self, Frame f)

    cdef _name_kind(self, name)

    @cython.locals(code=Py_ssize_t)
    cdef _dispatch(self, Connection c, Py_ssize_t d, Frame f, p, name)
