/* What the socket engine's units share (sock_engine.c: the engine and the stream and datagram
 * roles; http_roles.c: the HTTP roles): the worker, the engine, and the helpers both call.
 * Not for Cython: the public face is sock_engine.h. */
#ifndef PERFKIT_SOCK_INTERNAL_H
#define PERFKIT_SOCK_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sock_engine.h"
#include "engine.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfkit/clock.h"
#include "perfkit/seqwin.h"

#define CPU_EVERY_NS   10000000ull /* refresh the CPU counters this often */

typedef pk_flow_state flow_state;  /* perfkit/seqwin.h */

/* The data paths enter the kernel through syscall(), not glibc's send()/recv() family.
 * In a multi-threaded process (every perfkit process: Python's threads and the workers)
 * each of glibc's socket calls is a cancellation point that sets and clears the thread's
 * cancellation type around the call, two atomic compare-exchanges: 5% of a 64 B tcp_bw
 * sender's CPU (`perf record`, __pthread_{en,dis}able_asynccancel), where single-threaded
 * qperf skips them. No worker is ever cancelled, so nothing is lost. Under AddressSanitizer
 * the glibc calls stay: its interceptors check every buffer the kernel reads or writes. */
#if defined(__SANITIZE_ADDRESS__)
#define PK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PK_ASAN 1
#endif
#endif

#ifdef PK_ASAN
#define sys_send send
#define sys_recv recv
#define sys_sendto sendto
#define sys_recvfrom recvfrom
#define sys_sendmmsg sendmmsg
#define sys_recvmmsg(fd, msgs, n, flags) recvmmsg(fd, msgs, n, flags, NULL)
#else
static inline ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{
    return (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
    return (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t sys_sendto(int fd, const void *buf, size_t len, int flags,
                                 const struct sockaddr *to, socklen_t tolen)
{
    return (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
}

static inline ssize_t sys_recvfrom(int fd, void *buf, size_t len, int flags,
                                   struct sockaddr *from, socklen_t *fromlen)
{
    return (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, from, fromlen);
}

static inline int sys_sendmmsg(int fd, struct mmsghdr *msgs, unsigned n, int flags)
{
    return (int)syscall(SYS_sendmmsg, fd, msgs, n, flags);
}

static inline int sys_recvmmsg(int fd, struct mmsghdr *msgs, unsigned n, int flags)
{
    return (int)syscall(SYS_recvmmsg, fd, msgs, n, flags, NULL);
}
#endif

typedef struct worker {
    /* the counters first: one cache-line-aligned block, this worker writes it */
    pk_counter_block c;
    pk_hist hist;

    pk_sock_worker_cfg cfg;
    struct pk_sock_engine *engine;
    int done_sending;            /* atomic: a sender sets it when it stops sending */
    int bound_port;

    int netns_fd;                /* the namespace to work in, or -1 */
    int *fds;                    /* UDP_SEND: one per flow; else fds[0] */
    int nfds;
    int conn_fd;                 /* TCP: the connected socket */
    uint64_t spin_ns;            /* busy_poll: how long a wait spins (SPIN_NS or LAT_SPIN_NS) */

    /* preallocated I/O: nothing is allocated once the thread runs */
    struct mmsghdr *msgs;
    struct iovec *iov;
    struct sockaddr_storage *names;
    uint8_t *bufs;
    uint32_t buf_len;            /* bytes per buffer */
    uint64_t *flow_sent;         /* UDP_SEND: packets sent per flow = next seq;
                                    UDP_RECV: what a remote sender reported, for settling */
    int has_remote_sent;
    flow_state *flows;           /* UDP_RECV */

    uint64_t lat_min;
    uint64_t cpu0, user0, wall0, cpu_at;
    uint64_t read_sum;           /* access_recv: what reading the data added up to (kept, so it is read) */

    struct http_state *http;     /* HTTP roles: connection slots, epoll */
    int http_post, http_head;    /* HTTP client: the request's method */

    char err[256];
} worker;

struct pk_sock_engine {
    pk_engine core;              /* threads, stop flag, running, snapshots, errors */
    int n;
    worker *w;
    uint64_t t0;                 /* start, CLOCK_MONOTONIC */
    uint64_t hard_end;
    int settled;                 /* loss accounting closed after join */
};

static inline int stopping(const worker *w)
{
    return pk_engine_stopping(&w->engine->core);
}

/* Keep the CPU counters fresh without a syscall on every loop. */
static inline void account_cpu(worker *w, uint64_t now, int force)
{
    if (!force && now - w->cpu_at < CPU_EVERY_NS)
        return;
    w->cpu_at = now;
    pk_set(&w->c, PK_cpu_busy_ns, pk_thread_cpu_ns() - w->cpu0);
    pk_set(&w->c, PK_cpu_user_ns, pk_thread_user_ns() - w->user0);
    pk_set(&w->c, PK_cpu_wall_ns, now - w->wall0);
}

static inline void record_latency(worker *w, uint64_t lat, uint64_t *last_lat)
{
    pk_record_latency(&w->c, &w->hist, &w->lat_min, lat, last_lat);
}

/* Each unit's functions for the other (kept inside the extension). */
#pragma GCC visibility push(hidden)

/* sock_engine.c */
void sock_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
socklen_t sock_to_sockaddr(const pk_sock_addr *a, uint16_t port, struct sockaddr_storage *ss);
void sock_set_buffers(int fd, uint32_t bytes);

/* http_roles.c */
int http_setup(worker *w, char *err, size_t errlen);
void http_free(worker *w);
void run_http_client(worker *w);
void run_http_server(worker *w);

#pragma GCC visibility pop

#endif
