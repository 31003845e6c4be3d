# Augmenting declarations for Cython (dissector/amqp/values.py): the value readers the model calls
# per frame are C functions, cimported by the model's rooms.
import cython

cdef dict _STATE_KIND

cpdef read_uint(v, top=*)
cpdef read_bool(v)
cpdef read_binary(v)
cpdef read_delivery_state(v)
cpdef tuple delivery_state_plan(state)
