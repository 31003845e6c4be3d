import cython
# Augmenting declarations for Cython (see state.pxd): the ledger of findings is an extension type,
# one object the tracker owns and hands to each rule room (each holds it as a typed reference).
@cython.final
cdef class Recorder:
    cdef public list violations, frame_errors, internal_errors
    cdef public dict _held
    cdef public dict _repeats
