# Augmenting declarations for Cython (see findings.pxd).
from amqp_dissect.model.findings cimport Recorder

cdef class StallRules(Recorder):
    cdef public list stalls
