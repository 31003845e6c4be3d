# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.delivery cimport DeliveryRecord
from amqp_dissect.model.deliveries cimport DeliveryTable
from amqp_dissect.model.entities cimport Connection, Link, Session
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.model.hooks cimport Hooks
from amqp_dissect.model.sessions cimport SessionRules
from amqp_dissect.model.transactions cimport TransactionRules
from amqp_dissect.model.state cimport D_FIRST, D_LAST, D_ROLE, D_SETTLED, D_STATE, KIND_DECLARED, KIND_MODIFIED, KIND_RECEIVED, KIND_REJECTED
from amqp_dissect.amqp.values cimport read_bool as _bool, read_delivery_state as _delivery_state_value, delivery_state_plan as _state_plan, read_uint as _uint
from amqp_dissect.model.serial cimport serial_diff, serial_range_len

@cython.final
cdef class SettleQueue:
    cdef public list items
    cdef public Py_ssize_t head
    cpdef append(self, x)
    @cython.locals(items=list, head=Py_ssize_t)
    cpdef popleft(self)
    cpdef Py_ssize_t size(self)

cdef class SettlementRules:
    cdef public Recorder ledger
    cdef public SessionRules session_rules
    cdef public TransactionRules transaction_rules
    cdef public Hooks hooks
    cdef public SettleQueue settling
    cdef public object fold_lag

    @cython.locals(x=DeliveryRecord, link=Link, q=SettleQueue, lag=Py_ssize_t)
    cpdef settled(self, DeliveryRecord dlv)

    @cython.locals(link=Link, s=Session, sender=Py_ssize_t, table=DeliveryTable)
    cpdef fold(self, DeliveryRecord dlv)

    @cython.locals(x=DeliveryRecord, q=SettleQueue)
    cpdef Py_ssize_t fold_lagged(self, Py_ssize_t lag, Py_ssize_t popped, k_hi, k_mid, k_lo) except -1

    cpdef delivery_state(self, DeliveryRecord dlv, by, state, Frame f)

    @cython.locals(name=str, transactional=bint, terminal=bint, link=Link, kind=Py_ssize_t, rcv=bint)
    cpdef apply_state(self, DeliveryRecord dlv, str by, tuple plan, Frame f)

    @cython.locals(x=str)
    cpdef presettled_named(self, Connection c, Py_ssize_t d, Frame f, first, last, Py_ssize_t named)

    @cython.locals(s=Session, dlv=DeliveryRecord, table=DeliveryTable, named=Py_ssize_t)
    cpdef disposition(self, Connection c, Py_ssize_t d, Frame f, p)

    # the cold parts of a disposition: C calls
    cdef wide_range(self, Connection c, Py_ssize_t d, Frame f, Session s, DeliveryTable table, first, n, by)
    cdef not_found(self, Connection c, Session s, DeliveryTable table, Py_ssize_t sender, first, last, n, missing, found)
    cdef unknown_deliveries(self, Connection c, Py_ssize_t d, Frame f, Session s, by, Py_ssize_t sender, first, last,
                            n, missing, settled, plan)

    @cython.locals(beyond="long long", k="long long")
    cpdef long long count_lost_beyond(self, Connection c, Session s, Py_ssize_t sender, first, last, n) except -1
