# Augmenting declarations for Cython: compiling dissector/capture/netparse.py with this file beside
# it reads the common IPv4/TCP headers as C integers.  The .py stays plain Python.
import cython

@cython.locals(n=Py_ssize_t, vihl=Py_ssize_t, proto=Py_ssize_t, frag=Py_ssize_t, offflags=Py_ssize_t,
               total=Py_ssize_t, end=Py_ssize_t, ps=Py_ssize_t, sport=Py_ssize_t, dport=Py_ssize_t,
               seq="unsigned long long", ack="unsigned long long", ihl=Py_ssize_t, pairs=dict,
               key=bytes, ab=tuple, u=Py_ssize_t)
cpdef _ipv4(bytes data, Py_ssize_t off, Py_ssize_t depth=*)

cpdef parse_segment(linktype, data)
