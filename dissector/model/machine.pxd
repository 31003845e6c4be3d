# Augmenting declarations for Cython (dissector/model/machine.py): the state machines as
# extension types; the other rooms of the model cimport them.
import cython

cdef list _NO_MSGS  # (what Endpoints.frame returns between steady endpoints: a C global, no look-up by name)

@cython.final
cdef class Machine:
    cdef public object name, states, inputs, transitions, initial, deferrable, steady
    cdef public tuple names, table, defer
    cdef public dict codes, in_codes, explained
    cdef public Py_ssize_t steady_code, s_frame, r_frame
    cdef public tuple moves

    cpdef tuple step_code(self, Py_ssize_t sc, Py_ssize_t ic, inp=*)


cdef class Endpoints:
    cdef public Machine machine
    cdef public list codes
    cdef public tuple queue

    cpdef list advance(self, d, s_in, r_in)
    @cython.locals(m=Machine, codes=list, q=list, e=Py_ssize_t)
    cpdef list advance_codes(self, Py_ssize_t d, Py_ssize_t s_ic, Py_ssize_t r_ic, s_in=*, r_in=*)
    @cython.locals(m=Machine, codes=list)
    @cython.locals(codes=list, m=Machine, steady=Py_ssize_t, c0=Py_ssize_t, c1=Py_ssize_t, q=tuple, q0=list, q1=list)
    cpdef list frame(self, Py_ssize_t d)
