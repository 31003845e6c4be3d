# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class); the
# rooms it was given are typed references, their hot methods C calls.
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport Connection, Session
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.model.hooks cimport Hooks
from amqp_dissect.model.stall_rules cimport StallRules
from amqp_dissect.amqp.values cimport read_uint as _uint

@cython.final
cdef class SessionRules:
    cdef public Recorder ledger
    cdef public StallRules stall_rules
    cdef public Hooks hooks
    cdef public Py_ssize_t placeholders

    @cython.locals(c=Connection, msgs=list)
    cpdef session_step(self, Session s, d, x, f, what)

    @cython.locals(s=Session, ch=Py_ssize_t)
    cpdef session_for(self, Connection c, Py_ssize_t d, Frame f, what)

    cpdef window(self, Session s, sender, nii, iw, f, from_begin=*)
