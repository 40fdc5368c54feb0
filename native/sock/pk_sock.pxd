# Cython declarations for perfkit's kernel-socket engine (sock_engine.h).
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "sock_engine.h":
    enum pk_sock_role:
        PK_UDP_SEND
        PK_UDP_RECV
        PK_UDP_REFLECT
        PK_UDP_PING
        PK_TCP_SEND
        PK_TCP_RECV
        PK_TCP_PING
        PK_TCP_PONG
        PK_HTTP_CLIENT
        PK_HTTP_SERVER
        PK_NROLES

    ctypedef struct pk_sock_addr:
        int family
        uint8_t ip[16]
        uint16_t port

    ctypedef struct pk_sock_worker_cfg:
        int role
        pk_sock_addr local
        pk_sock_addr remote
        int peer
        uint32_t size
        uint32_t flows
        uint32_t batch
        uint32_t gso
        double rate
        uint64_t duration_ns
        uint64_t count
        int busy_poll
        int cpu
        int proto
        uint32_t sock_buf
        int flip
        int access_recv
        char netns[108]
        uint32_t users
        int keepalive
        uint64_t think_ns
        uint64_t ramp_ns
        uint64_t connect_timeout_ns
        uint64_t response_timeout_ns
        const uint8_t *blob
        uint32_t blob_len
        int url_random
        int tls
        uint32_t user_base
        uint32_t nstages
        uint64_t stage_end_ns[64]
        uint32_t stage_users[64]
        double stage_rate[64]

    enum: PK_SOCK_MAX_WORKERS
    enum: PK_SOCK_MAX_FLOWS
    enum: PK_SOCK_MAX_BATCH
    enum: PK_SOCK_MAX_GSO
    enum: PK_SOCK_MAX_USERS
    enum: PK_SOCK_MAX_STAGES

    ctypedef struct pk_sock_engine:
        pass

    pk_sock_engine *pk_sock_create(const pk_sock_worker_cfg *cfgs, int n, char *err, size_t errlen)
    int pk_sock_nworkers(const pk_sock_engine *e)
    int pk_sock_bound_port(const pk_sock_engine *e, int worker)
    int pk_sock_start(pk_sock_engine *e, char *err, size_t errlen)
    void pk_sock_stop(pk_sock_engine *e) nogil
    int pk_sock_running(const pk_sock_engine *e) nogil
    void pk_sock_join(pk_sock_engine *e) nogil
    int pk_sock_flow_sent(const pk_sock_engine *e, int worker, uint64_t *out, uint32_t n) nogil
    int pk_sock_set_rate(pk_sock_engine *e, int worker, double rate) nogil
    int pk_sock_set_remote_sent(pk_sock_engine *e, int worker, const uint64_t *sent, uint32_t n) nogil
    void pk_sock_snapshot(const pk_sock_engine *e, int worker, uint64_t *counters, uint64_t *hist) nogil
    int pk_sock_http_urls(const pk_sock_engine *e, int worker, uint64_t *out, uint32_t n) nogil
    int pk_sock_have_tls()
    const char *pk_sock_error(const pk_sock_engine *e)
    void pk_sock_destroy(pk_sock_engine *e) nogil
