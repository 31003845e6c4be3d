import cython
# Augmenting declarations for Cython (see findings.pxd): a room of its own (no base class).
from amqp_dissect.model.findings cimport Recorder
from amqp_dissect.amqp.values cimport read_bool as _bool

@cython.final
cdef class TransactionRules:
    cdef public Recorder ledger
    cdef public list transactions
