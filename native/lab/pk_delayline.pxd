# Cython declarations for perfkit's delay line (delayline.h).
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "delayline.h":
    enum: PK_DL_MAX_TAPS
    enum: PK_DL_MAX_POOL
    enum: PK_DL_NCOUNTERS
    enum: PK_DL_NSTATS
    enum: PK_DL_queued
    enum: PK_DL_STAMP_TPID
    enum: PK_DL_STAMP_SHIFT

    const char *pk_dl_counter_names[]
    const char *pk_dl_stat_names[]

    ctypedef struct pk_dl:
        pass

    pk_dl *pk_dl_create(const int *fds, int ntaps, uint32_t mtu, uint32_t pool, int stamped,
                        int rt_priority, int notify_fd, char *err, size_t errlen)
    int pk_dl_ntaps(const pk_dl *dl) nogil
    int pk_dl_start(pk_dl *dl, char *err, size_t errlen)
    int pk_dl_set_config(pk_dl *dl, int tap, uint64_t delay_ns, uint64_t jitter_ns,
                         double reorder, double corrupt) nogil
    void pk_dl_stop(pk_dl *dl) nogil
    int pk_dl_running(const pk_dl *dl) nogil
    void pk_dl_join(pk_dl *dl) nogil
    void pk_dl_counters(const pk_dl *dl, int tap, uint64_t *out) nogil
    void pk_dl_stats(const pk_dl *dl, uint64_t *out) nogil
    const char *pk_dl_error(const pk_dl *dl)
    void pk_dl_destroy(pk_dl *dl) nogil
