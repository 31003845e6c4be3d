# Augmenting declarations for Cython (dissector/model/serial.py): the serial functions are C
# functions on 64-bit integers, called by the other rooms of the model through cimport.
import cython

# serial numbers are 32-bit (the model passes only values the uint reader accepted): C arithmetic
cdef long long _M32, _MOD32, _HALF32

cpdef long long serial_add(long long s, long long n=*)
@cython.locals(d="long long")
cpdef long long serial_diff(long long a, long long b)
cpdef bint serial_lt(long long a, long long b)
cpdef long long serial_range_len(long long first, long long last)
cpdef bint serial_in_range(long long x, long long first, long long last)
@cython.locals(used="long long")
cpdef object grant_left(long long limit, long long size, long long count)
