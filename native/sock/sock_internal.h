/* What the socket engine's units share (sock_engine.c: the engine and the datagram roles;
 * stream_roles.c: the stream roles; http_roles.c: the HTTP roles): the worker, the engine,
 * and the helpers they call (the hot ones static inline).
 * Not for Cython: the public face is sock_engine.h. */
#ifndef PERFKIT_SOCK_INTERNAL_H
#define PERFKIT_SOCK_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sock_engine.h"
#include "engine.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
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
 * cancellation type around the call, two atomic compare-exchanges (see
 * bench/RESULTS-notes.md#data-paths-through-syscall), where single-threaded qperf skips them. No worker is ever cancelled, so nothing is lost. Under AddressSanitizer
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
    /* the pacer: rate (messages/s, 0 = unlimited) counted from pace_t0 and pace_sent0, re-based
     * when set_rate moves it (ctl_rate, then ctl_gen stored with release; read once a turn) */
    double rate;
    uint64_t pace_t0, pace_sent0;
    double ctl_rate;
    uint32_t ctl_gen, seen_gen;
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

#define PACE_MIN_SLEEP_NS 50000ull /* a paced sender sleeps at least this long */
#define PACE_MAX_SLEEP_NS 50000000ull /* ... and at most this long: it must see stop */

/* access_recv (qperf's -ar): read every received byte, as an application would, a word at
 * a time (memcpy: any alignment) into a sum the worker keeps; counted in bytes_read. */
static inline void read_data(worker *w, const uint8_t *p, size_t n)
{
    if (!w->cfg.access_recv)
        return;
    uint64_t sum = 0, v;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&v, p + i, 8);
        sum += v;
    }
    for (; i < n; i++)
        sum += p[i];
    w->read_sum += sum;
    pk_add(&w->c, PK_bytes_read, n);
}

/* A sender is done at stop, at the end of its duration, or once it has sent
 * cfg.count messages (qperf's -n). */
static inline int sender_done(const worker *w, uint64_t now, uint64_t sent)
{
    return stopping(w) || now >= w->wall0 + w->cfg.duration_ns || (w->cfg.count && sent >= w->cfg.count);
}

/* How many messages the pacer allows now (never past cfg.count); 0 means wait
 * (and *wake says until when). Call only while !sender_done(). */
static inline uint64_t pace(const worker *w, uint64_t now, uint64_t sent, uint64_t *wake)
{
    uint64_t most = (uint64_t)w->cfg.batch * (w->cfg.gso > 1 ? w->cfg.gso : 1);
    if (w->cfg.count && w->cfg.count - sent < most)
        most = w->cfg.count - sent;
    if (w->rate <= 0)
        return most;
    double elapsed = (double)(now - w->pace_t0);
    uint64_t done = sent - w->pace_sent0;   /* sent since the pacer's base */
    uint64_t allowed = (uint64_t)(elapsed * w->rate / 1e9) + 1;
    if (allowed > done)
        return allowed - done < most ? allowed - done : most;
    /* wake when the next message is due, but by the end of the run and within
     * PACE_MAX_SLEEP_NS: a slow pacer must not sleep through stop or past its end */
    double gap = (double)done * 1e9 / w->rate;
    uint64_t cap = w->wall0 + w->cfg.duration_ns;
    if (cap > now + PACE_MAX_SLEEP_NS)
        cap = now + PACE_MAX_SLEEP_NS;
    *wake = gap < (double)(cap - w->pace_t0) ? w->pace_t0 + (uint64_t)gap : cap;
    return 0;
}

/* set_rate's change, seen once a turn: the pacer restarts at now from what was sent so far
 * (nothing owed under the old rate is caught up in a burst); the rate_target gauge follows. */
static inline void pace_control(worker *w, uint64_t now, uint64_t sent)
{
    uint32_t gen = __atomic_load_n(&w->ctl_gen, __ATOMIC_ACQUIRE);
    if (gen == w->seen_gen)
        return;
    w->seen_gen = gen;
    __atomic_load(&w->ctl_rate, &w->rate, __ATOMIC_RELAXED);
    w->pace_t0 = now;
    w->pace_sent0 = sent;
    pk_set(&w->c, PK_rate_target, (uint64_t)(w->rate + 0.5));
}

/* Sleep until the next message is due, and at least PACE_MIN_SLEEP_NS: what
 * fell due meanwhile goes out as one batch, and the pacer keeps the average
 * rate exact. Spinning instead would take the CPU the receiver needs. */
static inline void pace_wait(uint64_t now, uint64_t wake)
{
    pk_sleep_until_ns(wake > now + PACE_MIN_SLEEP_NS ? wake : now + PACE_MIN_SLEEP_NS);
}

/* busy_poll: spin (non-blocking) for up to SPIN_NS (ping-pong ends: LAT_SPIN_NS) after
 * waiting began (a pinger's send, a receiver's last arrival), then block, so a spinning
 * thread never starves its partner on a busy machine. A receiver that sleeps between
 * arrivals costs the sender a wake-up each time (over loopback and veth the sender's CPU
 * delivers the packet and wakes the reader); a sleeping ping-pong end, two per round trip. */
static inline int wait_flag(const worker *w, uint64_t waiting_since, int blocking_flag)
{
    if (w->cfg.busy_poll && pk_now_ns() - waiting_since < w->spin_ns)
        return MSG_DONTWAIT;
    return blocking_flag;
}

/* After a receiver's poll found nothing: a spinning receiver lets a thread that shares its
 * CPU (its own sender, pinned to the same one) run first (see bench/RESULTS-notes.md#busy-polling-receivers). */
static inline void spun(const worker *w)
{
    if (w->cfg.busy_poll)
        sched_yield();
}

#define SENDER_DONE UINT64_MAX

/* A sender's turn at the top of its loop: SENDER_DONE, or how many messages the pacer
 * allows now (0: it slept until the next one was due; take another turn). */
static inline uint64_t sender_turn(worker *w, uint64_t sent, uint64_t *now)
{
    uint64_t wake = 0;
    *now = pk_now_ns();
    if (sender_done(w, *now, sent))
        return SENDER_DONE;
    account_cpu(w, *now, 0);
    pace_control(w, *now, sent);
    uint64_t n = pace(w, *now, sent, &wake);
    if (n == 0)
        pace_wait(*now, wake);
    return n;
}

static inline void count_tx(worker *w, uint64_t pkts, uint64_t bytes)
{
    pk_add(&w->c, PK_pkts_tx, pkts);
    pk_add(&w->c, PK_bytes_tx, bytes);
}

static inline void count_rx(worker *w, uint64_t pkts, uint64_t bytes)
{
    pk_add(&w->c, PK_pkts_rx, pkts);
    pk_add(&w->c, PK_bytes_rx, bytes);
}

static inline void count_udp_rx(worker *w, uint64_t pkts, uint64_t bytes)
{
    count_rx(w, pkts, bytes);
    pk_add(&w->c, PK_udp_rx, pkts);
}

/* Each unit's functions for the others (kept inside the extension). */
#pragma GCC visibility push(hidden)

/* sock_engine.c */
void sock_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
socklen_t sock_to_sockaddr(const pk_sock_addr *a, uint16_t port, struct sockaddr_storage *ss);
void sock_set_buffers(int fd, uint32_t bytes);
void io_timeouts(int fd);
void worker_buffers(const worker *w, int fd);
int dials(const worker *w);
int feeders_done(const worker *w);

/* stream_roles.c */
void run_stream(worker *w);

/* http_roles.c */
int http_setup(worker *w, char *err, size_t errlen);
void http_free(worker *w);
void run_http_client(worker *w);
void run_http_server(worker *w);

#pragma GCC visibility pop

#endif
