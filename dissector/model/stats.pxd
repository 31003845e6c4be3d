# Augmenting declarations for Cython (dissector/model/stats.py): the per-link delivery statistics and
# their latency columns are extension types; the tracker's links cimport DeliveryStats.
import cython
from cpython cimport array as _carray
from amqp_dissect.model.delivery cimport DeliveryRecord

@cython.final
cdef class Latencies:
    cdef public _carray.array values
    cdef public dict counts
    cdef public Py_ssize_t n, fold_at

    @cython.locals(k=Py_ssize_t)
    cpdef append(self, double x)
    cpdef _fold(self)
    @cython.locals(m=Py_ssize_t, size=Py_ssize_t, mask=Py_ssize_t, i=Py_ssize_t, h=Py_ssize_t,
                   a="long long", distinct=Py_ssize_t, v=double, b="unsigned long long",
                   u="unsigned long long", vals="double[:]", bits="long long[:]", at="long long[:]",
                   cnt="long long[:]")
    cpdef bint _fold_hashed(self)

@cython.locals(a="long long", b="long long", d="long long")
cpdef double seconds_between(t, t0) except? -1.0

@cython.final
cdef class NsCache:
    cdef public object obj
    cdef public long long ns

    @cython.locals(a="long long")
    cpdef bint read(self, t) except -1

cdef object _UNREAD

@cython.locals(at=NsCache, first=NsCache, d="long long")
cpdef double latency_seconds(t, t0) except? -1.0

cdef class DeliveryStats:
    cdef public long long deliveries, bytes, no_outcome, unsettled, presettled, aborted, resumed
    cdef public dict _outcomes
    cdef public object _run_outcome
    cdef public long long _run
    cdef public Latencies latency, outcome_latency

    cpdef _end_run(self)
    @cython.locals(st=tuple, lat=double, size="long long")
    cpdef add(self, DeliveryRecord d)
