# Augmenting declarations for Cython: compiling dissector/capture/tcp.py with this file beside it
# makes the reassembler and its per-connection / per-direction state extension types, and types
# the per-segment fast path.  The .py stays plain Python.
import cython

# sequence-space constants and a direction's sentinels (see the .py): C integers here
cdef long long MASK, HALF, NOT_STARTED, CLOSED_DIR, NO_SYN

cdef class _Dir:
    # C integers: a direction costs no int objects (issue 40: memory per idle connection)
    cdef public long long pos, nxt, isn, buffered
    cdef public list starts, datas, stamps
    cdef public dict cuts

cdef class _Hold
cdef class _UnseenAcked

cdef class _Conn:
    cdef public object id
    cdef public tuple key
    cdef public _Dir d0, d1
    cdef public object state, last_ts, fins
    cdef public int cd, missing
    cdef public _Hold held
    cdef public _UnseenAcked acked

cdef class _UnseenAcked:
    cdef public long long first, mark, moves

cdef class _Hold:
    cdef public list queue, hole, fin
    cdef public object left, end, rst

cdef class TcpReassembler:
    cdef public object server_ports, max_buffered, idle_timeout, max_connections, close_grace, sweep_interval
    cdef public object reorder_packets, reorder_seconds
    cdef public dict _ids, _by_id, _endpoints
    cdef public object _table, _closed
    cdef public object _next_sweep, _last_ts, _last_packet

    @cython.locals(conn=_Conn, D=_Dir, O=_Dir, key=tuple, n=Py_ssize_t, d=int, flip=int, sport=long, dport=long,
                   sseq="long long", ack="long long", onxt="long long", dist="long long")
    cpdef list feed(self, seg, ts, packet, wire_len=*)

@cython.locals(D=_Dir)
cpdef _Dir _get_dir(_Conn conn, int d)
