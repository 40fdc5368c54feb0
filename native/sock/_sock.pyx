# cython: language_level=3
"""Thin Cython face of the kernel-socket engine (sock_engine.c).

Python describes the workers; C creates the sockets and runs one pthread per
worker with no GIL. Python only samples counters and joins.
"""
from cpython cimport array
import array as _array
import ipaddress
import socket
import threading

from perfkit.errors import EngineError

from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from pk_common cimport PK_NCOUNTERS, PK_HIST_BUCKETS
from pk_sock cimport *

include "engine_base.pxi"

# the worker configuration keys __cinit__ copies into pk_sock_worker_cfg (check_worker_keys)
WORKER_KEYS = frozenset((
    "role", "local", "remote", "peer", "size", "flows", "batch", "gso", "rate", "duration", "count",
    "busy_poll", "cpu", "proto", "sock_buf", "flip", "access_recv", "netns", "users", "keepalive",
    "think", "ramp", "connect_timeout", "response_timeout", "blob", "url_random", "tls", "user_base",
    "stages", "rate_stages"))

ROLES = {
    "udp_send": PK_UDP_SEND, "udp_recv": PK_UDP_RECV,
    "udp_reflect": PK_UDP_REFLECT, "udp_ping": PK_UDP_PING,
    "tcp_send": PK_TCP_SEND, "tcp_recv": PK_TCP_RECV,
    "tcp_ping": PK_TCP_PING, "tcp_pong": PK_TCP_PONG,
    "http_client": PK_HTTP_CLIENT, "http_server": PK_HTTP_SERVER,
}
MAX_WORKERS = PK_SOCK_MAX_WORKERS
MAX_FLOWS = PK_SOCK_MAX_FLOWS
MAX_BATCH = PK_SOCK_MAX_BATCH
MAX_GSO = PK_SOCK_MAX_GSO
MAX_USERS = PK_SOCK_MAX_USERS
HAVE_TLS = bool(pk_sock_have_tls())  # HTTPS client: built with OpenSSL


cdef void _fill_addr(pk_sock_addr *a, object host, int port) except *:
    ip = ipaddress.ip_address(host)
    packed = ip.packed
    a.family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    memset(a.ip, 0, 16)
    memcpy(a.ip, <const char *>packed, len(packed))
    a.port = port


cdef class SockEngine(EngineBase):
    """Workers as dicts: role, local=(host, port), remote=(host, port),
    peer (index of an earlier worker whose bound port is the target),
    size, flows, batch, gso, rate (messages/s, 0 = unlimited), duration (s),
    count (senders: messages, or round trips, before they stop; 0/None = no limit),
    busy_poll, cpu, proto (tcp|sctp), sock_buf (bytes; 0/None = the default),
    flip (stream roles: a sender accepts, a receiver connects), access_recv (read every byte
    received), netns; HTTP roles: users, keepalive,
    think, ramp, connect_timeout, response_timeout (s), blob (request or response bytes;
    a client's blob may hold several requests back to back), url_random, tls, user_base, stages
    ([(seconds, users)], a closed loop's load stages) (netns: a /run/netns/NAME path to work in)."""
    cdef pk_sock_engine *e

    def __cinit__(self, list workers):
        cdef char err[512]
        cdef int i
        cdef pk_sock_worker_cfg *cfgs
        self.e = NULL
        self.n = len(workers)
        if not 0 < self.n <= PK_SOCK_MAX_WORKERS:
            raise ValueError(f"workers: between 1 and {PK_SOCK_MAX_WORKERS}, not {self.n}")
        cfgs = <pk_sock_worker_cfg *>calloc(self.n, sizeof(pk_sock_worker_cfg))
        if cfgs == NULL:
            raise MemoryError()
        blobs = []  # keeps each worker's bytes alive until create has copied them
        try:
            self.roles = []
            for i, w in enumerate(workers):
                check_worker_keys(w, WORKER_KEYS, "socket engine")
                self.roles.append(w["role"])
                cfgs[i].role = ROLES[w["role"]]
                local = w.get("local", ("127.0.0.1", 0))
                remote = w.get("remote", local)
                _fill_addr(&cfgs[i].local, local[0], local[1])
                _fill_addr(&cfgs[i].remote, remote[0], remote[1])
                cfgs[i].peer = w.get("peer", -1)
                cfgs[i].size = w["size"]
                cfgs[i].flows = w.get("flows", 1)
                cfgs[i].batch = w.get("batch", 1)
                cfgs[i].gso = w.get("gso", 0)
                cfgs[i].rate = w.get("rate", 0.0)
                cfgs[i].duration_ns = <unsigned long long>(w.get("duration", 0.0) * 1e9)
                cfgs[i].count = w.get("count") or 0
                cfgs[i].busy_poll = 1 if w.get("busy_poll", False) else 0
                cfgs[i].cpu = -1 if w.get("cpu") is None else w["cpu"]
                cfgs[i].proto = {"tcp": socket.IPPROTO_TCP, "sctp": 132}[w.get("proto", "tcp")]
                cfgs[i].sock_buf = w.get("sock_buf") or 0
                cfgs[i].flip = 1 if w.get("flip") else 0
                cfgs[i].access_recv = 1 if w.get("access_recv") else 0
                netns = (w.get("netns") or "").encode()
                if len(netns) >= sizeof(cfgs[i].netns):
                    raise ValueError(f"netns: path longer than {sizeof(cfgs[i].netns) - 1} bytes: {w['netns']!r}")
                memcpy(cfgs[i].netns, <const char *>netns, len(netns))
                cfgs[i].users = w.get("users", 0)
                cfgs[i].keepalive = 1 if w.get("keepalive", True) else 0
                cfgs[i].think_ns = <unsigned long long>(w.get("think", 0.0) * 1e9)
                cfgs[i].ramp_ns = <unsigned long long>(w.get("ramp", 0.0) * 1e9)
                cfgs[i].connect_timeout_ns = <unsigned long long>(w.get("connect_timeout", 5.0) * 1e9)
                cfgs[i].response_timeout_ns = <unsigned long long>(w.get("response_timeout", 10.0) * 1e9)
                blob = bytes(w.get("blob", b""))
                blobs.append(blob)
                cfgs[i].blob = <const unsigned char *>blob if blob else NULL
                cfgs[i].blob_len = len(blob)
                cfgs[i].url_random = 1 if w.get("url_random", False) else 0
                cfgs[i].tls = 1 if w.get("tls", False) else 0
                cfgs[i].user_base = w.get("user_base", 0)
                stages = w.get("stages") or ()   # [(seconds, users)]: the stage plan, ends cumulative here
                if len(stages) > PK_SOCK_MAX_STAGES:
                    raise ValueError(f"stages: at most {PK_SOCK_MAX_STAGES}, not {len(stages)}")
                cfgs[i].nstages = len(stages)
                end = 0.0
                for k, (secs, users) in enumerate(stages):
                    end += secs
                    cfgs[i].stage_end_ns[k] = <unsigned long long>(end * 1e9)
                    cfgs[i].stage_users[k] = users
                rstages = w.get("rate_stages") or ()   # [(seconds, requests/s)]: an open loop's rate plan
                if rstages and stages:
                    raise ValueError("stages: users stages or rate stages, not both")
                if len(rstages) > PK_SOCK_MAX_STAGES:
                    raise ValueError(f"rate_stages: at most {PK_SOCK_MAX_STAGES}, not {len(rstages)}")
                if rstages:
                    cfgs[i].nstages = len(rstages)
                end = 0.0
                for k, (secs, rate) in enumerate(rstages):
                    end += secs
                    cfgs[i].stage_end_ns[k] = <unsigned long long>(end * 1e9)
                    cfgs[i].stage_rate[k] = rate
            err[0] = 0
            self.e = pk_sock_create(cfgs, self.n, err, sizeof(err))
            if self.e == NULL:
                raise EngineError(err.decode(errors="replace"))
        finally:
            free(cfgs)

    cdef void _destroy(self):
        cdef pk_sock_engine *e = self.e
        # closed before the GIL is let go: another thread's snapshot() then sees a closed
        # engine, never one being freed
        self.e = NULL
        if e != NULL:
            with nogil:
                pk_sock_destroy(e)

    def __dealloc__(self):
        self._destroy()

    cdef pk_sock_engine *_live(self) except NULL:
        if self.e == NULL:
            raise EngineError("the engine is closed")
        return self.e

    def bound_port(self, int worker):
        return pk_sock_bound_port(self._live(), worker)

    cdef bint _is_open(self):
        return self.e != NULL

    cdef int _c_start(self, char *err, size_t errlen) except -2:
        return pk_sock_start(self.e, err, errlen)

    cdef void _c_stop(self):
        pk_sock_stop(self.e)

    cdef object _c_running(self):
        return pk_sock_running(self.e)

    cdef void _c_join(self) noexcept nogil:
        pk_sock_join(self.e)

    cdef void _c_snapshot(self, int i, uint64_t *counters, uint64_t *hist):
        pk_sock_snapshot(self.e, i, counters, hist)

    cdef object _c_error(self):
        cdef const char *msg = pk_sock_error(self.e)
        return None if msg == NULL else msg.decode(errors="replace")

    def http_urls(self, int worker=0):
        """An http_client worker's counts per request template (URL), in the
        template order: [(requests, responses, failed)]."""
        cdef pk_sock_engine *e = self._live()
        n = pk_sock_http_urls(e, worker, NULL, 0)
        if n <= 0:
            return []
        out = array.clone(_array.array("Q"), 3 * n, zero=True)
        n = pk_sock_http_urls(e, worker, <unsigned long long *>(<array.array>out).data.as_voidptr, n)
        return [tuple(out[3 * k:3 * k + 3]) for k in range(n)]

    def flow_sent(self, int worker):
        """A udp_send worker's packets sent per flow (its next sequence numbers)."""
        cdef pk_sock_engine *e = self._live()
        out = array.clone(_array.array("Q"), PK_SOCK_MAX_FLOWS, zero=True)
        n = pk_sock_flow_sent(e, worker, <unsigned long long *>(<array.array>out).data.as_voidptr,
                              PK_SOCK_MAX_FLOWS)
        return list(out[:n])

    def set_rate(self, double rate):
        """Every udp_send worker paces at rate messages/s from its next send batch (0 = as fast
        as it can); the rate_target gauge follows. The caller checks the value (Run.set_rate)."""
        cdef pk_sock_engine *e = self._live()
        senders = [i for i, role in enumerate(self.roles) if role == "udp_send"]
        if not senders:
            raise EngineError("set_rate: this engine has no udp_send worker")
        for i in senders:
            if pk_sock_set_rate(e, i, rate) != 0:
                raise ValueError(f"set_rate: {rate!r} messages/s per sender is out of range 0..1e10")

    def set_remote_sent(self, int worker, sent):
        """Tell a udp_recv worker what a remote sender sent per flow (before join)."""
        cdef pk_sock_engine *e = self._live()
        cdef array.array a = _array.array("Q", sent)
        if pk_sock_set_remote_sent(e, worker, <unsigned long long *>a.data.as_voidptr, len(a)) != 0:
            raise EngineError(f"worker {worker}: not a udp_recv worker, or already settled")
