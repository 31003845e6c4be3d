# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport Connection, Link, Session
from amqp_dissect.model.credit cimport LinkCredit
from amqp_dissect.model.window cimport SessionWindow
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.model.hooks cimport Hooks
from amqp_dissect.model.sessions cimport SessionRules
from amqp_dissect.model.settlement cimport SettlementRules
from amqp_dissect.model.stall_rules cimport StallRules
from amqp_dissect.model.state cimport F_AVAILABLE, F_DC, F_DRAIN, F_ECHO, F_HANDLE, F_IW, F_LC, F_NII, F_NOID, F_OW
from amqp_dissect.amqp.values cimport read_bool as _bool, read_uint as _uint

@cython.final
cdef class LinkRules:
    cdef public Recorder ledger
    cdef public SessionRules session_rules
    cdef public SettlementRules settlement_rules
    cdef public StallRules stall_rules
    cdef public Hooks hooks

    @cython.locals(c=Connection, msgs=list)
    cpdef link_step(self, Link link, d, x, f, what)

    @cython.locals(hs=dict)
    cpdef link_for(self, Connection c, Session s, Py_ssize_t d, h, f, what)

    cpdef credit_check(self, Link link, Frame f)

    @cython.locals(lcr=LinkCredit, sign=Py_ssize_t)
    cdef credit_stalls(self, Link link, Frame f)

    @cython.locals(s=Session, link=Link)
    cpdef flow(self, Connection c, Py_ssize_t d, Frame f, p)

    @cython.locals(w=SessionWindow, lossy=bint, found=Py_ssize_t)
    cdef flow_window(self, Connection c, Session s, Py_ssize_t d, nii, iw, noid, ow)

    cdef sender_flow(self, Connection c, Py_ssize_t d, Frame f, Link link, h, dc, lc, av)

    @cython.locals(lcr=LinkCredit)
    cdef receiver_flow(self, Connection c, Session s, Py_ssize_t d, Frame f, Link link, dc, lc, drain)
