# Augmenting declarations for Cython (see state.pxd): the loss record is an extension type.
cdef tuple _ZEROS, _NONES, _FALSES

cdef list _own(pair)
cdef tuple _with_true(pair, Py_ssize_t d)
cdef tuple _set_pair(pair, Py_ssize_t d, value)
cdef list _ONE_TIMES
cdef tuple _one_time(Py_ssize_t d, value)

cdef class LossRecord:
    # (each a pair: a shared tuple of defaults until its first write, a list of the record's own from then)
    cdef public object gaps, missing, skipped, last, before, absent, cut, hidden
    cdef public object snap_length
    cdef public object gap_last
    cdef public bint shared

    cpdef note(self, Py_ssize_t d, missing, skipped, ts, before)
    cpdef note_cut(self, Py_ssize_t d, nbytes, hidden, snap_length, ts)
    cpdef note_absent(self, Py_ssize_t d)
    cpdef forget_last(self, Py_ssize_t d)
    cpdef bint hides(self)
    cpdef bint lost(self, Py_ssize_t d)
    cpdef bint lost_after(self, Py_ssize_t d, ts)
    cpdef bint lost_in_gap_after(self, Py_ssize_t d, ts)
    cpdef str missing_how(self, Py_ssize_t d)
    cpdef long long mark(self, Py_ssize_t d)
    cpdef long long cut_mark(self, Py_ssize_t d)
