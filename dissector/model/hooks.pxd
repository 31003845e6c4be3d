# Augmenting declarations for Cython (see findings.pxd): the hooks are C calls from the rooms
# (cpdef: a Python subclass of the tracker may override them).
cdef class Hooks:
    cpdef _on_fold(self, dlv)
    cpdef _on_credit(self, link, f)
    cpdef _on_window(self, s, sender, f)
