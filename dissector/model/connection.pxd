# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport Connection, ConnectionBase, ConnectionHeaders, Silence
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.amqp.values cimport read_uint as _uint

cdef dict _CONN_LEVEL

@cython.final
cdef class ConnectionRules:
    cdef public Recorder ledger
    cdef public dict connections, others, other_info
    cdef public object _level_name
    cdef public Py_ssize_t _level
    cdef public object _cid
    cdef public Connection _cconn

    cpdef frame_connection(self, cid)
    cpdef put_connection(self, cid, c)
    cpdef drop_connection(self, cid)

    @cython.locals(level=Py_ssize_t, sil=Silence, frames=list, last_frame=list, last_act=list, idle_ref=list,
                   act=tuple)
    cpdef bint frame(self, Connection c, Py_ssize_t d, Frame f, p, name, bint heartbeat)

    @cython.locals(msgs=list)
    cdef session_frame(self, Connection c, Py_ssize_t d, Frame f, name)

    cdef sasl_frame(self, Connection c, Py_ssize_t d, Frame f, p, name)

    cdef note_end(self, Connection c, Py_ssize_t d, Frame f, name)

    cdef open_or_close(self, Connection c, Py_ssize_t d, Frame f, p, Py_ssize_t level)

    cdef framing_violations(self, Connection c, Py_ssize_t d, Frame f)

    cdef longer_silence(self, Connection c, Py_ssize_t d, Frame f, ref, Silence sil)

    cdef idle_check(self, Connection c, Py_ssize_t d, Frame f)
