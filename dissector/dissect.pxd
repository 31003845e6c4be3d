# Augmenting declarations for Cython: compiling dissector/dissect.py with this file beside it
# makes the Dissector an extension type whose per-packet path (feed -> TCP reassembly -> routing
# -> framing) is C calls; attributes not declared here live in the instance __dict__.
import cython
from amqp_dissect.capture.tcp cimport TcpReassembler
from amqp_dissect.amqp.framing cimport AmqpConnection
from amqp_dissect.capture.netparse cimport parse_segment
from amqp_dissect.capture.pcap cimport FlowGate

cdef class Dissector:
    cdef dict __dict__
    cdef public TcpReassembler tcp
    cdef public dict connections
    cdef public object packets, tcp_packets, last_ts

    cpdef list feed(self, record)

    @cython.locals(ac=AmqpConnection, out=list)
    cpdef list _route(self, list events)

    @cython.locals(n=cython.Py_ssize_t, size=cython.Py_ssize_t, base=cython.Py_ssize_t, p="const unsigned char *",
                   interval=object, sure=cython.bint, evs=list, gate=FlowGate, dropped=cython.Py_ssize_t,
                   ent=list, o=cython.Py_ssize_t, fold_out=list)
    cpdef Py_ssize_t pump_flows(self, records, fw, Py_ssize_t offset, dict owner, list loads, Py_ssize_t w)
