# Augmenting declarations for Cython (see state.pxd): the loss record is an extension type.
cdef class LossRecord:
    cdef public list gaps, missing, skipped, last, before, absent

    cpdef note(self, Py_ssize_t d, missing, skipped, ts, before)
    cpdef bint lost(self, Py_ssize_t d)
    cpdef bint lost_after(self, Py_ssize_t d, ts)
    cpdef long long mark(self, Py_ssize_t d)
