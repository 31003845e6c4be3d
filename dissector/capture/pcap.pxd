# Augmenting declarations for Cython: compiling dissector/capture/pcap.py with this file beside it
# reads pcap record headers as C integers and makes each record without interpreted code; a -j
# worker's reader drops the other workers' records without making them.  The .py stays plain Python.
import cython
from amqp_dissect.events cimport CaptureRecord

@cython.locals(v="unsigned long long")
cdef unsigned long long _u32le(const unsigned char *p, Py_ssize_t i)

@cython.locals(v="unsigned long long")
cdef unsigned long long _u32be(const unsigned char *p, Py_ssize_t i)

@cython.final
cdef class FlowGate:
    cdef public dict owner
    cdef public list loads
    cdef public Py_ssize_t w
    cdef public bint armed
    cdef public object nxt
    cdef public object ts
    cdef public bint seen
    cdef public Py_ssize_t skipped
    cdef public bint hold
    cdef unsigned long long ka[64]
    cdef unsigned long long kb[64]
    cdef Py_ssize_t kw[64]

@cython.final
cdef class PcapRecords:
    cdef object src, exact, status, linktype
    cdef bint le, done, started
    cdef Py_ssize_t scale, digits, hl, base, index, pos, sbase
    cdef bytes buf
    cdef public FlowGate gate

    @cython.locals(buf=bytes, pos=Py_ssize_t, end=Py_ssize_t, hl=Py_ssize_t, nxt=Py_ssize_t, index=Py_ssize_t,
                   sec="unsigned long long", frac="unsigned long long", caplen=Py_ssize_t,
                   orig="unsigned long long", ok=cython.bint, rec=CaptureRecord, gate=FlowGate,
                   p="const unsigned char *")
    cpdef CaptureRecord _next(self)

    @cython.locals(base=Py_ssize_t, q=Py_ssize_t, ent=list, o=Py_ssize_t, a="unsigned long long",
                   b="unsigned long long", h="unsigned long long", m32="unsigned long long",
                   bit32="unsigned long long", mul="unsigned long long")
    cdef bint _dropped(self, FlowGate gate, const unsigned char *p, Py_ssize_t start, Py_ssize_t caplen, object ts)

    cdef bint _fill(self, Py_ssize_t pos, Py_ssize_t need) except -1

    cdef _end(self, Py_ssize_t pos, error)

# the checks and reads of _pcapng_records' blocks, out of its loop: C calls
cdef object _fill_block_head(object src)
cdef bint _bad_block_len(object blen) except -1
cdef object _check_trailer(object u32, object buf, object src, Py_ssize_t pos, object blen)
cdef tuple _epb_fields(object epb, object buf, object src, Py_ssize_t pos, object blen, Py_ssize_t n_ifaces)
cdef tuple _pb_fields(object pb, object buf, object src, Py_ssize_t pos, object blen, Py_ssize_t n_ifaces)
