# Augmenting declarations for Cython (see state.pxd): the loss record is an extension type.
cdef class LossRecord:
    cdef public list gaps, missing, skipped, last, before, absent, cut, hidden
    cdef public object snap_length
    cdef public list gap_last

    cpdef note(self, Py_ssize_t d, missing, skipped, ts, before)
    cpdef note_cut(self, Py_ssize_t d, nbytes, hidden, snap_length, ts)
    cpdef bint hides(self)
    cpdef bint lost(self, Py_ssize_t d)
    cpdef bint lost_after(self, Py_ssize_t d, ts)
    cpdef bint lost_in_gap_after(self, Py_ssize_t d, ts)
    cpdef str missing_how(self, Py_ssize_t d)
    cpdef long long mark(self, Py_ssize_t d)
    cpdef long long cut_mark(self, Py_ssize_t d)
