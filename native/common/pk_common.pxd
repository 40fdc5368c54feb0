# Cython declarations for perfkit's shared C headers (counters, histogram).
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "perfkit/counters.h":
    enum: PK_NCOUNTERS
    const char *pk_counter_names[]
    const char *pk_counter_units[]
    const char *pk_counter_groups[]
    const char *pk_counter_labels[]
    const int pk_counter_kinds[]

cdef extern from "perfkit/hist.h":
    enum: PK_HIST_BUCKETS
    enum: PK_HIST_SUB_BITS
    uint64_t pk_hist_lower(uint32_t i) nogil
    uint32_t pk_hist_index(uint64_t v) nogil

cdef extern from "perfkit/wire.h":
    enum: PK_WIRE_HDR_LEN
