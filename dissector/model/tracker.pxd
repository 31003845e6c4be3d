# Augmenting declarations for Cython (see findings.pxd): the tracker, the last of the rooms.
import cython
from amqp_dissect.amqp.framing cimport Frame
from amqp_dissect.model.entities cimport _Conn, _ConnBase
from amqp_dissect.model.transfers cimport Transfers

cdef dict _CONN_LEVEL
from amqp_dissect.amqp.values cimport read_uint as _uint

cdef class StateTracker(Transfers):
    cdef public dict connections
    cdef public dict others, other_info
    cdef public object first_ts, last_ts, end_ts, finished

    cpdef feed(self, event)

    @cython.locals(c=_ConnBase)
    cpdef _conn(self, ev, client=*, server=*, syn_seen=*)

    @cython.locals(c=_Conn, d=Py_ssize_t, fc=dict, level=Py_ssize_t)
    cpdef _frame(self, Frame f)

    @cython.locals(c=_Conn, c0=_ConnBase)
    cdef _Conn _frame_conn(self, Frame f)

    cdef _idle_check(self, _Conn c, Py_ssize_t d, Frame f)

    @cython.locals(handlers=dict)
    cdef _dispatch(self, _Conn c, Py_ssize_t d, Frame f, p, name)
