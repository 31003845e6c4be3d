# Augmenting declarations for Cython (see findings.pxd).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport _Conn, _Link, _Session
from amqp_dissect.model.credit cimport LinkCredit
from amqp_dissect.model.window cimport SessionWindow
from amqp_dissect.model.settlement cimport Settlement
from amqp_dissect.model.state cimport F_AVAILABLE, F_DC, F_DRAIN, F_ECHO, F_HANDLE, F_IW, F_LC, F_NII, F_NOID, F_OW
from amqp_dissect.amqp.values cimport read_bool as _bool, read_uint as _uint

cdef class Links(Settlement):
    @cython.locals(c=_Conn)
    cpdef _link_step(self, _Link link, d, x, f, what)

    @cython.locals(hs=dict)
    cpdef _link_for(self, _Conn c, _Session s, Py_ssize_t d, h, f, what)

    cpdef _credit_check(self, _Link link, Frame f)

    @cython.locals(s=_Session, link=_Link)
    cpdef _flow(self, _Conn c, Py_ssize_t d, Frame f, p)

    @cython.locals(w=SessionWindow, lossy=bint, found=Py_ssize_t)
    cdef _flow_window(self, _Conn c, _Session s, Py_ssize_t d, nii, iw, noid, ow)

    cdef _sender_flow(self, _Conn c, Py_ssize_t d, Frame f, _Link link, h, dc, lc, av)

    @cython.locals(lcr=LinkCredit)
    cdef _receiver_flow(self, _Conn c, _Session s, Py_ssize_t d, Frame f, _Link link, dc, lc, drain)
