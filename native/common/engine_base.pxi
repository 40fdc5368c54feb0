# The handle lifecycle every native engine shares, written once and included by _sock.pyx and
# _dpdk.pyx: start stop running join snapshot error close over the C engine. A subclass opens
# its C engine, sets n and roles, and supplies the _c_* calls into it and _destroy.
from cpython cimport array
from libc.stdint cimport uint64_t


def check_worker_keys(dict w, frozenset known, str what):
    """Every key of a worker's configuration is one this engine copies into its C struct: a
    misspelt key fails here instead of its C field silently taking the default."""
    unknown = sorted(set(w) - known)
    if unknown:
        raise ValueError(f"{what} worker: unknown configuration key {unknown[0]!r} "
                         f"(known: {', '.join(sorted(known))})")


cdef class EngineBase:
    cdef int n                  # workers
    cdef readonly list roles
    cdef object _join_lock      # close() in another thread waits for a join, then frees

    def __cinit__(self, *args, **kwargs):
        self.n = 0
        self.roles = []
        self._join_lock = threading.Lock()

    # what each engine supplies
    cdef bint _is_open(self):
        return False

    cdef int _c_start(self, char *err, size_t errlen) except -2:
        return -1

    cdef void _c_stop(self):
        pass

    cdef object _c_running(self):
        return 0

    cdef void _c_join(self) noexcept nogil:
        pass

    cdef void _c_snapshot(self, int i, uint64_t *counters, uint64_t *hist):
        pass

    cdef object _c_error(self):
        return None

    cdef void _destroy(self):
        pass

    cdef _closed(self):
        pass

    # the handle (perfkit.engines.EngineHandle)
    cdef int _check_open(self) except -1:
        if not self._is_open():
            raise EngineError("the engine is closed")
        return 0

    @property
    def nworkers(self):
        return self.n

    def start(self):
        cdef char err[512]
        self._check_open()
        err[0] = 0
        if self._c_start(err, sizeof(err)) != 0:
            raise EngineError(err.decode(errors="replace"))

    def stop(self):
        """Ask every worker to stop (safe from any thread)."""
        if self._is_open():
            self._c_stop()

    def running(self):
        self._check_open()
        return self._c_running()

    def join(self):
        """Wait for every worker; they are time-bounded. Releases the GIL."""
        with self._join_lock:
            self._check_open()
            with nogil:
                self._c_join()

    def error(self):
        self._check_open()
        return self._c_error()

    def snapshot(self):
        """[(counters, histogram)] per worker, as array('Q')."""
        cdef array.array c, h
        cdef int i
        self._check_open()
        out = []
        for i in range(self.n):
            c = array.clone(_array.array("Q"), PK_NCOUNTERS, zero=False)
            h = array.clone(_array.array("Q"), PK_HIST_BUCKETS, zero=False)
            # with the GIL (a copy of a few KB): close() in another thread cannot free the engine meanwhile
            self._c_snapshot(i, <uint64_t *>c.data.as_voidptr, <uint64_t *>h.data.as_voidptr)
            out.append((c, h))
        return out

    def close(self):
        """Stop and join the workers, free the engine (safe from any thread)."""
        self.stop()   # a join() in another thread returns soon
        with self._join_lock:
            self._destroy()
        self._closed()
