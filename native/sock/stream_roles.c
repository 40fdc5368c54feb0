/* The socket engine's stream roles (TCP, SCTP): one connection per worker, dialled or
 * accepted, then a sender, receiver, pinger or ponger on it. */
#define _GNU_SOURCE
#include "sock_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCP_RCV_LOWAT  (16 << 10)  /* a stream receiver wakes per this many bytes at most (set_rcvlowat) */
/* A stream sender writes batch messages per sendmmsg and reads the clock after them, but
 * at most this many bytes' worth (bigger messages: one send() each). Not per write: a clock
 * read per small write costs message rate; 16 KiB keeps stop and the deadline prompt
 * (see bench/RESULTS-notes.md#stream-sender-one-clock-read-per-burst). */
#define STREAM_BURST_BYTES (16u << 10)

/* Write or read exactly len bytes on a blocking socket with 100 ms timeouts.
 * Returns len, or less on EOF/error/stop. */
static size_t xfer_all(worker *w, int fd, uint8_t *buf, size_t len, int writing)
{
    size_t done = 0;
    const uint64_t since = w->cfg.busy_poll ? pk_now_ns() : 0;
    while (done < len) {
        ssize_t r = writing ? sys_send(fd, buf + done, len - done, MSG_NOSIGNAL)
                            : sys_recv(fd, buf + done, len - done, wait_flag(w, since, 0));
        if (r > 0) {
            done += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            break;
        if (pk_now_ns() >= w->engine->hard_end)
            break;
        if (writing && stopping(w))
            break;
    }
    return done;
}

/* Ping-pong messages go out at once: TCP_NODELAY, or SCTP_NODELAY (same value, 1, at
 * SOL_SCTP). Streams keep Nagle: small writes coalesce into full segments, as
 * qperf's and iperf3's do (with NODELAY a 64 B stream sent one frame per write). */
static void set_nodelay(const worker *w, int fd)
{
    if (w->cfg.role != PK_TCP_PING && w->cfg.role != PK_TCP_PONG)
        return;
    int one = 1;
    setsockopt(fd, w->cfg.proto == IPPROTO_SCTP ? IPPROTO_SCTP : IPPROTO_TCP, 1, &one, sizeof(one));
}

static void set_rcvlowat(const worker *w, int fd);

/* The worker's connection is up (dialled or accepted): its wake-up mark and timeouts, counted. */
static int conn_opened(worker *w, int fd)
{
    set_rcvlowat(w, fd);
    io_timeouts(fd);
    pk_add(&w->c, PK_sock_open, 1);
    pk_set(&w->c, PK_sock_current, 1);
    w->conn_fd = fd;
    return fd;
}

static int tcp_connect(worker *w)
{
    int fd = socket(w->cfg.remote.family, SOCK_STREAM | SOCK_CLOEXEC, w->cfg.proto);
    if (fd < 0) {
        sock_set_err(w->err, sizeof(w->err), "socket(): %s", strerror(errno));
        return -1;
    }
    set_nodelay(w, fd);
    worker_buffers(w, fd);
    uint16_t port = w->cfg.peer >= 0 ? (uint16_t)w->engine->w[w->cfg.peer].bound_port : w->cfg.remote.port;
    struct sockaddr_storage ss;
    socklen_t len = sock_to_sockaddr(&w->cfg.remote, port, &ss);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        char ip[INET6_ADDRSTRLEN] = "?";
        inet_ntop(w->cfg.remote.family, w->cfg.remote.ip, ip, sizeof(ip));
        sock_set_err(w->err, sizeof(w->err), "connect to %s port %u: %s", ip, port, strerror(errno));
        pk_add(&w->c, PK_sock_error, 1);
        close(fd);
        return -1;
    }
    return conn_opened(w, fd);
}

/* A stream receiver asks to be woken once per TCP_RCV_LOWAT bytes instead of per arriving
 * segment. Each wake-up costs the sender, which runs it (loopback and veth deliver in the
 * sender's context) and is then preempted. 16 KiB: below one loopback segment, so 64 KiB
 * writes still wake it per segment. At most a quarter of the
 * receive buffer; the kernel also wakes it at EOF, under memory pressure or a nearly
 * closed window, and recv() returns what it has after its timeout. The price: while fewer
 * than this many bytes wait unread, Linux acks every second segment at once, from the
 * softirq, so over veth (1448 B segments) the sender's CPU alone ran receive, acks and
 * Nagle. So the mark is set only where a segment (loopback: 32-64 KiB) or each message
 * is at least 16 KiB; below that the receiver wakes per arrival and acks from its own CPU.
 * The figures: see bench/RESULTS-notes.md#stream-receiver-the-wake-up-mark-so_rcvlowat. */
static void set_rcvlowat(const worker *w, int fd)
{
    if (w->cfg.role != PK_TCP_RECV || w->cfg.proto != IPPROTO_TCP)
        return;
    int seg = 0, rcvbuf = 0;
    socklen_t len = sizeof(seg);
    if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &seg, &len) != 0)
        seg = 0;
    if (seg < TCP_RCV_LOWAT && (int)w->cfg.size < TCP_RCV_LOWAT)
        return; /* small segments and messages: woken per arrival */
    len = sizeof(rcvbuf);
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0)
        return;
    int lowat = rcvbuf / 4 < TCP_RCV_LOWAT ? rcvbuf / 4 : TCP_RCV_LOWAT;
    if (lowat > 1)
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
}

static int tcp_accept(worker *w)
{
    int lfd = w->fds[0];
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            set_nodelay(w, fd);
            return conn_opened(w, fd);
        }
        /* the listener has a 100 ms receive timeout: accept returns EAGAIN */
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            sock_set_err(w->err, sizeof(w->err), "accept(): %s", strerror(errno));
            pk_add(&w->c, PK_sock_error, 1);
            return -1;
        }
        if (pk_now_ns() >= w->engine->hard_end || feeders_done(w))
            return -1;
    }
}

/* A stream sender has written its last: EOF to the peer, and receivers may finish. */
static void done_writing(worker *w, int fd)
{
    shutdown(fd, SHUT_WR);
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
}

static void tcp_close(worker *w)
{
    if (w->conn_fd < 0)
        return;
    close(w->conn_fd);
    w->conn_fd = -1;
    pk_add(&w->c, PK_sock_close, 1);
    pk_set(&w->c, PK_sock_current, 0);
}

static void stream_send(worker *w, int fd, const uint32_t size)
{
    /* writes between clock reads: what the pacer allows (at most batch), up to STREAM_BURST_BYTES */
    const uint64_t burst = size >= STREAM_BURST_BYTES ? 1 : STREAM_BURST_BYTES / size;
    uint64_t sent = 0;
    for (uint64_t now, n; (n = sender_turn(w, sent, &now)) != SENDER_DONE;) {
        if (n == 0)
            continue;
        if (n > burst)
            n = burst;
        uint64_t k = 0;
        size_t r = size;
        if (n > 1) {
            /* n writes in one system call, each still its own write to the stream, as the
             * UDP sender's datagrams: a small write's cost is mostly entering the kernel
             * (see bench/RESULTS-notes.md#stream-sender-writes-in-one-system-call).
             * Not waiting: where the send buffer fills, the next write waits below. */
            int m = sys_sendmmsg(fd, w->msgs, (unsigned)n, MSG_NOSIGNAL | MSG_DONTWAIT);
            uint64_t bytes = 0;
            for (int j = 0; j < m; j++)
                bytes += w->msgs[j].msg_len;
            k = bytes / size;
            if (k < n) {   /* the buffer filled: finish a write cut short (part of it went), waiting for room */
                size_t part = (size_t)(bytes % size);
                r = part + xfer_all(w, fd, w->bufs + part, size - part, 1);
                if (r == size)
                    k++;
            }
        } else {
            while (k < n && (r = xfer_all(w, fd, w->bufs, size, 1)) == size)
                k++;
        }
        sent += k;
        count_tx(w, k, k * size + (r < size ? r : 0));
        if (r < size) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                continue; /* send buffer full for 100 ms: the receiver is slow */
            pk_add(&w->c, PK_sock_error, 1);
            break;
        }
    }
    done_writing(w, fd);
    /* wait for the receiver's EOF so every byte written is also counted there */
    uint8_t sink[256];
    for (;;) {
        ssize_t r = sys_recv(fd, sink, sizeof(sink), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            break;
        if (pk_now_ns() >= w->engine->hard_end)
            break;
    }
}

static void stream_recv(worker *w, int fd, const uint32_t size)
{
    uint64_t bytes = 0, last_rx = 0;
    for (;;) {
        ssize_t r = sys_recv(fd, w->bufs, w->buf_len, wait_flag(w, last_rx, 0));
        uint64_t now = pk_now_ns();
        account_cpu(w, now, 0);
        if (r > 0) {
            last_rx = now;
            uint64_t before = bytes / size;
            bytes += (uint64_t)r;
            pk_add(&w->c, PK_bytes_rx, (uint64_t)r);
            read_data(w, w->bufs, (size_t)r);
            if (bytes / size != before)
                pk_add(&w->c, PK_pkts_rx, bytes / size - before);
            continue;
        }
        if (r == 0)
            break; /* EOF: the sender is done */
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            pk_add(&w->c, PK_sock_error, 1);
            break;
        }
        if (now >= w->engine->hard_end && (now - last_rx >= PK_SOCK_DRAIN_NS ||
                                           now >= w->engine->hard_end + PK_SOCK_FED_NS))
            break;
        spun(w);
    }
}

static void stream_ping(worker *w, int fd, const uint32_t size)
{
    uint8_t *out = w->bufs, *in = w->bufs + w->buf_len;
    uint64_t n = 0, last_lat = 0;
    for (uint64_t now, turn; (turn = sender_turn(w, n, &now)) != SENDER_DONE;) {
        if (turn == 0)
            continue;
        uint64_t t_send = pk_now_ns();
        if (xfer_all(w, fd, out, size, 1) != size)
            break;
        count_tx(w, 1, size);
        if (xfer_all(w, fd, in, size, 0) != size)
            break;
        uint64_t t_recv = pk_now_ns();   /* (before reading the data, as the UDP ping's) */
        read_data(w, in, size);
        record_latency(w, t_recv - t_send, &last_lat);
        count_rx(w, 1, size);
        n++;
    }
    done_writing(w, fd);
}

static void stream_pong(worker *w, int fd, const uint32_t size)
{
    for (;;) {
        size_t r = xfer_all(w, fd, w->bufs, size, 0);
        uint64_t now = pk_now_ns();
        account_cpu(w, now, 0);
        if (r != size)
            break; /* EOF, error or hard deadline */
        count_rx(w, 1, size);
        read_data(w, w->bufs, size);
        if (xfer_all(w, fd, w->bufs, size, 1) != size)
            break;
        count_tx(w, 1, size);
    }
}

/* A stream role: the worker's one connection, made the way dials() says, closed when the
 * role is done. */
void run_stream(worker *w)
{
    int fd = dials(w) ? tcp_connect(w) : tcp_accept(w);
    if (fd < 0)
        return;
    switch (w->cfg.role) {
    case PK_TCP_SEND: stream_send(w, fd, w->cfg.size); break;
    case PK_TCP_RECV: stream_recv(w, fd, w->cfg.size); break;
    case PK_TCP_PING: stream_ping(w, fd, w->cfg.size); break;
    default: stream_pong(w, fd, w->cfg.size); break;
    }
    tcp_close(w);
}
