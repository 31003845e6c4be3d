# Augmenting declarations for Cython: compiling dissector/results/analytics.py with this file beside
# it makes the Analyzer an extension type over StateTracker, so the per-delivery hook (_on_fold)
# is a C call.  Attributes not declared here live in the instance __dict__.
import cython
from amqp_dissect.model.state cimport DeliveryRecord
from amqp_dissect.model.stats cimport NsCache
from amqp_dissect.model.entities cimport Link, ConnectionBase
from amqp_dissect.model.tracker cimport StateTracker
from amqp_dissect.results.diagnoses cimport FoldWatch

cdef class Analyzer(StateTracker):
    cdef dict __dict__
    cdef public object keep_rows, delivery_sink, not_accepted_count, fold_out
    cdef public list _rows, _slowest, _not_accepted
    cdef public object _slow_min, _slow_cut_order
    cdef public bint _slow_min_c
    cdef public long long _slow_min_ns
    cdef public object _slow_cut_link
    cdef public Py_ssize_t _slow_cut_seq
    cdef public dict _stats_cache
    cdef public FoldWatch watch
    cdef public object clock

    cpdef feed(self, event)
    cpdef _on_fold(self, dlv)

    @cython.locals(d=DeliveryRecord)
    cpdef _notable(self, dlv, heaps=*)
    @cython.locals(below=bint, cut=object)
    cdef _notable_slow(self, DeliveryRecord d, heaps, slowest)
    @cython.locals(at=NsCache, first=NsCache, lat_c="long long", cut_c="long long")
    cdef bint _below_cut(self, DeliveryRecord d, t1, t0) except -1
    @cython.locals(cut=object)
    cdef _rank_slowest(self)

    @cython.locals(d=DeliveryRecord, ctx_index=list, ctx_rows=list, ctx_pos=dict,
                   delivery_id=list, tag=list, first_time=list, last_time=list, first_packet=list, last_packet=list,
                   frames=list, size=list, complete=list, presettled=list, aborted=list, resumed=list,
                   settled_by=list, settled_time=list, settled_packet=list, snd_time=list, rcv_time=list,
                   outcome=list, outcome_by=list, outcome_time=list, outcome_packet=list, errs=list, descs=list,
                   delivery_failed=list, undeliverable_here=list, received_state=list, txn_id=list,
                   rcv_settle_mode=list, disp_snd=list, disp_rcv=list, latency=list, outcome_latency=list,
                   unsettled_at=list, disp=list)
    cpdef tuple delivery_columns(self, ds)

@cython.locals(link=Link, conn=ConnectionBase)
cpdef tuple _table_order(DeliveryRecord d)

@cython.locals(link=Link, conn=ConnectionBase, a=object, b=object)
cpdef bint _before(DeliveryRecord d, tuple o)
