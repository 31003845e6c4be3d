# Augmenting declarations for Cython (see findings.pxd).
from amqp_dissect.model.stall_rules cimport StallRules
from amqp_dissect.amqp.values cimport read_bool as _bool

cdef class Transactions(StallRules):
    cdef public list transactions
