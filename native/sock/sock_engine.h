/* perfkit's kernel-socket engine.
 *
 * An engine is a set of workers, one pthread each. Every worker plays one
 * role over its own sockets, owns one counter block and one histogram, and
 * never touches Python. The caller (perfkit._sock, Cython) creates the
 * engine, starts it, samples the counters while it runs, and joins it.
 *
 * Every worker stops by itself: senders at their duration (or message count), receivers once
 * their peer sender is done and the socket has been quiet for a moment, and
 * everyone at a hard deadline of duration + PK_SOCK_DRAIN_NS (a stream receiver that read
 * within the last PK_SOCK_DRAIN_NS goes on, up to PK_SOCK_FED_NS more: what a starved
 * receiver has yet to read was sent, and is counted when it is read).
 */
#ifndef PERFKIT_SOCK_ENGINE_H
#define PERFKIT_SOCK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "perfkit/counters.h"
#include "perfkit/hist.h"

enum pk_sock_role {
    PK_UDP_SEND = 0,   /* sendmmsg stream, one socket (source port) per flow */
    PK_UDP_RECV,       /* recvmmsg sink: loss, duplicates, reordering, latency */
    PK_UDP_REFLECT,    /* recvmmsg, send every datagram back to its source */
    PK_UDP_PING,       /* one datagram out, wait for it back: round trips */
    PK_TCP_SEND,       /* connect, write messages */
    PK_TCP_RECV,       /* accept one connection, read until EOF */
    PK_TCP_PING,       /* connect, write a message, read it back: round trips */
    PK_TCP_PONG,       /* accept one connection, echo messages */
    PK_HTTP_CLIENT,    /* HTTP load: virtual users on one epoll loop (http_roles.c) */
    PK_HTTP_SERVER,    /* HTTP server: a fixed response to every request */
    PK_NROLES
};

/* An IPv4 or IPv6 address with port; ip holds 4 or 16 bytes, network order. */
typedef struct pk_sock_addr {
    int family;        /* AF_INET or AF_INET6 */
    uint8_t ip[16];
    uint16_t port;     /* host order; 0 = any (bind) */
} pk_sock_addr;

#define PK_SOCK_MAX_STAGES  64

typedef struct pk_sock_worker_cfg {
    int role;
    pk_sock_addr local;     /* bind address */
    pk_sock_addr remote;    /* target of send/ping roles */
    int peer;               /* worker index whose bound port is the target, or -1 */
    uint32_t size;          /* payload (UDP) or message (TCP) bytes */
    uint32_t flows;         /* UDP_SEND: sockets; UDP_RECV: flow ids tracked */
    uint32_t batch;         /* messages per sendmmsg/recvmmsg */
    uint32_t gso;           /* UDP_SEND: datagrams per UDP GSO send (UDP_SEGMENT); 0/1 = off */
    double rate;            /* messages per second; 0 = as fast as possible */
    uint64_t duration_ns;   /* how long senders send */
    uint64_t count;         /* senders: stop after this many messages (round trips); 0 = no limit */
    int busy_poll;          /* spin on the socket for a moment before sleeping (wait_flag) */
    int cpu;                /* pin the thread to this CPU, -1 = do not pin */
    int proto;              /* stream roles: IPPROTO_TCP (0 = TCP) or IPPROTO_SCTP */
    uint32_t sock_buf;      /* SO_SNDBUF/SO_RCVBUF bytes (qperf's -sb); 0 = 8 MiB, but the
                               kernel's autotuning on a TCP sender or pinger */
    int flip;               /* stream roles: accept where the role connects and connect where it
                               accepts (qperf's -f1: the server sends, the client receives) */
    int access_recv;        /* socket roles: read every byte received (qperf's -ar), as an
                               application would; counted in bytes_read */
    char netns[108];        /* network namespace file (/run/netns/NAME) to work in; "" = ours */
    /* HTTP roles */
    uint32_t users;         /* client: virtual users (connections); server: connections at once */
    int keepalive;          /* client: reuse connections */
    uint64_t think_ns;      /* client: pause after each response (closed loop) */
    uint64_t ramp_ns;       /* client: users start evenly over this time */
    uint64_t connect_timeout_ns, response_timeout_ns;
    const uint8_t *blob;    /* client: the request bytes; server: the response bytes (copied) */
    uint32_t blob_len;
    int url_random;         /* client: blob holds several requests back to back; each request
                               takes the next (0) or one at random (1) */
    int tls;                /* client: HTTPS (through OpenSSL; no certificate check, as wrk) */
    uint32_t user_base;     /* client: index of this worker's first user among all workers' */
    /* client, closed loop: load stages (k6's stages). The users wanted ramp linearly from the
     * previous stage's count (0 at the start) to stage_users[k] at stage_end_ns[k] after the
     * start; users above the count finish their request out, then close. 0 stages: all users */
    uint32_t nstages;
    uint64_t stage_end_ns[PK_SOCK_MAX_STAGES];
    uint32_t stage_users[PK_SOCK_MAX_STAGES];
} pk_sock_worker_cfg;

#define PK_SOCK_MAX_WORKERS 64
#define PK_SOCK_MAX_FLOWS   1024
#define PK_SOCK_MAX_BATCH   256
#define PK_SOCK_MAX_USERS   100000
#define PK_SOCK_MAX_BLOB    (1u << 20)
#define PK_SOCK_MAX_GSO     64      /* the kernel's UDP_MAX_SEGMENTS on older kernels */
#define PK_SOCK_DRAIN_NS    1000000000ull  /* receivers wait at most this after duration */
#define PK_SOCK_FED_NS      10000000000ull /* a stream receiver still being fed reads on at most this past the drain */

typedef struct pk_sock_engine pk_sock_engine;

/* Create sockets, bind and listen; nothing runs yet. NULL + err on failure. */
pk_sock_engine *pk_sock_create(const pk_sock_worker_cfg *cfgs, int n, char *err, size_t errlen);
int pk_sock_nworkers(const pk_sock_engine *e);
int pk_sock_bound_port(const pk_sock_engine *e, int worker);
/* Start every worker thread. 0 on success, -1 + err. */
int pk_sock_start(pk_sock_engine *e, char *err, size_t errlen);
/* Ask every worker to stop now (senders stop sending, receivers drain). */
void pk_sock_stop(pk_sock_engine *e);
/* Number of workers still running. */
int pk_sock_running(const pk_sock_engine *e);
/* Wait for every worker (they are all time-bounded), then settle loss
 * accounting with what the senders sent. Call without the GIL. */
void pk_sock_join(pk_sock_engine *e);
/* UDP_SEND: packets sent per flow (= the next sequence number), up to n flows.
 * Returns the number of flows copied. */
int pk_sock_flow_sent(const pk_sock_engine *e, int worker, uint64_t *out, uint32_t n);
/* UDP_SEND: pace at rate messages/s from now on (0 = as fast as possible); the worker takes
 * it at its next send batch, re-basing its pacer there. -1: not a sender, or rate out of
 * 0..1e10. Any thread; no lock. */
int pk_sock_set_rate(pk_sock_engine *e, int worker, double rate);
/* UDP_RECV fed from another host: what the remote sender sent per flow, so that
 * join() settles loss as it does for a local sender. Call before join(). */
int pk_sock_set_remote_sent(pk_sock_engine *e, int worker, const uint64_t *sent, uint32_t n);
/* Copy one worker's counters (PK_NCOUNTERS) and histogram (PK_HIST_BUCKETS). */
void pk_sock_snapshot(const pk_sock_engine *e, int worker, uint64_t *counters, uint64_t *hist);
/* HTTP client: per request template (URL), 3 counts each: requests sent,
 * responses received whole, failed (4xx/5xx or no response). Copies up to n
 * templates into out[3 * n]; returns the number of templates (0: not a client). */
int pk_sock_http_urls(const pk_sock_engine *e, int worker, uint64_t *out, uint32_t n);
/* 1 if the engine was built with OpenSSL (HTTPS client), else 0. */
int pk_sock_have_tls(void);
/* The first worker error, or NULL. */
const char *pk_sock_error(const pk_sock_engine *e);
void pk_sock_destroy(pk_sock_engine *e);

#endif
