/* perfkit's kernel-socket engine: see sock_engine.h. */
#define _GNU_SOURCE
#include "sock_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfkit/clock.h"
#include "perfkit/seqwin.h"
#include "perfkit/wire.h"

#define QUIET_NS       50000000ull /* receivers: quiet this long after the peer is done */
#define SPIN_NS        50000ull    /* busy_poll: a receiver spins this long before blocking */
/* ... and either end of a ping-pong this long: its wait is one round trip, which it then
 * spins through where that is under a millisecond (see bench/RESULTS-notes.md#busy-polling-latency-ends) */
#define LAT_SPIN_NS    1000000ull
#define SOCK_BUF_BYTES (8 << 20)
/* A stream receiver reads at most this much per recv(): bigger reads ran slower
 * (see bench/RESULTS-notes.md#stream-receiver-read-size). */
#define TCP_RECV_BUF   (64 << 10)

/* ---------------------------------------------------------------- helpers */

void sock_set_err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

socklen_t sock_to_sockaddr(const pk_sock_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (a->family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, a->ip, 16);
        return sizeof(*s6);
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons(port);
    memcpy(&s4->sin_addr, a->ip, 4);
    return sizeof(*s4);
}

static int local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Socket buffers of bytes each way (qperf's -sb; the kernel doubles it for its
 * bookkeeping), or 0: big ones, SOCK_BUF_BYTES. SO_*BUFFORCE works as root, else
 * the sysctl max applies. */
void sock_set_buffers(int fd, uint32_t bytes)
{
    int sz = bytes ? (int)bytes : SOCK_BUF_BYTES;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

/* Blocking calls give up after 100 ms so a worker always sees stop and its deadline. */
void io_timeouts(int fd)
{
    struct timeval tv = { 0, 100000 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int open_bound(const pk_sock_addr *local, int type, int proto, char *err, size_t errlen)
{
    int fd = socket(local->family, type | SOCK_CLOEXEC, type == SOCK_STREAM ? proto : 0);
    if (fd < 0) {
        sock_set_err(err, errlen, "socket(): %s", strerror(errno));
        return -1;
    }
    int one = 1;
    if (type == SOCK_STREAM)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_storage ss;
    socklen_t len = sock_to_sockaddr(local, local->port, &ss);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        char ip[INET6_ADDRSTRLEN] = "?";
        inet_ntop(local->family, local->ip, ip, sizeof(ip));
        sock_set_err(err, errlen, "bind %s port %u: %s", ip, local->port, strerror(errno));
        close(fd);
        return -1;
    }
    io_timeouts(fd);
    return fd;
}

/* A worker's buffers: cfg.sock_buf when given; else 8 MiB, but a TCP sender or pinger
 * keeps the kernel's autotuning, as qperf's and iperf3's do. Set before connect or
 * listen: the window scale goes in the SYN. */
void worker_buffers(const worker *w, int fd)
{
    if (w->cfg.sock_buf || !(w->cfg.role == PK_TCP_SEND || w->cfg.role == PK_TCP_PING))
        sock_set_buffers(fd, w->cfg.sock_buf);
}

/* Does this stream worker connect (else it accepts one connection on its bound socket)?
 * Senders and pingers connect; flipped (qperf's -f1: the server sends), the other way. */
int dials(const worker *w)
{
    int sends = w->cfg.role == PK_TCP_SEND || w->cfg.role == PK_TCP_PING || w->cfg.role == PK_HTTP_CLIENT;
    return sends != (w->cfg.flip != 0);
}

/* Are the senders that target this worker done? With none (a server), it
 * runs until stop or the hard end. */
int feeders_done(const worker *w)
{
    const pk_sock_engine *e = w->engine;
    int me = (int)(w - e->w), any = 0;
    for (int j = 0; j < e->n; j++) {
        if (e->w[j].cfg.peer != me)
            continue;
        any = 1;
        if (!__atomic_load_n(&e->w[j].done_sending, __ATOMIC_ACQUIRE))
            return 0;
    }
    return any || stopping(w);
}

/* A receiver ends when its peer is done and the socket has been quiet, or at the hard end. */
static int receiver_finished(const worker *w, uint64_t now, uint64_t last_rx, uint64_t *done_at)
{
    if (now >= w->engine->hard_end)
        return 1;
    if (!feeders_done(w))
        return 0;
    if (*done_at == 0)
        *done_at = now;
    uint64_t since = now - (last_rx > *done_at ? last_rx : *done_at);
    return since >= QUIET_NS;
}

/* ------------------------------------------------------------------ roles */

static void fill_header(uint8_t *buf, uint32_t size, uint32_t flow, uint64_t seq, uint64_t now)
{
    if (size < PK_WIRE_HDR_LEN)
        return;
    pk_wire_hdr h = { PK_WIRE_MAGIC, flow, seq, now };
    memcpy(buf, &h, sizeof(h));
}

/* With UDP GSO one message carries up to cfg.gso datagrams, cut by the kernel
 * (UDP_SEGMENT); each datagram still arrives alone, with its own header. */
static void run_udp_send(worker *w)
{
    const uint32_t size = w->cfg.size;
    const uint32_t segs = w->cfg.gso > 1 ? w->cfg.gso : 1;
    uint64_t sent = 0;
    uint32_t flow = 0;
    for (uint64_t now, n; (n = sender_turn(w, sent, &now)) != SENDER_DONE;) {
        if (n == 0)
            continue;
        /* n datagrams in ceil(n / segs) messages; headers numbered across segments */
        uint64_t seq = w->flow_sent[flow];
        unsigned nmsg = 0;
        for (uint64_t left = n; left > 0; nmsg++) {
            uint32_t k = left < segs ? (uint32_t)left : segs;
            uint8_t *base = w->bufs + (size_t)nmsg * w->buf_len;
            for (uint32_t j = 0; j < k; j++)
                fill_header(base + (size_t)j * size, size, flow, seq++, now);
            w->iov[nmsg].iov_len = (size_t)k * size;
            left -= k;
        }
        int r = sys_sendmmsg(w->fds[flow], w->msgs, nmsg, 0);
        if (r > 0) {
            uint64_t pkts = 0;
            for (int i = 0; i < r; i++)
                pkts += w->iov[i].iov_len / size;
            w->flow_sent[flow] += pkts;
            sent += pkts;
            count_tx(w, pkts, pkts * size);
        } else if (r < 0 && errno != EINTR) {
            /* ENOBUFS/EAGAIN under load, ECONNREFUSED once the receiver is gone */
            pk_add(&w->c, PK_drop_tx, n);
            if (errno == ECONNREFUSED || errno == EAGAIN || errno == ENOBUFS)
                sched_yield();
        }
        flow = (int)flow + 1 == w->nfds ? 0 : flow + 1;
    }
}

/* A datagram receiver's batch: up to cfg.batch datagrams, waiting for the first unless it
 * spins (wait_flag); *now the clock after it, the CPU counters kept fresh. */
static inline int recv_batch(worker *w, int fd, uint64_t last_rx, uint64_t *now)
{
    int r = sys_recvmmsg(fd, w->msgs, w->cfg.batch, wait_flag(w, last_rx, MSG_WAITFORONE));
    *now = pk_now_ns();
    account_cpu(w, *now, 0);
    return r;
}

static void run_udp_recv(worker *w)
{
    const int fd = w->fds[0];
    const int track = w->cfg.size >= PK_WIRE_HDR_LEN;
    uint64_t last_rx = 0, done_at = 0;
    for (;;) {
        uint64_t now;
        int r = recv_batch(w, fd, last_rx, &now);
        if (r <= 0) {
            if (receiver_finished(w, now, last_rx, &done_at))
                break;
            spun(w);
            continue;
        }
        last_rx = now;
        uint64_t bytes = 0, bad = 0, lost = 0, dup = 0, reorder = 0;
        for (int i = 0; i < r; i++) {
            uint32_t len = w->msgs[i].msg_len;
            bytes += len;
            read_data(w, w->bufs + (size_t)i * w->buf_len, len);
            if (!track)
                continue;
            pk_wire_hdr h;
            /* a sequence number past 2^48 is no sender's (years at line rate): a stray or
             * corrupt datagram must not move the loss counters by 2^64 */
            if (!pk_wire_parse(w->bufs + (size_t)i * w->buf_len, len, &h) || h.flow >= w->cfg.flows ||
                h.seq >= (1ull << 48)) {
                bad++;
                continue;
            }
            flow_state *f = &w->flows[h.flow];
            pk_seq_arrive(f, h.seq, &lost, &dup, &reorder);
            if (now >= h.tx_ns)
                record_latency(w, now - h.tx_ns, &f->last_lat);
        }
        count_udp_rx(w, (uint64_t)r, bytes);
        if (bad)
            pk_add(&w->c, PK_bad_rx, bad);
        if (lost)
            pk_add(&w->c, PK_seq_lost, lost);
        if (dup)
            pk_add(&w->c, PK_seq_dup, dup);
        if (reorder)
            pk_add(&w->c, PK_seq_reorder, reorder);
    }
}

/* One datagram at a time (batch 1, a latency test's far end): recvfrom/sendto as
 * qperf's, no msghdr or iovec for the kernel to copy in per round trip. */
static void run_udp_reflect_one(worker *w)
{
    const int fd = w->fds[0];
    uint8_t *buf = w->bufs;
    struct sockaddr *from = (struct sockaddr *)&w->names[0];
    uint64_t last_rx = 0, done_at = 0;
    for (;;) {
        socklen_t fromlen = sizeof(w->names[0]);
        ssize_t r = sys_recvfrom(fd, buf, w->buf_len, wait_flag(w, last_rx, 0), from, &fromlen);
        uint64_t now = pk_now_ns();
        account_cpu(w, now, 0);
        if (r < 0) {
            if (receiver_finished(w, now, last_rx, &done_at))
                break;
            continue;
        }
        last_rx = now;
        count_udp_rx(w, 1, (uint64_t)r);
        read_data(w, buf, (size_t)r);
        if (sys_sendto(fd, buf, (size_t)r, 0, from, fromlen) == r)
            count_tx(w, 1, (uint64_t)r);
        else
            pk_add(&w->c, PK_drop_tx, 1);
    }
}

static void run_udp_reflect(worker *w)
{
    if (w->cfg.batch <= 1) {
        run_udp_reflect_one(w);
        return;
    }
    const int fd = w->fds[0];
    uint64_t last_rx = 0, done_at = 0;
    for (;;) {
        for (uint32_t i = 0; i < w->cfg.batch; i++) {
            w->msgs[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
            w->iov[i].iov_len = w->buf_len;
        }
        uint64_t now;
        int r = recv_batch(w, fd, last_rx, &now);
        if (r <= 0) {
            if (receiver_finished(w, now, last_rx, &done_at))
                break;
            continue;
        }
        last_rx = now;
        uint64_t bytes = 0;
        for (int i = 0; i < r; i++) {
            w->iov[i].iov_len = w->msgs[i].msg_len;
            bytes += w->msgs[i].msg_len;
            read_data(w, w->iov[i].iov_base, w->msgs[i].msg_len);
        }
        count_udp_rx(w, (uint64_t)r, bytes);
        int s = sys_sendmmsg(fd, w->msgs, (unsigned)r, 0);
        if (s > 0) {
            uint64_t sb = 0;
            for (int i = 0; i < s; i++)
                sb += w->msgs[i].msg_len;
            count_tx(w, (uint64_t)s, sb);
        }
        if (s < r)
            pk_add(&w->c, PK_drop_tx, (uint64_t)(r - (s > 0 ? s : 0)));
    }
}

static void run_udp_ping(worker *w)
{
    const int fd = w->fds[0];
    const uint32_t size = w->cfg.size;
    const int tagged = size >= PK_WIRE_HDR_LEN;
    uint8_t *out = w->bufs, *in = w->bufs + w->buf_len;
    uint64_t seq = 0, last_lat = 0;
    for (uint64_t now, turn; (turn = sender_turn(w, seq, &now)) != SENDER_DONE;) {
        if (turn == 0)
            continue;
        fill_header(out, size, 0, seq, now);
        uint64_t t_send = pk_now_ns();
        if (sys_send(fd, out, size, 0) != (ssize_t)size) {
            pk_add(&w->c, PK_drop_tx, 1);
            seq++;
            continue;
        }
        count_tx(w, 1, size);
        /* a reply that does not come within 1 s is lost; stale replies are skipped */
        uint64_t give_up = t_send + 1000000000ull;
        int got = 0;
        while (!got) {
            /* blocking recv (100 ms timeout) is one syscall; busy_poll spins first */
            ssize_t r = sys_recv(fd, in, w->buf_len, wait_flag(w, t_send, 0));
            uint64_t t_recv = pk_now_ns();
            if (r < 0) {
                if (t_recv >= give_up || t_recv >= w->engine->hard_end || stopping(w))
                    break;
                continue;
            }
            count_rx(w, 1, (uint64_t)r);
            read_data(w, in, (size_t)r);
            pk_wire_hdr h;
            if (tagged && (!pk_wire_parse(in, (uint64_t)r, &h) || h.seq != seq)) {
                pk_add(&w->c, PK_seq_dup, 1);
                continue;
            }
            record_latency(w, t_recv - t_send, &last_lat);
            got = 1;
        }
        if (!got)
            pk_add(&w->c, PK_seq_lost, 1);
        seq++;
    }
}

typedef void (*role_fn)(worker *);
static const role_fn ROLE_FNS[PK_NROLES] = {
    [PK_UDP_SEND] = run_udp_send,     [PK_UDP_RECV] = run_udp_recv,
    [PK_UDP_REFLECT] = run_udp_reflect, [PK_UDP_PING] = run_udp_ping,
    [PK_TCP_SEND] = run_stream,       [PK_TCP_RECV] = run_stream,
    [PK_TCP_PING] = run_stream,       [PK_TCP_PONG] = run_stream,
    [PK_HTTP_CLIENT] = run_http_client, [PK_HTTP_SERVER] = run_http_server,
};

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Give the worker a file table of its own, holding only its sockets. In a process with
 * several threads sharing one table, every socket call takes and drops a reference on
 * its file (two atomic operations, fdget/fput; see bench/RESULTS-notes.md#a-file-table-per-socket-worker),
 * where a one-thread process like qperf
 * only borrows it. The copy keeps nothing else open: a file the rest of the process
 * closes meanwhile is closed at once, as before. Sockets the worker makes later (TCP
 * clients) live only in its table; it closes them itself, and its table goes when it
 * ends. HTTP roles keep the shared table: pk_sock_destroy closes their connections and
 * epoll fd from the caller's thread. */
static void private_fd_table(worker *w)
{
    if (w->cfg.role == PK_HTTP_CLIENT || w->cfg.role == PK_HTTP_SERVER)
        return;
    if (unshare(CLONE_FILES) != 0)
        return;                          /* the shared table still works, a little slower */
    int keep[PK_SOCK_MAX_FLOWS], n = 0;   /* nfds <= flows <= PK_SOCK_MAX_FLOWS (setup_worker) */
    for (int k = 0; k < w->nfds; k++)
        if (w->fds[k] >= 0)
            keep[n++] = w->fds[k];
    qsort(keep, (size_t)n, sizeof(int), cmp_int);
    unsigned int from = 0;
    for (int k = 0; k < n; k++) {
        if ((unsigned int)keep[k] > from)
            close_range(from, (unsigned int)keep[k] - 1, 0);
        from = (unsigned int)keep[k] + 1;
    }
    close_range(from, ~0u, 0);
}

/* In the worker's thread, before its role runs: its namespace, its own file table. */
static int worker_init(pk_engine *core, int i)
{
    worker *w = &((pk_sock_engine *)core->owner)->w[i];
    /* sockets made here (TCP clients) belong to the worker's namespace */
    if (w->netns_fd >= 0 && setns(w->netns_fd, CLONE_NEWNET) != 0) {
        sock_set_err(w->err, sizeof(w->err), "setns(%s): %s", w->cfg.netns, strerror(errno));
        return -1;
    }
    private_fd_table(w);
    prctl(PR_SET_TIMERSLACK, 1UL);   /* precise sleeps for pacing */
    return 0;
}

static void worker_run(pk_engine *core, int i)
{
    worker *w = &((pk_sock_engine *)core->owner)->w[i];
    w->wall0 = pk_now_ns();
    w->cpu0 = pk_thread_cpu_ns();
    w->user0 = pk_thread_user_ns();
    w->cpu_at = w->wall0;
    w->rate = w->cfg.rate;
    w->pace_t0 = w->wall0;
    if (w->cfg.role == PK_UDP_SEND)
        pk_set(&w->c, PK_rate_target, (uint64_t)(w->rate + 0.5));
    ROLE_FNS[w->cfg.role](w);
}

static void worker_exit(pk_engine *core, int i, int ran)
{
    worker *w = &((pk_sock_engine *)core->owner)->w[i];
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    if (ran)
        account_cpu(w, pk_now_ns(), 1);
}

static const pk_engine_ops SOCK_OPS = {
    .thread_init = worker_init, .run = worker_run, .thread_exit = worker_exit,
};

/* --------------------------------------------------------------- lifecycle */

/* Make, bind (and connect or listen) this worker's sockets, inside its network
 * namespace when it has one; the calling thread returns to its own afterwards. */
static int make_sockets(worker *w, int i, uint16_t rport, char *err, size_t errlen)
{
    const pk_sock_worker_cfg *c = &w->cfg;
    int udp = c->role <= PK_UDP_PING;
    for (int k = 0; k < w->nfds; k++) {
        w->fds[k] = open_bound(&c->local, udp ? SOCK_DGRAM : SOCK_STREAM, c->proto, err, errlen);
        if (w->fds[k] < 0)
            return -1;
        worker_buffers(w, w->fds[k]);
        if (c->gso > 1) {
            int seg = (int)c->size;
            if (setsockopt(w->fds[k], SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) != 0) {
                sock_set_err(err, errlen, "worker %d: UDP GSO (UDP_SEGMENT) not available: %s", i, strerror(errno));
                return -1;
            }
        }
        if (c->role == PK_UDP_SEND || c->role == PK_UDP_PING) {
            struct sockaddr_storage ss;
            socklen_t len = sock_to_sockaddr(&c->remote, rport, &ss);
            if (connect(w->fds[k], (struct sockaddr *)&ss, len) != 0) {
                sock_set_err(err, errlen, "worker %d: connect: %s", i, strerror(errno));
                return -1;
            }
        }
    }
    if (!udp && listen(w->fds[0], c->role == PK_HTTP_SERVER ? SOMAXCONN : 16) != 0) {
        sock_set_err(err, errlen, "worker %d: listen: %s", i, strerror(errno));
        return -1;
    }
    w->bound_port = local_port(w->fds[0]);
    return 0;
}

static int open_sockets(worker *w, int i, uint16_t rport, char *err, size_t errlen)
{
    if (w->netns_fd < 0)
        return make_sockets(w, i, rport, err, errlen);
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0 || setns(w->netns_fd, CLONE_NEWNET) != 0) {
        sock_set_err(err, errlen, "worker %d: enter network namespace %s: %s", i, w->cfg.netns, strerror(errno));
        if (home >= 0)
            close(home);
        return -1;
    }
    int rc = make_sockets(w, i, rport, err, errlen);
    if (setns(home, CLONE_NEWNET) != 0) {
        /* cannot happen with the fd we opened; never leave the caller's thread elsewhere */
        sock_set_err(err, errlen, "worker %d: return from network namespace: %s", i, strerror(errno));
        rc = -1;
    }
    close(home);
    return rc;
}

static int setup_worker(pk_sock_engine *e, int i, char *err, size_t errlen)
{
    worker *w = &e->w[i];
    const pk_sock_worker_cfg *c = &w->cfg;
    w->engine = e;

    if (c->role < 0 || c->role >= PK_NROLES) {
        sock_set_err(err, errlen, "worker %d: unknown role %d", i, c->role);
        return -1;
    }
    int udp = c->role <= PK_UDP_PING;
    int http = c->role == PK_HTTP_CLIENT || c->role == PK_HTTP_SERVER;
    int ping_pong = c->role == PK_UDP_PING || c->role == PK_UDP_REFLECT || c->role == PK_TCP_PING ||
                    c->role == PK_TCP_PONG;
    w->spin_ns = ping_pong ? LAT_SPIN_NS : SPIN_NS;
    if (http && (c->blob_len == 0 || c->blob_len > PK_SOCK_MAX_BLOB || !c->blob ||
                 (c->role == PK_HTTP_CLIENT && (c->users == 0 || c->users > PK_SOCK_MAX_USERS)))) {
        sock_set_err(err, errlen, "worker %d: HTTP needs 1..%u bytes to send and 1..%d users", i,
                PK_SOCK_MAX_BLOB, PK_SOCK_MAX_USERS);
        return -1;
    }
    if (!http && (c->size == 0 || c->size > (udp ? 65507u : (1u << 20)))) {
        sock_set_err(err, errlen, "worker %d: size %u out of range", i, c->size);
        return -1;
    }
    if (c->batch == 0 || c->batch > PK_SOCK_MAX_BATCH) {
        sock_set_err(err, errlen, "worker %d: batch %u out of range 1..%d", i, c->batch, PK_SOCK_MAX_BATCH);
        return -1;
    }
    if (c->flows == 0 || c->flows > PK_SOCK_MAX_FLOWS) {
        sock_set_err(err, errlen, "worker %d: flows %u out of range 1..%d", i, c->flows, PK_SOCK_MAX_FLOWS);
        return -1;
    }
    if (c->gso > PK_SOCK_MAX_GSO || (c->gso > 1 && (c->role != PK_UDP_SEND || (uint64_t)c->gso * c->size > 65507))) {
        sock_set_err(err, errlen, "worker %d: gso %u: at most %d datagrams of at most 65507 bytes together, udp_send only",
                i, c->gso, PK_SOCK_MAX_GSO);
        return -1;
    }
    if (c->cpu >= 0) {   /* its thread pins itself to it first thing (engine.c) */
        cpu_set_t allowed;
        if (c->cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(allowed), &allowed) != 0 ||
            !CPU_ISSET(c->cpu, &allowed)) {
            sock_set_err(err, errlen, "worker %d: CPU %d is not one this process may run on", i, c->cpu);
            return -1;
        }
    } else if (c->cpu != -1) {
        sock_set_err(err, errlen, "worker %d: cpu %d: -1 (any) or a CPU number", i, c->cpu);
        return -1;
    }
    if (c->peer >= 0 && (c->peer >= i || e->w[c->peer].bound_port <= 0)) {
        sock_set_err(err, errlen, "worker %d: peer %d must be an earlier worker with a bound socket", i, c->peer);
        return -1;
    }

    uint16_t rport = c->peer >= 0 ? (uint16_t)e->w[c->peer].bound_port : c->remote.port;
    w->nfds = c->role == PK_UDP_SEND ? (int)c->flows : 1;
    w->fds = calloc((size_t)w->nfds, sizeof(int));
    if (!w->fds)
        goto nomem;
    for (int k = 0; k < w->nfds; k++)
        w->fds[k] = -1;

    if (c->netns[0]) {
        w->netns_fd = open(c->netns, O_RDONLY | O_CLOEXEC);
        if (w->netns_fd < 0) {
            sock_set_err(err, errlen, "worker %d: network namespace %s: %s", i, c->netns, strerror(errno));
            return -1;
        }
    }
    if (!udp && dials(w)) {
        /* connected in the thread */
    } else if (open_sockets(w, i, rport, err, errlen) != 0) {
        return -1;
    }
    if (http) {
        /* bufs hold the request (client) or the response (server) */
        w->bufs = malloc(c->blob_len);
        if (!w->bufs)
            goto nomem;
        memcpy(w->bufs, c->blob, c->blob_len);
        w->cfg.blob = NULL; /* the caller's copy is gone after create */
        w->http_post = c->blob_len >= 5 && memcmp(w->bufs, "POST ", 5) == 0;
        w->http_head = c->blob_len >= 5 && memcmp(w->bufs, "HEAD ", 5) == 0;
        if (c->role == PK_HTTP_SERVER)
            fcntl(w->fds[0], F_SETFL, fcntl(w->fds[0], F_GETFL) | O_NONBLOCK);
        return http_setup(w, err, errlen);
    }
    /* buffers: batch of datagrams for UDP, two messages (out, in) for ping, a big read buffer for TCP */
    uint32_t nbufs = (c->role == PK_UDP_SEND || c->role == PK_UDP_RECV || c->role == PK_UDP_REFLECT) ? c->batch : 2;
    /* a stream sender's sendmmsg: batch messages, each the same iovec (its one message) */
    uint32_t nmsgs = c->role == PK_TCP_SEND && c->batch > nbufs ? c->batch : nbufs;
    w->buf_len = c->size < 64 ? 64 : c->size;
    if (c->gso > 1)
        w->buf_len = c->gso * c->size;
    if (c->role == PK_UDP_RECV || c->role == PK_UDP_REFLECT || c->role == PK_UDP_PING)
        w->buf_len = 65536; /* take any datagram whole */
    if (c->role == PK_TCP_RECV)
        w->buf_len = TCP_RECV_BUF;
    w->buf_len = (w->buf_len + 63u) & ~63u;
    w->bufs = aligned_alloc(64, (size_t)nbufs * w->buf_len);
    w->msgs = calloc(nmsgs, sizeof(*w->msgs));
    w->iov = calloc(nbufs, sizeof(*w->iov));
    w->names = calloc(nbufs, sizeof(*w->names));
    if (!w->bufs || !w->msgs || !w->iov || !w->names)
        goto nomem;
    memset(w->bufs, 0xa5, (size_t)nbufs * w->buf_len);
    for (uint32_t k = 0; k < nbufs; k++) {
        w->iov[k].iov_base = w->bufs + (size_t)k * w->buf_len;
        w->iov[k].iov_len = c->role == PK_UDP_SEND ? c->size : w->buf_len;
        w->msgs[k].msg_hdr.msg_iov = &w->iov[k];
        w->msgs[k].msg_hdr.msg_iovlen = 1;
        if (c->role == PK_UDP_REFLECT) {
            w->msgs[k].msg_hdr.msg_name = &w->names[k];
            w->msgs[k].msg_hdr.msg_namelen = sizeof(w->names[k]);
        }
    }
    if (c->role == PK_TCP_SEND) {
        w->iov[0].iov_len = c->size;
        for (uint32_t k = 0; k < nmsgs; k++) {
            w->msgs[k].msg_hdr.msg_iov = &w->iov[0];
            w->msgs[k].msg_hdr.msg_iovlen = 1;
        }
    }
    if (c->role == PK_UDP_SEND || c->role == PK_UDP_RECV) {
        w->flow_sent = calloc(c->flows, sizeof(uint64_t));
        if (!w->flow_sent)
            goto nomem;
    }
    if (c->role == PK_UDP_RECV) {
        w->flows = calloc(c->flows, sizeof(flow_state));
        if (!w->flows)
            goto nomem;
    }
    return 0;
nomem:
    sock_set_err(err, errlen, "worker %d: out of memory", i);
    return -1;
}

pk_sock_engine *pk_sock_create(const pk_sock_worker_cfg *cfgs, int n, char *err, size_t errlen)
{
    if (n <= 0 || n > PK_SOCK_MAX_WORKERS) {
        sock_set_err(err, errlen, "between 1 and %d workers, not %d", PK_SOCK_MAX_WORKERS, n);
        return NULL;
    }
    pk_sock_engine *e = calloc(1, sizeof(*e));
    worker *ws = aligned_alloc(64, sizeof(worker) * (size_t)n);
    if (!e || !ws || pk_engine_init(&e->core, &SOCK_OPS, e, "pk-sock/%d", n) != 0) {
        free(ws);
        free(e);
        sock_set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(ws, 0, sizeof(worker) * (size_t)n);
    e->w = ws;
    e->n = n;
    for (int i = 0; i < n; i++) {
        pk_engine_worker_init(&e->core, i, &e->w[i].c, &e->w[i].hist, e->w[i].err, cfgs[i].cpu);
        e->w[i].cfg = cfgs[i];
        if (e->w[i].cfg.proto == 0)
            e->w[i].cfg.proto = IPPROTO_TCP;
        e->w[i].cfg.netns[sizeof(e->w[i].cfg.netns) - 1] = 0;
        e->w[i].conn_fd = -1;  /* nothing of fd 0 is ours: destroy closes only what is set */
        e->w[i].netns_fd = -1;
    }
    for (int i = 0; i < n; i++) {
        if (setup_worker(e, i, err, errlen) != 0) {
            pk_sock_destroy(e);
            return NULL;
        }
    }
    return e;
}

int pk_sock_nworkers(const pk_sock_engine *e) { return e->n; }

int pk_sock_bound_port(const pk_sock_engine *e, int i)
{
    return (i >= 0 && i < e->n) ? e->w[i].bound_port : -1;
}

int pk_sock_start(pk_sock_engine *e, char *err, size_t errlen)
{
    uint64_t longest = 0;
    for (int i = 0; i < e->n; i++)
        if (e->w[i].cfg.duration_ns > longest)
            longest = e->w[i].cfg.duration_ns;
    e->t0 = pk_now_ns();
    e->hard_end = e->t0 + longest + PK_SOCK_DRAIN_NS;
    if (pk_engine_start(&e->core, err, errlen) != 0) {
        pk_sock_join(e);
        return -1;
    }
    return 0;
}

void pk_sock_stop(pk_sock_engine *e) { pk_engine_stop(&e->core); }

int pk_sock_running(const pk_sock_engine *e) { return pk_engine_running(&e->core); }

void pk_sock_join(pk_sock_engine *e)
{
    pk_engine_join(&e->core);
    /* settle loss once: what the sender sent and never arrived, per flow */
    if (e->settled)
        return;
    e->settled = 1;
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->cfg.role != PK_UDP_RECV || !w->flows || w->cfg.size < PK_WIRE_HDR_LEN)
            continue;
        const worker *s = w->has_remote_sent ? w : NULL; /* whose flow_sent tells what was sent */
        for (int j = 0; j < e->n && !s; j++)
            if (e->w[j].cfg.role == PK_UDP_SEND && e->w[j].cfg.peer == i)
                s = &e->w[j];
        uint64_t lost = 0;
        for (uint32_t f = 0; f < w->cfg.flows; f++) {
            lost += pk_seq_settle(&w->flows[f],
                                  s && s->flow_sent && f < s->cfg.flows ? s->flow_sent[f] : 0);
        }
        if (lost)
            pk_add(&w->c, PK_seq_lost, lost);
    }
}

int pk_sock_flow_sent(const pk_sock_engine *e, int i, uint64_t *out, uint32_t n)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_UDP_SEND)
        return 0;
    const worker *w = &e->w[i];
    uint32_t k = n < w->cfg.flows ? n : w->cfg.flows;
    for (uint32_t f = 0; f < k; f++)
        out[f] = __atomic_load_n(&w->flow_sent[f], __ATOMIC_RELAXED);
    return (int)k;
}

int pk_sock_set_rate(pk_sock_engine *e, int i, double rate)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_UDP_SEND || !(rate >= 0) || rate > 1e10)
        return -1;
    worker *w = &e->w[i];
    __atomic_store(&w->ctl_rate, &rate, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->ctl_gen, 1, __ATOMIC_RELEASE);   /* the rate is visible before the new generation */
    return 0;
}

int pk_sock_set_remote_sent(pk_sock_engine *e, int i, const uint64_t *sent, uint32_t n)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_UDP_RECV || e->settled)
        return -1;
    worker *w = &e->w[i];
    for (uint32_t f = 0; f < w->cfg.flows; f++)
        w->flow_sent[f] = f < n ? sent[f] : 0;
    w->has_remote_sent = 1;
    return 0;
}

void pk_sock_snapshot(const pk_sock_engine *e, int i, uint64_t *counters, uint64_t *hist)
{
    pk_engine_snapshot(&e->core, i, counters, hist);
}

const char *pk_sock_error(const pk_sock_engine *e) { return pk_engine_error(&e->core); }

void pk_sock_destroy(pk_sock_engine *e)
{
    if (!e)
        return;
    pk_sock_stop(e);
    pk_sock_join(e);
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->fds)
            for (int k = 0; k < w->nfds; k++)
                if (w->fds[k] >= 0)
                    close(w->fds[k]);
        if (w->conn_fd >= 0)
            close(w->conn_fd);
        if (w->netns_fd >= 0)
            close(w->netns_fd);
        free(w->fds);
        free(w->msgs);
        free(w->iov);
        free(w->names);
        free(w->bufs);
        free(w->flow_sent);
        free(w->flows);
        http_free(w);
    }
    pk_engine_fini(&e->core);
    free(e->w);
    free(e);
}
