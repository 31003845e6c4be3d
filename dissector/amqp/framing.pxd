# Augmenting declarations for Cython (see scan.pxd): compiling framing.py with this file
# beside it makes Frame, StreamNote, _Direction and AmqpConnection extension types with
# typed attributes and types the framing loop's locals.  The .py stays plain Python.
import cython
from amqp_dissect.amqp.scan cimport buffer_bytes, scan_performative

cdef int _M_START, _M_FRAMES, _M_RESYNC, _M_OPAQUE

cdef class Delivery:
    cdef public object channel, handle, delivery_id, delivery_tag, first_packet, first_ts, last_packet, last_ts
    cdef public object frames, message_size, payload, aborted, incomplete, _sections, _error, budget

cdef class Frame:
    cdef public object conn, direction, src, dst, packet, ts, first_packet
    cdef public object size, doff, type, channel
    cdef public object ext, pname, _performative, _perf_body, payload, payload_size
    cdef public object fields, notes, delivery

    cpdef _init(self, conn, direction, src, dst, packet, ts, first_packet, size, doff, ftype, channel)
    cpdef add_note(self, note)

cdef class _Direction:
    cdef public object index, src, dst
    cdef public bytearray buf
    cdef public int mode
    cdef public object protocol, first_packet, skipped, skip_start_packet
    cdef public dict partials
    cdef public object opaque_bytes, pending_notes, lost

cdef class AmqpConnection:
    cdef public object conn, client, server, dirs, max_frame_bytes, max_message_bytes
    cdef public object messages, bodies, announced_max_frame, frames, tls, keep_payloads
    cdef public object other, _other_said
    cdef public list budget, scan_budget

    @cython.locals(d=_Direction)
    cpdef list feed(self, direction, data, ts, packet)

    @cython.locals(buf=bytearray, pos=Py_ssize_t, n=Py_ssize_t, size=Py_ssize_t, doff=Py_ssize_t,
                   ftype=Py_ssize_t, channel=Py_ssize_t, frame=Frame, first=object, cap=Py_ssize_t,
                   mode=int)
    cpdef _process(self, _Direction d, ts, packet, list out)

    @cython.locals(body=Py_ssize_t, end=Py_ssize_t, perf_end=Py_ssize_t, left="long long", cap="long long",
                   spent="long long", budget=list, sb=list, maxe="long long", per="long long",
                   fsize="long long")
    cpdef _frame(self, _Direction d, Frame frame, buf, body, end)

    @cython.locals(part=Delivery)
    cpdef _transfer(self, _Direction d, Frame frame, v)

