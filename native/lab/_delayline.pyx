# cython: language_level=3
"""Thin Cython face of the lab's delay line (delayline.c).

Python opens the taps and hands their fds over; one C thread (no GIL) reads them,
holds each packet for delay +- jitter, reorders and corrupts a share, and writes it
back. Python only sets the configuration per tap, reads counters, and stops it.
"""
from libc.stdint cimport uint64_t
from libc.stdlib cimport calloc, free

from pk_delayline cimport *

MAX_TAPS = PK_DL_MAX_TAPS
MAX_POOL = PK_DL_MAX_POOL
COUNTER_NAMES = tuple(pk_dl_counter_names[i].decode() for i in range(PK_DL_NCOUNTERS))
STAT_NAMES = tuple(pk_dl_stat_names[i].decode() for i in range(PK_DL_NSTATS))
MAX_DELAY_NS = 20_000_000_000
STAMP_TPID = PK_DL_STAMP_TPID
STAMP_SHIFT = PK_DL_STAMP_SHIFT


cdef class DelayLine:
    """DelayLine(fds, mtu, pool=0, stamped=False, rt_priority=0, notify_fd=-1): a delay
    line over tap fds (non-blocking, IFF_TAP | IFF_NO_PI; the caller keeps and closes
    them). pool: packet buffers (0: the default). stamped: frames carry their diversion
    time in an outer 802.1ad tag (the lab's tc BPF program pushes it; the line strips it).
    rt_priority: run the packet thread SCHED_FIFO at this priority where allowed (0: no);
    where refused, at nice -20 and a short slice where allowed (stats() rt_priority,
    nice_boost and slice_ns say which; tid is the thread's id).
    notify_fd gets one byte when the thread ends. Every tap starts undelayed."""
    cdef pk_dl *dl
    cdef readonly int ntaps

    def __cinit__(self, fds, int mtu, unsigned int pool=0, bint stamped=False, int rt_priority=0,
                  int notify_fd=-1):
        cdef char err[512]
        cdef int *cfds
        cdef int i
        self.dl = NULL
        fds = list(fds)
        self.ntaps = len(fds)
        if not 0 < self.ntaps <= PK_DL_MAX_TAPS:
            raise ValueError(f"fds: between 1 and {PK_DL_MAX_TAPS} taps, not {self.ntaps}")
        cfds = <int *>calloc(self.ntaps, sizeof(int))
        if cfds == NULL:
            raise MemoryError()
        try:
            for i in range(self.ntaps):
                cfds[i] = int(fds[i])
            err[0] = 0
            self.dl = pk_dl_create(cfds, self.ntaps, mtu, pool, stamped, rt_priority, notify_fd,
                                   err, sizeof(err))
            if self.dl == NULL:
                raise ValueError(err.decode(errors="replace"))
        finally:
            free(cfds)

    def __dealloc__(self):
        if self.dl != NULL:
            with nogil:
                pk_dl_destroy(self.dl)
            self.dl = NULL

    cdef pk_dl *_live(self) except NULL:
        if self.dl == NULL:
            raise RuntimeError("the delay line is closed")
        return self.dl

    def start(self):
        """Start the packet thread."""
        cdef char err[512]
        err[0] = 0
        if pk_dl_start(self._live(), err, sizeof(err)) != 0:
            raise RuntimeError(err.decode(errors="replace"))

    def set_config(self, int tap, delay_ns, jitter_ns=0, double reorder=0.0, double corrupt=0.0):
        """Change tap's impairment now (any thread): delay and jitter in ns, reorder and
        corrupt as probabilities 0..1."""
        cdef pk_dl *dl = self._live()
        d, j = int(delay_ns), int(jitter_ns)
        if not 0 <= tap < self.ntaps:
            raise ValueError(f"tap: {tap} is outside 0..{self.ntaps - 1}")
        if not (0 <= d <= MAX_DELAY_NS and 0 <= j <= MAX_DELAY_NS):
            raise ValueError(f"delay_ns, jitter_ns: {d}, {j} outside 0..{MAX_DELAY_NS}")
        if not (0.0 <= reorder <= 1.0 and 0.0 <= corrupt <= 1.0):
            raise ValueError(f"reorder, corrupt: {reorder}, {corrupt} outside 0..1")
        if pk_dl_set_config(dl, tap, d, j, reorder, corrupt) != 0:
            raise ValueError(f"tap {tap}: bad configuration")

    def stop(self):
        """Ask the thread to stop (safe from any thread); it drops what it holds."""
        if self.dl != NULL:
            pk_dl_stop(self.dl)

    def running(self):
        return self.dl != NULL and pk_dl_running(self.dl) != 0

    def join(self):
        """Wait for the thread (it ends within 0.1 s of stop()). Releases the GIL."""
        cdef pk_dl *dl = self._live()
        with nogil:
            pk_dl_join(dl)

    def error(self):
        """Why the thread stopped by itself (a tap failed), or None."""
        cdef const char *msg = pk_dl_error(self._live())
        return None if msg == NULL else msg.decode(errors="replace")

    def counters(self, int tap):
        """One tap's counters as a dict (COUNTER_NAMES)."""
        cdef uint64_t c[PK_DL_NCOUNTERS]
        cdef pk_dl *dl = self._live()
        if not 0 <= tap < self.ntaps:
            raise ValueError(f"tap: {tap} is outside 0..{self.ntaps - 1}")
        pk_dl_counters(dl, tap, c)
        return {COUNTER_NAMES[i]: c[i] for i in range(PK_DL_NCOUNTERS)}

    def stats(self):
        """Whole-line figures as a dict (STAT_NAMES)."""
        cdef uint64_t s[PK_DL_NSTATS]
        pk_dl_stats(self._live(), s)
        return {STAT_NAMES[i]: s[i] for i in range(PK_DL_NSTATS)}

    def close(self):
        """Stop, join and free (the tap fds stay open: they are the caller's)."""
        if self.dl != NULL:
            with nogil:
                pk_dl_destroy(self.dl)
            self.dl = NULL
