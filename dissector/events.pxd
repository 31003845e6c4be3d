# Augmenting declarations for Cython: compiling dissector/events.py with this file beside it
# makes the per-packet events extension types (constructed without interpreted __init__ code).
cdef class _Event:
    pass

cdef class CaptureRecord(_Event):
    cdef public object index, ts, linktype, data, orig_len, interface

cdef class StreamOpened(_Event):
    cdef public object conn, client, server, ts, packet, syn_seen

cdef class StreamData(_Event):
    cdef public object conn, direction, data, ts, packet

cdef class StreamGap(_Event):
    cdef public object conn, direction, size, ts, packet, cause

cdef class StreamClosed(_Event):
    cdef public object conn, direction, kind, ts, packet

cdef class PacketNote(_Event):
    cdef public object packet, ts, note, conn, extra
