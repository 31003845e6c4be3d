# Augmenting declarations for Cython: compiling dissector/capture/tcp.py with this file beside it
# makes the reassembler and its per-connection / per-direction state extension types, and types
# the per-segment fast path.  The .py stays plain Python.
import cython

# sequence-space constants and a direction's sentinels (see the .py): C integers here
cdef long long MASK, HALF, NOT_STARTED, CLOSED_DIR, NO_SYN
cdef int NO_ACK

@cython.final
cdef class _Dir:
    # C integers: a direction costs no int objects (issue 40: memory per idle connection)
    cdef public long long pos, nxt, isn, buffered
    cdef public list starts, datas, stamps
    cdef public dict cuts
    cpdef void free_buffers(self)

cdef class _Hold

@cython.final
cdef class _Conn:
    cdef public object id
    cdef public str key
    cdef public _Dir d0, d1
    cdef public object state, last_ts, fins
    cdef public int cd, missing
    cdef public _Hold held
    # the one-direction ACK watch (issue 40: C integers of the connection, no object of their own)
    cdef public long long ack_first, ack_mark
    cdef public int ack_moves
    # the order of activity (issue 40: two words, not an ordered dict's node): the keys of its neighbours
    cdef public str older, newer

@cython.final
cdef class _ActivityOrder:
    cdef public dict table
    cdef public str oldest, newest
    cdef inline void touch(self, _Conn conn)
    @cython.locals(O=_Conn, last=str)
    cdef inline void link_newest(self, _Conn conn)
    @cython.locals(O=_Conn, older=str, newer=str)
    cdef inline void unlink(self, _Conn conn)

@cython.final
cdef class _Hold:
    cdef public list queue, hole, fin
    cdef public object left, end, rst

@cython.final
cdef class TcpReassembler:
    cdef public object server_ports, max_buffered, idle_timeout, max_connections, close_grace, sweep_interval
    cdef public object reorder_packets, reorder_seconds
    cdef public dict _ids, _by_id, _endpoints, _table
    cdef public object _closed
    cdef public _ActivityOrder _order
    cdef public object _next_sweep, _last_ts, _last_packet

    @cython.locals(conn=_Conn, D=_Dir, O=_Dir, key=str, n=Py_ssize_t, d=int, flip=int, sport=long, dport=long,
                   sseq="long long", ack="long long")
    cpdef list feed(self, seg, ts, packet, wire_len=*)
    # feed's parts (issue 42: its complexity), C calls
    @cython.locals(conn=_Conn, D=_Dir)
    cdef inline void _untracked(self, seg, str key, int flip, ts, packet, wire_len, list out)
    @cython.locals(D=_Dir)
    cdef inline void _ignored_segment(self, _Conn conn, seg, str key, int flip, int d, ts, packet, wire_len,
                                      list out)
    cdef inline bint _held_segment(self, _Conn conn, int d, seg, ts, packet, wire_len, list out)
    @cython.locals(onxt="long long")
    cdef inline bint _ack_taken(self, _Conn conn, int d, _Dir O, seg, long long ack, ts, packet, wire_len, list out)
    cdef inline void _slow_segment(self, _Conn conn, int d, _Dir D, seg, str key, int flip, ts, packet, wire_len,
                                   list out)
    @cython.locals(dist="long long")
    cdef inline bint _peer_acked(self, _Conn conn, int d, _Dir O, seg, long long moved, ts, packet, wire_len,
                                 list out)
    cdef inline bint _fin_early(self, _Conn conn, int d, _Dir D, seg, ts, packet, wire_len, list out)
    cdef inline object _held_fin(self, _Conn conn, _Hold H, int d, _Dir D, seg, ts, packet, wire_len, list out)

@cython.locals(D=_Dir)
cpdef _Dir _get_dir(_Conn conn, int d)

@cython.locals(O=_Dir, apos="long long")
cdef long long _held_ack(_Conn conn, _Hold H, int d, ack) except? -2
@cython.locals(X=_Dir)
cdef bint _waiting(_Conn conn, _Hold H) except -1
