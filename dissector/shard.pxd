# Augmenting declarations for Cython: compiling dissector/shard.py with this file beside it makes
# the -j read loop (pump_shard) C: Python runs only for the records of another flow's first
# record, of a sweep tick, or that made an event.  The .py stays plain Python.
import cython
from cpython cimport array as _carray
from amqp_dissect.dissect cimport Dissector
from amqp_dissect.capture.tcp cimport TcpReassembler
from amqp_dissect.capture.pcap cimport FlowGate, PcapRecords
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

@cython.final
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
cpdef object pump_flow(dict st, flow, row, rows, runner)

@cython.locals(r=CaptureRecord)
cdef CaptureRecord _record(packet, ts, lt, data, orig)

cdef bint _stamp_due(an, dict stamps) except -1

@cython.locals(n=cython.Py_ssize_t)
cdef bint _new_in(lst, list seen) except -1

# the archive's stage-1 loop over a range's records: a batch of rows filled by column, the records
# read by C calls (PcapRecords._next), their counts, times and offsets in C locals; Python runs for
# the clock's points (a step back, the first record), a new flow's name, a note, and the returns
@cython.final
cdef class Stage1Rows:
    cdef public Py_ssize_t size, max_bytes, n, nbytes
    cdef public _carray.array idx, ts, linktype, orig_len, pos, caplen, kind
    cdef public list flow, data, notes

@cython.final
cdef class Stage1Scan:
    cdef public Py_ssize_t shift, track, count, tcp, errors
    cdef public object first_ts, last_ts, max_ts, first_offset, end_offset, last_tcp, last_error, clock
    cdef public dict unsupported, first_unsupported, flows, names

@cython.locals(pr=PcapRecords, rec=CaptureRecord, n=Py_ssize_t, size=Py_ssize_t, nbytes=Py_ssize_t,
               max_bytes=Py_ssize_t, fl=list, dl=list, carry=cython.bint, flows=dict, names=dict, step="long long",
               ck_next=cython.bint, ck_has=cython.bint, ck_last="long long", count=Py_ssize_t, tcp=Py_ssize_t,
               last_tcp="long long", last_ts="long long", max_ts="long long", why=int, caplen=Py_ssize_t,
               off="long long", idx="long long", ts="long long", shift=Py_ssize_t, track=Py_ssize_t)
cpdef int stage1_fill(Stage1Scan sc, records, Stage1Rows out, long long stop, bint offsets) except -1

cdef void _s1_put(Stage1Rows out, Py_ssize_t n, long long idx, long long ts, int lt, long long orig, long long pos,
                  int caplen, signed char kind) noexcept

cdef void _s1_note(Stage1Rows out, Py_ssize_t n, long long idx, long long ts, int lt, long long orig,
                   str meta) except *
