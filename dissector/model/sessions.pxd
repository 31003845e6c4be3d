# Augmenting declarations for Cython (see findings.pxd).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport _Conn, _Session
from amqp_dissect.model.transactions cimport Transactions
from amqp_dissect.amqp.values cimport read_uint as _uint

cdef class Sessions(Transactions):
    cdef public Py_ssize_t _placeholders

    @cython.locals(c=_Conn)
    cpdef _session_step(self, _Session s, d, x, f, what)

    @cython.locals(s=_Session, chans=dict)
    cpdef _session_for(self, _Conn c, Py_ssize_t d, Frame f, what)
