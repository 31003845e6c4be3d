# Augmenting declarations for Cython: compiling dissector/capture/netparse.py with this file beside
# it reads the common IPv4/TCP headers as C integers.  The .py stays plain Python.
import cython

@cython.locals(n=Py_ssize_t, vihl=Py_ssize_t, proto=Py_ssize_t, frag=Py_ssize_t, offflags=Py_ssize_t,
               total=Py_ssize_t, end=Py_ssize_t, ps=Py_ssize_t, sport=Py_ssize_t, dport=Py_ssize_t,
               seq="unsigned long long", ack="unsigned long long", ihl=Py_ssize_t, pairs=dict,
               key=bytes, ab=tuple, u=Py_ssize_t)
cpdef _ipv4(bytes data, Py_ssize_t off, Py_ssize_t depth=*)

cpdef parse_segment(linktype, data)

# the link types that are not Ethernet, out of parse_segment: C calls
cdef _other_link(linktype, bytes data)
cdef _cooked(bytes data, Py_ssize_t hl, Py_ssize_t et_at, str what)
cdef _loopback(linktype, bytes data)

# _ipv4 past its fast path: any IPv4 packet, and the ones that are not TCP
@cython.locals(n=Py_ssize_t, vihl=Py_ssize_t, proto=Py_ssize_t, frag=Py_ssize_t, total=Py_ssize_t,
               end=Py_ssize_t, ihl=Py_ssize_t)
cdef _ipv4_general(bytes data, Py_ssize_t off, Py_ssize_t depth)
@cython.locals(n=Py_ssize_t, u=Py_ssize_t)
cdef _ipv4_not_tcp(bytes data, Py_ssize_t off, Py_ssize_t ihl, Py_ssize_t total, Py_ssize_t frag, Py_ssize_t proto,
                   Py_ssize_t depth)
