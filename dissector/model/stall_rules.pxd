import cython
# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
@cython.final
cdef class StallRules:
    cdef public list stalls
