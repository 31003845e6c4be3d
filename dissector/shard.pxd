# Augmenting declarations for Cython: compiling dissector/shard.py with this file beside it makes
# the -j read loop (pump_shard) C: Python runs only for the records of another flow's first
# record, of a sweep tick, or that made an event.  The .py stays plain Python.
import cython
from amqp_dissect.dissect cimport Dissector
from amqp_dissect.capture.tcp cimport TcpReassembler
from amqp_dissect.capture.pcap cimport FlowGate
from amqp_dissect.events cimport CaptureRecord

@cython.locals(base=cython.Py_ssize_t)
cpdef object quick_key(object linktype, object data)

@cython.locals(p="const unsigned char *")
cdef object _quick_key(bytes data, Py_ssize_t base)

@cython.locals(n=cython.Py_ssize_t, tcp=TcpReassembler, interval=object, sure=cython.bint, evs=list,
               gate=FlowGate, dropped=cython.Py_ssize_t, ent=list, o=cython.Py_ssize_t)
cpdef Py_ssize_t pump_shard(Dissector d, records, fw, Py_ssize_t offset, dict owner, list loads, Py_ssize_t w)

cdef void _clock(FlowGate gate, fw, TcpReassembler tcp, ts, interval, bint sure, lt, data, packet) except *

@cython.locals(fold_out=list)
cdef void _hand_on(fw, list evs, list ent, packet) except *

cdef class SweepClock:
    cdef public object interval
    cdef public object due

    @cython.locals(nxt=object)
    cpdef bint tick(self, ts)

@cython.locals(clock=SweepClock)
cpdef tuple sweep_ticks(packets_ts, interval=*, start=*)

# the archive's stage-2 loop over one flow's records: Python runs only at a sweep, a changed
# stamped list, and the returns (another flow, deliveries or frames rows to hand on)
@cython.locals(d=Dissector, packets=cython.Py_ssize_t, fold_rows=cython.Py_ssize_t, folded=list, stamps=dict,
               evs=list, frames=list, why=int)
cpdef tuple pump_flow(dict st, flow, row, rows, runner)

@cython.locals(r=CaptureRecord)
cdef CaptureRecord _record(packet, ts, lt, data, orig)

cdef bint _stamp_due(an, dict stamps) except -1

@cython.locals(n=cython.Py_ssize_t)
cdef bint _new_in(lst, list seen) except -1
