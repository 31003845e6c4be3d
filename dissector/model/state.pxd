# Augmenting declarations for Cython: compiling dissector/model/state.py with this file next to
# it makes the state machines, the per-link delivery statistics and the per-delivery / per-link /
# per-session objects extension types (attributes in a C struct, every one public, so reading and
# setting them from Python behaves as with __slots__; the containers the hot path indexes are typed
# list / tuple / dict, the rest are Python objects) and lets the hot methods type their locals
# (@cython.locals in the .py).  The .py stays plain Python and is what runs when nothing is compiled.
import cython
from cpython cimport array as _carray
from amqp_dissect.amqp.framing cimport Frame
# the rooms of the model: C calls across modules
from amqp_dissect.model.serial cimport serial_add, serial_diff, serial_lt, serial_range_len, serial_in_range, grant_left
from amqp_dissect.model.machine cimport Machine, Endpoints
from amqp_dissect.model.delivery cimport DeliveryRecord
from amqp_dissect.model.deliveries cimport DeliveryTable
from amqp_dissect.model.stats cimport Latencies, DeliveryStats
from amqp_dissect.amqp.values cimport read_uint as _uint, read_bool as _bool, read_binary as _bin
from amqp_dissect.amqp.values cimport read_delivery_state as _delivery_state_value, delivery_state_plan as _state_plan

# the hot performatives' field indices (from the generated spec tables): C integers, so that
# frame.fields[i] is a C-indexed look-up
cdef Py_ssize_t T_HANDLE, T_DELIVERY_ID, T_DELIVERY_TAG, T_SETTLED, T_MORE, T_RCV_SETTLE_MODE, T_STATE, T_RESUME, T_ABORTED
cdef Py_ssize_t F_NII, F_IW, F_NOID, F_OW, F_HANDLE, F_DC, F_LC, F_AVAILABLE, F_DRAIN, F_ECHO
cdef Py_ssize_t KIND_PLAIN, KIND_RECEIVED, KIND_REJECTED, KIND_MODIFIED, KIND_DECLARED
cdef Py_ssize_t D_ROLE, D_FIRST, D_LAST, D_SETTLED, D_STATE
