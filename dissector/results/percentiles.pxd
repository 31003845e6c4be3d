# Augmenting declarations for Cython (dissector/results/percentiles.py): the sort of a latency
# array runs on C doubles.
import cython

@cython.locals(n=Py_ssize_t, start=Py_ssize_t, end=Py_ssize_t, root=Py_ssize_t, child=Py_ssize_t, t=double)
cpdef void _heapsort(double[:] a)
