# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.delivery cimport DeliveryRecord
from amqp_dissect.model.deliveries cimport DeliveryTable
from amqp_dissect.model.entities cimport Connection, Link, Session
from amqp_dissect.model.credit cimport LinkCredit
from amqp_dissect.model.loss cimport LossRecord
from amqp_dissect.model.window cimport SessionWindow, RESYNCED, BEYOND, UNKNOWN_LEFT
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.model.links cimport LinkRules
from amqp_dissect.model.sessions cimport SessionRules
from amqp_dissect.model.settlement cimport SettlementRules
from amqp_dissect.model.stall_rules cimport StallRules
from amqp_dissect.model.transactions cimport TransactionRules
from amqp_dissect.model.state cimport T_ABORTED, T_DELIVERY_ID, T_DELIVERY_TAG, T_HANDLE, T_MORE, T_RCV_SETTLE_MODE, T_RESUME, T_SETTLED, T_STATE
from amqp_dissect.amqp.values cimport read_binary as _bin, read_delivery_state as _delivery_state_value, read_uint as _uint
from amqp_dissect.model.serial cimport serial_diff

cdef Py_ssize_t _TAGS_MAX

# a transfer's serial fields, and whether it continues the unfinished delivery: C calls
cdef object _serial_number(object x)
cdef bint _continues(DeliveryRecord dlv, object did) except -1

@cython.final
cdef class TransferRules:
    cdef public Recorder ledger
    cdef public SessionRules session_rules
    cdef public LinkRules link_rules
    cdef public SettlementRules settlement_rules
    cdef public StallRules stall_rules
    cdef public TransactionRules transaction_rules
    cdef public long long seq
    cdef public object messages

    @cython.locals(s=Session, link=Link, dlv=DeliveryRecord, aborted=bint, table=DeliveryTable, riw="long long",
                   v=tuple)
    cpdef transfer(self, Connection c, Py_ssize_t d, Frame f, p)

    @cython.locals(link=Link, sdir=Py_ssize_t)
    cdef Link transfer_link(self, Connection c, Session s, Py_ssize_t d, Frame f, h)

    @cython.locals(w=SessionWindow, riw="long long")
    cdef long long transfer_window(self, Connection c, Session s, Py_ssize_t d, Frame f, Link link, h) except *

    @cython.locals(dlv=DeliveryRecord, table=DeliveryTable, touches="long long")
    cdef DeliveryRecord new_delivery(self, Connection c, Session s, Py_ssize_t d, Frame f, Link link, h, did, tuple v)

    @cython.locals(mark="long long", cmark="long long", lost=bint, cut=bint, n="long long", last=object, seen=object)
    cdef count_lost_whole(self, Connection c, Session s, Py_ssize_t d, Link link, did)

    @cython.locals(tags=dict, earlier=list, n=Py_ssize_t)
    cdef tag_check(self, Connection c, Py_ssize_t d, Frame f, Link link, h, tag, did)

    @cython.locals(reps=dict, rec=list, ids=list, loss=LossRecord)
    cdef tag_repeated(self, Connection c, Py_ssize_t d, Frame f, Link link, h, tag, earlier, did)

    @cython.locals(lcr=LinkCredit)
    cdef use_credit(self, Connection c, Py_ssize_t d, Frame f, Link link, h, did)

    cdef delivery_sent(self, Connection c, Frame f, Link link, DeliveryRecord dlv, bint aborted)

    cdef sender_says(self, DeliveryRecord dlv, tuple v, Frame f)
