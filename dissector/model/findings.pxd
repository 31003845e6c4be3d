# Augmenting declarations for Cython (see state.pxd): the rooms of the tracker are extension types,
# each the base of the next (findings <- stall_rules <- transactions <- sessions <- settlement <-
# links <- transfers <- tracker); a room's hot methods are C calls of the rooms above it.
cdef class Recorder:
    cdef public list violations, frame_errors, internal_errors
    cdef public dict _held
    cdef public dict _repeats
