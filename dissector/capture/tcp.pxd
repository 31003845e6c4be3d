# Augmenting declarations for Cython: compiling dissector/capture/tcp.py with this file beside it
# makes the reassembler and its per-connection / per-direction state extension types, and types
# the per-segment fast path.  The .py stays plain Python.
import cython

cdef class _Dir:
    cdef public object pos, nxt, isn
    cdef public list starts, datas
    cdef public object buffered, closed

cdef class _Conn:
    cdef public object id, keys
    cdef public tuple dirs
    cdef public object state, last_ts, closed_ts, serial, fins

cdef class TcpReassembler:
    cdef public object server_ports, max_buffered, idle_timeout, max_connections, close_grace, sweep_interval
    cdef public dict _table, _ids, _by_id
    cdef public object _open, _closed
    cdef public object _serial, _next_sweep, _last_ts, _last_packet

    @cython.locals(conn=_Conn, D=_Dir, O=_Dir, ent=tuple, n=Py_ssize_t)
    cpdef list feed(self, seg, ts, packet, wire_len=*)
