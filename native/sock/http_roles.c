/* HTTP roles of the socket engine: a load client with many virtual users, and a
 * fast fixed-response server, both on one epoll loop per worker thread.
 *
 * It shares the worker and a few helpers with sock_engine.c through sock_internal.h.
 *
 * Client: every virtual user is one connection slot. Closed loop: a user sends,
 * waits for the whole response, thinks, sends again (keep-alive) or reconnects
 * (close). Open loop (cfg.rate > 0): requests are due at fixed intended times;
 * a due request takes any idle user, and its response time counts from the
 * intended time, not the actual send (coordinated omission corrected, as wrk2).
 * At the end of its time no new request starts and the ones out get their
 * answers (up to the engine's drain deadline), so every request counted was
 * answered, failed, or, after a stop, is counted as cut off (http_cut).
 *
 * HTTPS (cfg.tls, built with OpenSSL): the handshake runs non-blocking in the
 * same loop (U_HANDSHAKE) after the TCP connect; every user keeps one SSL object
 * for its life (SSL_clear between connections). No certificate check, as wrk;
 * bytes_tx/bytes_rx count HTTP bytes, not TLS records.
 */
#define _GNU_SOURCE
#include "sock_internal.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#ifdef PK_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>
#endif

#include "perfkit/http1.h"

#define HTTP_EVENTS        256
#define HTTP_READ_BUF      (64 << 10)
#define HTTP_SWEEP_NS      5000000ull   /* timeouts are checked this often */
#define HTTP_RETRY_NS      10000000ull  /* a failed connection waits this long to retry */
#define HTTP_BACKLOG       65536        /* open loop: intended times waiting for a user */
#define HTTP_LINGER_NS     1000000000ull /* after an error answer, the client has this long to close first */
#define HTTP_SRV_SWEEP_NS  100000000ull /* a server checks its idle timeouts this often */
#define HTTP_RAMP_BATCH    256          /* users started per loop turn, so timeouts and the end still run */
/* Linux's connect() takes source ports of one parity first (half the local port
 * range, ~14k by default) and searches all of them before the rest: past ~14k
 * connections to one address each connect() costs milliseconds. To loopback, so
 * many users spread over source addresses 127.0.0.1, .2, ... this many each. */
#define HTTP_USERS_PER_SRC 8192

enum { U_OFF, U_CONNECTING, U_SENDING, U_WAITING, U_IDLE, U_THINKING, U_RETRY, U_HANDSHAKE };

typedef struct http_user {
    int fd;
    int state;
    uint32_t req;           /* the request template it sends now */
    void *ssl;              /* HTTPS: this user's SSL object, kept across connections */
    int tls_up;             /* HTTPS: the handshake on this connection is done */
    uint32_t watching;      /* epoll events registered for fd; 0 = not in the set */
    int inflight;           /* a request is out and not yet answered or failed */
    int live;               /* client: wanted now (a stage plan retires users by clearing it) */
    uint32_t sent;          /* request bytes written so far */
    uint64_t t_start;       /* when the response time starts (send, or intended time) */
    uint64_t due;           /* U_THINKING/U_RETRY: when to go on; else the timeout (server: the idle deadline) */
    pk_http_resp resp;
    pk_http_req q;          /* server: the request being read into resp.buf */
} http_user;

typedef struct http_state {
    http_user *users;
    uint32_t nusers;
    int epfd;
    uint8_t *rbuf;
    uint64_t *backlog;      /* open loop: intended send times not yet sent */
    uint32_t bl_head, bl_len;
    uint32_t *idle;         /* open loop: users connected and idle (a stack) */
    uint32_t nidle;
    /* client: request templates (one per URL), back to back in w->bufs */
    uint32_t nreq;
    uint32_t *req_off, *req_len;
    uint8_t *req_head;      /* a HEAD request: its response has no body */
    uint64_t next_req;      /* cycle: the next template, modulo nreq */
    uint64_t rng;           /* random: xorshift64 state */
    uint64_t *per_url;      /* 3 per template: sent, answered, failed (this worker writes) */
    void *ssl_ctx;          /* HTTPS: one SSL_CTX per worker */
    int spread_src;         /* bind users to 127.0.0.1 + (user_base + index) / HTTP_USERS_PER_SRC */
    int draining;           /* the time is up: answers still come in, no request starts */
    uint32_t rseg;          /* open loop, rate stages: the stage of the next intended time ... */
    double rseg_n0;         /* ... and the requests due before that stage */
    uint32_t ninflight;     /* users with a request out */
} http_state;

int pk_sock_have_tls(void)
{
#ifdef PK_HAVE_OPENSSL
    return 1;
#else
    return 0;
#endif
}

static long http_request_len(const char *buf, size_t len, size_t max);

/* Split the client's blob into its requests (each whole: headers, blank line,
 * Content-Length body), so each request can pick one. */
static int http_templates(worker *w, http_state *h, char *err, size_t errlen)
{
    uint32_t n = 0;
    for (size_t off = 0; off < w->cfg.blob_len; n++) {
        long q = http_request_len((const char *)w->bufs + off, w->cfg.blob_len - off, PK_SOCK_MAX_BLOB);
        if (q <= 0) {
            sock_set_err(err, errlen, "HTTP: request %u (at byte %zu) is not a whole HTTP request", n, off);
            return -1;
        }
        off += (size_t)q;
    }
    h->nreq = n;
    h->req_off = calloc(n, sizeof(uint32_t));
    h->req_len = calloc(n, sizeof(uint32_t));
    h->req_head = calloc(n, 1);
    h->per_url = calloc((size_t)n * 3, sizeof(uint64_t));
    if (!h->req_off || !h->req_len || !h->req_head || !h->per_url) {
        sock_set_err(err, errlen, "HTTP: cannot allocate %u request templates", n);
        return -1;
    }
    size_t off = 0;
    for (uint32_t k = 0; k < n; k++) {
        long q = http_request_len((const char *)w->bufs + off, w->cfg.blob_len - off, PK_SOCK_MAX_BLOB);
        h->req_off[k] = (uint32_t)off;
        h->req_len[k] = (uint32_t)q;
        h->req_head[k] = q >= 5 && memcmp(w->bufs + off, "HEAD ", 5) == 0;
        off += (size_t)q;
    }
    h->rng = pk_now_ns() ^ 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)w;
    if (!h->rng)
        h->rng = 1;
    return 0;
}

/* One writer (the worker); readers load relaxed. */
static inline void url_count(http_state *h, uint32_t req, int which)
{
    uint64_t *p = &h->per_url[(size_t)req * 3 + (size_t)which];
    __atomic_store_n(p, *p + 1, __ATOMIC_RELAXED);
}

int pk_sock_http_urls(const pk_sock_engine *e, int worker, uint64_t *out, uint32_t n)
{
    if (!e || worker < 0 || worker >= e->n || e->w[worker].cfg.role != PK_HTTP_CLIENT || !e->w[worker].http)
        return 0;
    const http_state *h = e->w[worker].http;
    for (uint32_t k = 0; k < h->nreq && k < n && out; k++)
        for (int j = 0; j < 3; j++)
            out[k * 3 + j] = __atomic_load_n(&h->per_url[k * 3 + j], __ATOMIC_RELAXED);
    return (int)h->nreq;
}

void http_free(worker *w)
{
    http_state *h = w->http;
    if (!h)
        return;
    if (h->users)
        for (uint32_t i = 0; i < h->nusers; i++)
            if (h->users[i].fd >= 0)
                close(h->users[i].fd);
    if (h->epfd >= 0)
        close(h->epfd);
#ifdef PK_HAVE_OPENSSL
    if (h->users)
        for (uint32_t i = 0; i < h->nusers; i++)
            if (h->users[i].ssl)
                SSL_free(h->users[i].ssl);
    if (h->ssl_ctx)
        SSL_CTX_free(h->ssl_ctx);
#endif
    free(h->users);
    free(h->rbuf);
    free(h->backlog);
    free(h->idle);
    free(h->req_off);
    free(h->req_len);
    free(h->req_head);
    free(h->per_url);
    free(h);
    w->http = NULL;
}

int http_setup(worker *w, char *err, size_t errlen)
{
    http_state *h = calloc(1, sizeof(*h));
    if (!h)
        return -1;
    w->http = h;
    h->epfd = -1;
    /* client: one slot per virtual user; server: connections served at once */
    h->nusers = w->cfg.users ? w->cfg.users : 1024;
    h->users = calloc(h->nusers, sizeof(http_user));
    h->rbuf = malloc(HTTP_READ_BUF);
    h->backlog = calloc(HTTP_BACKLOG, sizeof(uint64_t));
    h->idle = calloc(h->nusers, sizeof(uint32_t));
    h->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (!h->users || !h->rbuf || !h->backlog || !h->idle || h->epfd < 0) {
        sock_set_err(err, errlen, "HTTP: cannot allocate %u connection slots: %s", h->nusers, strerror(errno));
        return -1;
    }
    for (uint32_t i = 0; i < h->nusers; i++)
        h->users[i].fd = -1;
    if (w->cfg.role == PK_HTTP_CLIENT && w->cfg.tls) {
#ifdef PK_HAVE_OPENSSL
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx) {
            sock_set_err(err, errlen, "HTTPS: SSL_CTX_new failed: %s", ERR_reason_error_string(ERR_get_error()));
            return -1;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL); /* load testing, not trust: as wrk */
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF); /* a close without close_notify is EOF */
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        h->ssl_ctx = ctx;
#else
        sock_set_err(err, errlen, "HTTPS: perfkit was built without OpenSSL (Debian: apt install libssl-dev, then reinstall)");
        return -1;
#endif
    }
    h->spread_src = w->cfg.role == PK_HTTP_CLIENT && w->cfg.remote.family == AF_INET &&
                    w->cfg.remote.ip[0] == 127 && w->cfg.user_base + h->nusers > HTTP_USERS_PER_SRC;
    if (w->cfg.role == PK_HTTP_CLIENT) {
        uint64_t prev = 0; /* a stage plan: ends in order, counts within the users' slots */
        for (uint32_t k = 0; k < w->cfg.nstages; k++) {
            if (k >= PK_SOCK_MAX_STAGES || w->cfg.stage_end_ns[k] < prev ||
                (w->cfg.rate > 0 ? !(w->cfg.stage_rate[k] >= 0 && w->cfg.stage_rate[k] <= w->cfg.rate)
                                 : w->cfg.stage_users[k] > h->nusers)) {
                sock_set_err(err, errlen, "HTTP: stage %u is out of order, over %u users or over the rate %g", k,
                             h->nusers, w->cfg.rate);
                return -1;
            }
            prev = w->cfg.stage_end_ns[k];
        }
        return http_templates(w, h, err, errlen);
    }
    return 0;
}

/* I/O on a user's connection, plain or TLS. > 0: bytes; 0: EOF (recv);
 * -1: would block, *want = the epoll event to wait for; -2: failed, errno set. */
static ssize_t u_send(http_user *u, const void *p, size_t n, uint32_t *want)
{
#ifdef PK_HAVE_OPENSSL
    if (u->ssl) {
        ERR_clear_error();
        int r = SSL_write(u->ssl, p, (int)n);
        if (r > 0)
            return r;
        int e = SSL_get_error(u->ssl, r);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
            *want = e == SSL_ERROR_WANT_WRITE ? EPOLLOUT : EPOLLIN;
            return -1;
        }
        if (e != SSL_ERROR_SYSCALL || errno == 0)
            errno = EPROTO;
        ERR_clear_error();
        return -2;
    }
#endif
    ssize_t r = sys_send(u->fd, p, n, MSG_NOSIGNAL);
    if (r > 0)
        return r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        *want = EPOLLOUT;
        return -1;
    }
    if (r == 0)
        errno = EPIPE;
    return -2;
}

static ssize_t u_recv(http_user *u, void *p, size_t n)
{
#ifdef PK_HAVE_OPENSSL
    if (u->ssl) {
        ERR_clear_error();
        int r = SSL_read(u->ssl, p, (int)n);
        if (r > 0)
            return r;
        int e = SSL_get_error(u->ssl, r);
        if (e == SSL_ERROR_ZERO_RETURN)
            return 0;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return -1; /* (a TLS 1.3 ticket alone also ends here) */
        if (e != SSL_ERROR_SYSCALL || errno == 0)
            errno = EPROTO;
        ERR_clear_error();
        return -2;
    }
#endif
    ssize_t r = sys_recv(u->fd, p, n, 0);
    if (r >= 0)
        return r;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
}

/* ------------------------------------------------------------------ client */

static void user_close(worker *w, http_user *u)
{
    u->tls_up = 0; /* its SSL object is cleared on the next connect */
    u->watching = 0;
    if (u->fd >= 0) {
        close(u->fd); /* closing removes it from the epoll set */
        u->fd = -1;
        pk_add(&w->c, PK_sock_close, 1);
        pk_set(&w->c, PK_sock_current, pk_read(&w->c, PK_sock_current) - 1);
    }
    u->state = U_OFF;
}

/* Register or change u's epoll events; nothing when they are already those. */
static void user_watch(http_state *h, http_user *u, uint32_t events)
{
    if (u->watching == events)
        return;
    struct epoll_event ev = { .events = events, .data.ptr = u };
    epoll_ctl(h->epfd, u->watching ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, u->fd, &ev);
    u->watching = events;
}

static void user_fail(worker *w, http_user *u, enum pk_counter_id why, uint64_t now)
{
    if (u->inflight) {
        url_count(w->http, u->req, 2);
        u->inflight = 0;
        w->http->ninflight--;
    }
    pk_add(&w->c, why, 1);
    pk_add(&w->c, PK_http_err, 1);
    user_close(w, u);
    u->state = U_RETRY;
    u->due = now + HTTP_RETRY_NS;
}

static int user_connect(worker *w, http_state *h, http_user *u, uint64_t now)
{
    int fd = socket(w->cfg.remote.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pk_add(&w->c, PK_sock_error, 1);
        user_fail(w, u, PK_err_connect, now);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (h->spread_src) { /* the address only: the port is still chosen at connect() */
        struct sockaddr_in src = { .sin_family = AF_INET };
        src.sin_addr.s_addr = htonl(0x7f000001u + (w->cfg.user_base + (uint32_t)(u - h->users)) / HTTP_USERS_PER_SRC);
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
            u->fd = fd;
            pk_add(&w->c, PK_sock_open, 1);
            pk_set(&w->c, PK_sock_current, pk_read(&w->c, PK_sock_current) + 1);
            user_fail(w, u, PK_err_connect, now);
            return -1;
        }
    }
    struct sockaddr_storage ss;
    uint16_t port = w->cfg.peer >= 0 ? (uint16_t)w->engine->w[w->cfg.peer].bound_port : w->cfg.remote.port;
    socklen_t len = sock_to_sockaddr(&w->cfg.remote, port, &ss);
    u->fd = fd;
    pk_add(&w->c, PK_sock_open, 1);
    pk_set(&w->c, PK_sock_current, pk_read(&w->c, PK_sock_current) + 1);
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        user_fail(w, u, PK_err_connect, now);
        return -1;
    }
    u->state = U_CONNECTING;
    u->due = now + w->cfg.connect_timeout_ns;
    if (h->ssl_ctx) /* TLS starts once connected */
        user_watch(h, u, EPOLLOUT | EPOLLIN);
    return 0;
}

/* Write what is left of the request; on completion wait for the response. */
static void user_send(worker *w, http_state *h, http_user *u, uint64_t now)
{
    if (!u->inflight) { /* a new request (not a write that waited): pick its template */
        if (h->nreq > 1 && w->cfg.url_random) {
            h->rng ^= h->rng << 13;
            h->rng ^= h->rng >> 7;
            h->rng ^= h->rng << 17;
            u->req = (uint32_t)(h->rng % h->nreq);
        } else {
            u->req = (uint32_t)(h->next_req++ % h->nreq);
        }
        pk_http_resp_init(&u->resp, h->req_head[u->req]);
        pk_add(&w->c, PK_http_req, 1);
        pk_add(&w->c, memcmp(w->bufs + h->req_off[u->req], "POST ", 5) == 0 ? PK_http_post : PK_http_get, 1);
        url_count(h, u->req, 0);
        u->inflight = 1;
        h->ninflight++;
        if (u->state != U_CONNECTING) /* (a new connection keeps its connect timeout) */
            u->due = now + w->cfg.response_timeout_ns;
    }
    const uint8_t *req = w->bufs + h->req_off[u->req];
    uint32_t len = h->req_len[u->req];
    while (u->sent < len) {
        uint32_t want = 0;
        ssize_t r = u_send(u, req + u->sent, len - u->sent, &want);
        if (r > 0) {
            u->sent += (uint32_t)r;
            pk_add(&w->c, PK_bytes_tx, (uint64_t)r);
            continue;
        }
        if (r == -1) {
            u->state = U_SENDING;
            user_watch(h, u, want);
            return;
        }
        /* the first write on a new connection also reports a failed connect */
        int refused = errno == ECONNREFUSED || errno == ETIMEDOUT || errno == EHOSTUNREACH ||
                      errno == ENETUNREACH || errno == EADDRNOTAVAIL;
        user_fail(w, u, refused ? PK_err_connect : errno == ECONNRESET || errno == EPIPE ? PK_err_reset : PK_err_read,
                  now);
        return;
    }
    pk_add(&w->c, PK_pkts_tx, 1);
    user_watch(h, u, EPOLLIN);
    u->state = U_WAITING;
    u->due = now + w->cfg.response_timeout_ns;
}

/* Start a request on user u whose response time starts at t_start. */
static void user_request(worker *w, http_state *h, http_user *u, uint64_t t_start, uint64_t now)
{
    if (h->draining) { /* the time is up: no new request */
        u->state = u->fd >= 0 ? U_IDLE : U_OFF;
        return;
    }
    if (w->cfg.nstages && w->cfg.rate <= 0 && !u->live) { /* retired by the stage plan: its last request is done */
        user_close(w, u);
        return;
    }
    u->t_start = t_start;
    u->sent = 0;
    if (u->fd < 0) {
        if (user_connect(w, h, u, now) != 0 || h->ssl_ctx)
            return; /* TLS: the handshake, then the request, once connected */
        /* plain: write at once. A connect still in progress makes the write wait
         * (EAGAIN: watch for writable) with the connect timeout running; on
         * loopback and fast links it is already done, saving a wakeup */
    }
    user_send(w, h, u, now);
}

/* The response is whole: count it, then think, go idle, or close. */
static void user_done(worker *w, http_state *h, http_user *u, uint64_t now, uint64_t *last_lat)
{
    int s = u->resp.status;
    u->inflight = 0;
    h->ninflight--;
    url_count(h, u->req, 1);
    if (s >= 400)
        url_count(h, u->req, 2);
    record_latency(w, now - u->t_start, last_lat);
    pk_add(&w->c, PK_http_resp, 1);
    pk_add(&w->c, PK_pkts_rx, 1);
    pk_add(&w->c, s < 300 ? PK_http_2xx : s < 400 ? PK_http_3xx : s < 500 ? PK_http_4xx : PK_http_5xx, 1);
    if (s >= 400)
        pk_add(&w->c, PK_http_err, 1);
    if (!w->cfg.keepalive || !u->resp.keep_alive)
        user_close(w, u);
    if (w->cfg.rate > 0) {
        u->state = u->fd >= 0 ? U_IDLE : U_OFF;
        if (u->fd >= 0 && h->nidle < h->nusers)
            h->idle[h->nidle++] = (uint32_t)(u - h->users);
        return;
    }
    if (w->cfg.think_ns == 0) { /* no think time: the next request goes now */
        user_request(w, h, u, now, now);
        return;
    }
    u->state = U_THINKING;
    u->due = now + w->cfg.think_ns;
}

static void user_readable(worker *w, http_state *h, http_user *u, uint64_t now, uint64_t *last_lat)
{
    for (;;) {
        ssize_t r = u_recv(u, h->rbuf, HTTP_READ_BUF);
        if (r > 0) {
            pk_add(&w->c, PK_bytes_rx, (uint64_t)r);
            if (u->state != U_WAITING) {
                user_fail(w, u, PK_err_read, now); /* bytes nobody asked for */
                return;
            }
            pk_http_resp_feed(&u->resp, (const char *)h->rbuf, (size_t)r);
            if (u->resp.state == PK_HTTP_ERROR) {
                user_fail(w, u, PK_err_read, now);
                return;
            }
            if (u->resp.state == PK_HTTP_DONE) {
                user_done(w, h, u, now, last_lat);
                return;
            }
            continue;
        }
        if (r == 0) { /* EOF */
            if (u->state == U_WAITING) {
                pk_http_resp_eof(&u->resp);
                if (u->resp.state == PK_HTTP_DONE) {
                    /* closed first: user_done may start the next request on a new connection */
                    user_close(w, u);
                    user_done(w, h, u, now, last_lat);
                } else {
                    user_fail(w, u, PK_err_read, now);
                }
            } else { /* the server closed an idle keep-alive connection: reconnect on next use */
                user_close(w, u);
                if (u->state == U_OFF && w->cfg.rate <= 0) {
                    u->state = U_THINKING;
                    u->due = now;
                }
            }
            return;
        }
        if (r == -1)
            return;
        user_fail(w, u, errno == ECONNRESET ? PK_err_reset : PK_err_read, now);
        return;
    }
}

#ifdef PK_HAVE_OPENSSL
/* One step of the TLS handshake; when it is done, the request goes out. */
static void user_handshake(worker *w, http_state *h, http_user *u, uint64_t now)
{
    ERR_clear_error();
    int r = SSL_connect(u->ssl);
    if (r == 1) {
        u->tls_up = 1;
        user_watch(h, u, EPOLLIN);
        if (h->draining)
            u->state = U_IDLE; /* the time is up: no new request */
        else
            user_send(w, h, u, now);
        return;
    }
    int e = SSL_get_error(u->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        user_watch(h, u, e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT);
        return;
    }
    user_fail(w, u, PK_err_tls, now);
}

/* The TCP connection is up: start TLS on it, with this user's SSL object. */
static void user_tls_start(worker *w, http_state *h, http_user *u, uint64_t now)
{
    if (u->ssl && !SSL_clear(u->ssl)) { /* cannot be reused: make a new one */
        SSL_free(u->ssl);
        u->ssl = NULL;
    }
    if (!u->ssl)
        u->ssl = SSL_new(h->ssl_ctx);
    if (!u->ssl || !SSL_set_fd(u->ssl, u->fd)) {
        ERR_clear_error();
        user_fail(w, u, PK_err_tls, now);
        return;
    }
    SSL_set_connect_state(u->ssl);
    u->state = U_HANDSHAKE; /* the connect timeout keeps running */
    user_handshake(w, h, u, now);
}
#endif

static void user_event(worker *w, http_state *h, http_user *u, uint32_t ev, uint64_t now, uint64_t *last_lat)
{
    if (u->fd < 0)
        return;
    if (u->state == U_CONNECTING) {
        int e = 0;
        socklen_t el = sizeof(e);
        getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e != 0 || (ev & (EPOLLERR | EPOLLHUP))) {
            user_fail(w, u, e == ECONNRESET ? PK_err_reset : PK_err_connect, now);
            return;
        }
#ifdef PK_HAVE_OPENSSL
        if (h->ssl_ctx) {
            user_tls_start(w, h, u, now);
            return;
        }
#endif
        user_watch(h, u, EPOLLIN);
        user_send(w, h, u, now);
        return;
    }
#ifdef PK_HAVE_OPENSSL
    if (u->state == U_HANDSHAKE) {
        user_handshake(w, h, u, now);
        return;
    }
#endif
    if (u->state == U_SENDING) { /* writable, or (TLS) readable when the write waits on a read */
        user_send(w, h, u, now);
        return;
    }
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
        user_readable(w, h, u, now, last_lat);
}

/* Timeouts, thinking users and retries: checked every HTTP_SWEEP_NS. */
static void users_sweep(worker *w, http_state *h, uint64_t now, uint64_t started)
{
    for (uint32_t i = 0; i < started; i++) {
        http_user *u = &h->users[i];
        switch (u->state) {
        case U_CONNECTING:
        case U_HANDSHAKE:
        case U_SENDING:
        case U_WAITING:
            if (now >= u->due)
                user_fail(w, u, PK_err_timeout, now);
            break;
        case U_THINKING:
        case U_RETRY:
            if (w->cfg.rate <= 0 && now >= u->due)
                user_request(w, h, u, now, now);
            else if (w->cfg.rate > 0 && u->state == U_RETRY && now >= u->due)
                u->state = U_OFF;
            break;
        default: /* a request out on a user nothing reads for: failed at its deadline, never held forever */
            if (u->inflight && now >= u->due)
                user_fail(w, u, PK_err_timeout, now);
            break;
        }
    }
}

/* Open loop with rate stages: when request n (from 0) is due, in ns after the start; UINT64_MAX
 * past the plan. The requests due by t are the integral of the rate, linear within a stage from
 * r0 to r1: N0 + r0 tau + (r1 - r0) tau^2 / 2d; solved for tau in the form that stays exact as
 * r1 - r0 goes to 0. The cursor (rseg, rseg_n0) only moves on, as n only grows. */
static uint64_t rate_plan_due(const pk_sock_worker_cfg *c, http_state *h, uint64_t n)
{
    while (h->rseg < c->nstages) {
        uint32_t k = h->rseg;
        double start = k ? (double)c->stage_end_ns[k - 1] : 0.0, d = (double)c->stage_end_ns[k] - start;
        double r0 = (k ? c->stage_rate[k - 1] : 0.0) / 1e9, r1 = c->stage_rate[k] / 1e9; /* per ns */
        double in_seg = (r0 + r1) / 2 * d, want = (double)n - h->rseg_n0;
        if (d > 0 && in_seg > 0 && want <= in_seg) {
            if (want <= 0)
                return (uint64_t)start;
            double a = (r1 - r0) / (2 * d), disc = r0 * r0 + 4 * a * want;
            double tau = 2 * want / (r0 + sqrt(disc > 0 ? disc : 0));
            return (uint64_t)(start + (tau < d ? tau : d));
        }
        h->rseg_n0 += in_seg;
        h->rseg++;
    }
    return UINT64_MAX;
}

/* The request rate a rate plan wants t ns after the start (requests/s), linear within a stage. */
static double rate_plan_now(const pk_sock_worker_cfg *c, uint64_t t)
{
    uint64_t start = 0;
    double from = 0;
    for (uint32_t k = 0; k < c->nstages; k++) {
        uint64_t end = c->stage_end_ns[k];
        if (t < end)
            return from + (c->stage_rate[k] - from) * (double)(t - start) / (double)(end - start);
        start = end;
        from = c->stage_rate[k];
    }
    return 0;
}

/* Open loop: hand due intended times to idle (or unconnected) users. */
static void dispatch_due(worker *w, http_state *h, uint64_t now, uint64_t *intended_n)
{
    double per_ns = w->cfg.rate / 1e9;
    /* every intended time up to now joins the backlog */
    if (w->cfg.nstages) { /* a rate plan */
        for (uint64_t off; h->bl_len < HTTP_BACKLOG && (off = rate_plan_due(&w->cfg, h, *intended_n)) != UINT64_MAX &&
                           w->wall0 + off <= now;) {
            h->backlog[(h->bl_head + h->bl_len) % HTTP_BACKLOG] = w->wall0 + off;
            h->bl_len++;
            (*intended_n)++;
        }
    }
    while (!w->cfg.nstages && (double)(now - w->wall0) * per_ns >= (double)*intended_n && h->bl_len < HTTP_BACKLOG) {
        h->backlog[(h->bl_head + h->bl_len) % HTTP_BACKLOG] = w->wall0 + (uint64_t)((double)*intended_n / per_ns);
        h->bl_len++;
        (*intended_n)++;
    }
    while (h->bl_len > 0) {
        http_user *u = NULL;
        if (h->nidle > 0) {
            u = &h->users[h->idle[--h->nidle]];
            if (u->state != U_IDLE || u->fd < 0)
                continue; /* closed since it went idle */
        } else {
            for (uint32_t i = 0; i < h->nusers && !u; i++)
                if (h->users[i].state == U_OFF)
                    u = &h->users[i];
            if (!u)
                return; /* every user busy: the backlog waits, its clock running */
        }
        uint64_t t = h->backlog[h->bl_head];
        h->bl_head = (h->bl_head + 1) % HTTP_BACKLOG;
        h->bl_len--;
        user_request(w, h, u, t, now);
    }
}

/* The users a stage plan wants t ns after the start: linear from the previous stage's
 * count (0 at the start) to this stage's, rounded; after the last stage, its count. */
static uint32_t stage_target(const pk_sock_worker_cfg *c, uint64_t t)
{
    uint64_t start = 0;
    uint32_t from = 0;
    for (uint32_t k = 0; k < c->nstages; k++) {
        uint64_t end = c->stage_end_ns[k];
        uint32_t to = c->stage_users[k];
        if (t < end) { /* start <= t < end: d > 0; users * 24 h in ns fits 64 bits */
            uint64_t d = end - start, dt = t - start;
            return (uint32_t)(((uint64_t)from * (d - dt) + (uint64_t)to * dt + d / 2) / d);
        }
        start = end;
        from = to;
    }
    return from;
}

/* A stage plan: retire the users above the count wanted now (each finishes the request it has
 * out), start the ones below it (a retired one still busy just carries on). *live: users [0, live)
 * are wanted; *started: the most ever started (the sweep's range). */
static void stage_users(worker *w, http_state *h, uint64_t now, uint32_t *live, uint32_t *started)
{
    uint32_t want = h->draining ? *live : stage_target(&w->cfg, now - w->wall0);
    if (want > h->nusers)
        want = h->nusers;
    for (; *live > want; (*live)--)
        h->users[*live - 1].live = 0;
    for (int k = 0; k < HTTP_RAMP_BATCH && *live < want; k++) {
        http_user *u = &h->users[(*live)++];
        u->live = 1;
        if (*live > *started)
            *started = *live;
        if (u->state == U_OFF && u->fd < 0 && !u->inflight)
            user_request(w, h, u, now, now);
    }
}

void run_http_client(worker *w)
{
    http_state *h = w->http;
    struct epoll_event evs[HTTP_EVENTS];
    const uint64_t end = w->wall0 + w->cfg.duration_ns;
    uint64_t last_lat = 0, last_sweep = 0, intended_n = 0;
    uint32_t started = 0, live = 0;
    for (;;) {
        uint64_t now = pk_now_ns();
        if (stopping(w) || now >= w->engine->hard_end)
            break;
        if (now >= end)
            h->draining = 1;
        if (h->draining && h->ninflight == 0)
            break;
        account_cpu(w, now, 0);
        /* ramp-up: user i starts at i/users of the ramp time */
        if (w->cfg.nstages && w->cfg.rate <= 0) {
            stage_users(w, h, now, &live, &started);
        } else {
            for (int k = 0; k < HTTP_RAMP_BATCH && !h->draining && started < h->nusers &&
                            (w->cfg.ramp_ns == 0 || now - w->wall0 >= w->cfg.ramp_ns * started / h->nusers); k++) {
                http_user *u = &h->users[started++];
                u->live = 1;
                if (w->cfg.rate <= 0)
                    user_request(w, h, u, now, now);
            }
            live = started;
        }
        if (pk_read(&w->c, PK_http_users) != live)
            pk_set(&w->c, PK_http_users, live);
        if (w->cfg.rate > 0) { /* the rate due now: the plan's, or the fixed one */
            uint64_t r = (uint64_t)((h->draining ? 0 : w->cfg.nstages ? rate_plan_now(&w->cfg, now - w->wall0)
                                                                       : w->cfg.rate) + 0.5);
            if (pk_read(&w->c, PK_http_rate) != r)
                pk_set(&w->c, PK_http_rate, r);
        }
        if (w->cfg.rate > 0 && !h->draining)
            dispatch_due(w, h, now, &intended_n);
        if (now - last_sweep >= HTTP_SWEEP_NS) {
            users_sweep(w, h, now, started);
            last_sweep = now;
        }
        int n = epoll_wait(h->epfd, evs, HTTP_EVENTS, 1);
        now = pk_now_ns();
        for (int i = 0; i < n; i++)
            user_event(w, h, evs[i].data.ptr, evs[i].events, now, &last_lat);
    }
    /* requests still out after a stop or the drain deadline are cut off */
    for (uint32_t i = 0; i < h->nusers; i++) {
        http_user *u = &h->users[i];
        if (u->inflight) {
            u->inflight = 0;
            h->ninflight--;
            pk_add(&w->c, PK_http_cut, 1);
        }
        if (u->fd >= 0)
            user_close(w, u);
    }
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ server */

/* Bytes of a complete request at the start of buf[0, len) (the client's request
 * templates, which perfkit makes): headers up to the blank line plus a
 * Content-Length body; 0 if incomplete, -1 if malformed or over max bytes. */
static long http_request_len(const char *buf, size_t len, size_t max)
{
    const char *end = NULL;
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
            end = buf + i + 1;
            break;
        }
    if (!end)
        return len >= max ? -1 : 0;
    uint64_t body = 0;
    for (const char *p = buf; p < end; p++) {
        if (*p != '\n')
            continue;
        const char *v = pk_http__header(p + 1, end, "content-length:");
        if (!v)
            continue;
        for (; v < end && *v >= '0' && *v <= '9'; v++) {
            body = body * 10 + (uint64_t)(*v - '0');
            if (body > max)
                return -1;
        }
    }
    size_t total = (size_t)(end - buf) + body;
    return total <= len ? (long)total : 0;
}

static const char *srv_error_response(int status)
{
    switch (status) {
    case 413:
        return "HTTP/1.1 413 Content Too Large\r\nServer: perfkit\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    case 431:
        return "HTTP/1.1 431 Request Header Fields Too Large\r\nServer: perfkit\r\nContent-Length: 0\r\n"
               "Connection: close\r\n\r\n";
    case 501:
        return "HTTP/1.1 501 Not Implemented\r\nServer: perfkit\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    default:
        return "HTTP/1.1 400 Bad Request\r\nServer: perfkit\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    }
}

static void srv_close(worker *w, http_user *u)
{
    close(u->fd);
    u->fd = -1;
    pk_add(&w->c, PK_sock_close, 1);
    pk_set(&w->c, PK_sock_current, pk_read(&w->c, PK_sock_current) - 1);
}

/* A connection whose idle deadline passed (no whole request within the timeout of its
 * opening or its last answer, or a client that does not close after its last answer) is
 * closed, so idle or dripping clients cannot hold every slot. */
static void srv_sweep(worker *w, http_state *h, uint64_t now)
{
    for (uint32_t k = 0; k < h->nusers; k++) {
        http_user *u = &h->users[k];
        if (u->fd < 0 || now < u->due)
            continue;
        if (u->resp.state != PK_HTTP_DONE)
            pk_add(&w->c, PK_sock_error, 1); /* (one that did not close after its answer is no error) */
        srv_close(w, u);
    }
}

void run_http_server(worker *w)
{
    http_state *h = w->http;
    struct epoll_event evs[HTTP_EVENTS];
    const int lfd = w->fds[0];
    /* each connection's unread request bytes live in its user slot's parser buffer */
    struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
    epoll_ctl(h->epfd, EPOLL_CTL_ADD, lfd, &lev);
    const uint8_t *resp = w->bufs;
    const uint32_t resp_len = w->cfg.blob_len;
    /* the idle timeout (HttpServe.idle_timeout) comes as the worker's response timeout; 0: none */
    const uint64_t idle_ns = w->cfg.response_timeout_ns ? w->cfg.response_timeout_ns : UINT64_MAX / 2;
    const uint64_t linger_ns = idle_ns < HTTP_LINGER_NS ? idle_ns : HTTP_LINGER_NS;
    uint64_t last_sweep = 0;
    for (;;) {
        uint64_t now = pk_now_ns();
        if (stopping(w) || now >= w->engine->hard_end)
            break;
        account_cpu(w, now, 0);
        if (now - last_sweep >= HTTP_SRV_SWEEP_NS) {
            srv_sweep(w, h, now);
            last_sweep = now;
        }
        int n = epoll_wait(h->epfd, evs, HTTP_EVENTS, 10);
        now = pk_now_ns();
        for (int i = 0; i < n; i++) {
            http_user *u = evs[i].data.ptr;
            if (!u) { /* the listener: take every waiting connection */
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0)
                        break;
                    http_user *slot = NULL;
                    for (uint32_t k = 0; k < h->nusers && !slot; k++)
                        if (h->users[k].fd < 0)
                            slot = &h->users[k];
                    if (!slot) { /* full: refuse rather than grow */
                        close(fd);
                        pk_add(&w->c, PK_sock_error, 1);
                        continue;
                    }
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    sock_set_buffers(fd, 0); /* big: a whole response fits the send buffer */
                    slot->fd = fd;
                    slot->resp.len = 0;
                    slot->resp.state = PK_HTTP_HEADER;
                    pk_http_req_init(&slot->q);
                    slot->due = now + idle_ns;
                    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = slot };
                    epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &ev);
                    pk_add(&w->c, PK_sock_open, 1);
                    pk_set(&w->c, PK_sock_current, pk_read(&w->c, PK_sock_current) + 1);
                }
                continue;
            }
            if (u->fd < 0)
                continue; /* closed by the sweep since this event was taken */
            /* a client: read, answer every whole request, keep the rest. After
             * "Connection: close" or an error answer it only waits for the client to
             * close first, so TIME_WAIT stays on the client's side (resp.state marks that) */
            char *buf = u->resp.buf;
            int close_it = 0;
            if (u->resp.state == PK_HTTP_DONE)
                u->resp.len = 0;
            ssize_t r = sys_recv(u->fd, buf + u->resp.len, sizeof(u->resp.buf) - u->resp.len, 0);
            if (r <= 0) {
                close_it = r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
            } else if (u->resp.state == PK_HTTP_DONE) {
                pk_add(&w->c, PK_bytes_rx, (uint64_t)r); /* after close was asked: ignored */
            } else {
                pk_add(&w->c, PK_bytes_rx, (uint64_t)r);
                u->resp.len += (uint32_t)r;
                long q;
                while ((q = pk_http_req_parse(&u->q, buf, u->resp.len, sizeof(u->resp.buf))) != 0) {
                    if (q < 0) { /* answer why, then wait for the client to close */
                        const char *e = srv_error_response((int)-q);
                        size_t elen = strlen(e);
                        if (sys_send(u->fd, e, elen, MSG_NOSIGNAL) == (ssize_t)elen) {
                            pk_add(&w->c, PK_pkts_tx, 1);
                            pk_add(&w->c, PK_bytes_tx, elen);
                        }
                        pk_add(&w->c, PK_bad_rx, 1);
                        pk_add(&w->c, -q < 500 ? PK_http_4xx : PK_http_5xx, 1);
                        shutdown(u->fd, SHUT_WR);
                        u->resp.state = PK_HTTP_DONE;
                        u->due = now + linger_ns;
                        break;
                    }
                    pk_add(&w->c, PK_pkts_rx, 1);
                    pk_add(&w->c, PK_http_req, 1);
                    pk_add(&w->c, u->q.post ? PK_http_post : PK_http_get, 1);
                    int wants_close = u->q.close;
                    ssize_t s = sys_send(u->fd, resp, resp_len, MSG_NOSIGNAL);
                    if (s != (ssize_t)resp_len) { /* a slow reader of a big response: give up on it */
                        pk_add(&w->c, PK_sock_error, 1);
                        close_it = 1;
                        break;
                    }
                    pk_add(&w->c, PK_pkts_tx, 1);
                    pk_add(&w->c, PK_bytes_tx, resp_len);
                    pk_add(&w->c, PK_http_2xx, 1);
                    memmove(buf, buf + q, u->resp.len - (uint32_t)q);
                    u->resp.len -= (uint32_t)q;
                    pk_http_req_init(&u->q);
                    u->due = now + idle_ns; /* the next request has the whole timeout again */
                    if (wants_close) {
                        u->resp.state = PK_HTTP_DONE;
                        break;
                    }
                }
                if (!close_it && u->resp.state != PK_HTTP_DONE && u->resp.len >= sizeof(u->resp.buf)) {
                    pk_add(&w->c, PK_bad_rx, 1); /* (pk_http_req_parse answers this case first) */
                    close_it = 1;
                }
            }
            if (close_it)
                srv_close(w, u);
        }
    }
}
