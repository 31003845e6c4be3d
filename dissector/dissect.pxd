# Augmenting declarations for Cython: compiling dissector/dissect.py with this file beside it
# makes the Dissector an extension type whose per-packet path (feed -> TCP reassembly -> routing
# -> framing) is C calls; attributes not declared here live in the instance __dict__.
import cython
from amqp_dissect.capture.tcp cimport TcpReassembler
from amqp_dissect.amqp.framing cimport AmqpConnection
from amqp_dissect.capture.netparse cimport parse_segment

@cython.final
cdef class Dissector:
    cdef dict __dict__
    cdef public TcpReassembler tcp
    cdef public dict connections
    cdef public object packets, tcp_packets, last_ts
    cdef public object clock

    cpdef list feed(self, record)

    @cython.locals(ac=AmqpConnection, out=list)
    cpdef list _route(self, list events)

    # the cold branches of _route (a connection's bytes when its decoder is not a plain
    # AmqpConnection, its gaps, its end, the TCP layer's notes): C calls
    cdef _route_data(self, ev, c, list out, list later)
    cdef _route_gap(self, ev, list events, list out, list later)
    cdef _route_closed(self, ev, list out, list later)
    cdef _route_note(self, ev, list out, list later)
