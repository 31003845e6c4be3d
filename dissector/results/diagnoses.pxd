# Augmenting declarations for Cython: compiling dissector/results/diagnoses.py with this file beside
# it makes FoldWatch an extension type, so the per-delivery fold (Analyzer._on_fold) is a C call
# reading the delivery's C struct.
import cython
from amqp_dissect.model.delivery cimport DeliveryRecord
from amqp_dissect.model.stats cimport NsCache

@cython.final
cdef class FoldWatch:
    cdef public dict activity, messages
    cdef public set full
    cdef public object links_over, messages_over, read, reading
    cdef public object _link, _last

    @cython.locals(t=cython.longlong, lo=cython.longlong, hi=cython.longlong, merge=cython.longlong, last=list,
                   first=NsCache, lo_c=NsCache, hi_c=NsCache)
    cpdef fold(self, DeliveryRecord d)
    cpdef _interval(self, link, t)
    cdef _fold_big(self, DeliveryRecord d, ft, list last)
    cdef _fold_message(self, DeliveryRecord d)
