/* dperf's protocol udp on the TCP engine's socket table: a client's "connection" is a socket
 * (its addresses and ports are its index, as for TCP) that sends its request in one datagram
 * and takes one datagram back; the server answers each request for a socket of its table with
 * its response in one datagram. No handshake, no close: udp_rt counts the requests that got
 * no answer (dperf's udpRt), udp_drop the datagrams for no socket or no request out.
 * dperf's pipeline: a keep-alive client socket keeps up to that many requests out; answers
 * are not matched to requests (in order, as dperf's), so requests = answers + udp_rt. */
#include "tcp_internal.h"
#include "tcp_counts.h"

#define UDP_LEN 8
/* a UDP socket has no byte stream: a client's una counts its requests out, unanswered, and
 * rcv_nxt its answers (reqs, 16 bits, wraps on a long keep-alive socket) */
#define OUT(s) ((s)->una)
#define ANSWERS(s) ((s)->rcv_nxt)

static uint32_t pipe_n(const pk_tcp_engine *e)
{
    return e->cfg.pipeline > 1 ? e->cfg.pipeline : 1;
}

static const uint8_t *udp_dst_mac(const pk_tcp_engine *e)
{
    static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    if (e->cfg.role == PK_TCP_CLIENT)
        return e->cfg.gateway_mac;
    return e->peer_mac_ok ? e->peer_mac : bcast;
}

/* One datagram of socket idx carrying msg (the request or the response); checksums in
 * software (a datagram per request: no offload set up for it). dst (IPv4, host order) or dst6
 * (16 bytes): a CLIENT flood's destination (0, NULL: server_ip). */
static void udp_tx_to(pk_tcp_engine *e, uint32_t idx, uint32_t dst, const uint8_t *dst6)
{
    tuple4 t;
    tcp_sock_tuple(e, idx, &t);
    int server = e->cfg.role == PK_TCP_SERVER;
    uint16_t lport = server ? t.sport : t.cport, rport = server ? t.cport : t.sport;
    uint32_t ulen = UDP_LEN + e->msg_len, iplen = (e->cfg.ipv6 ? IP6_LEN : IP_LEN) + ulen;
    struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
    uint8_t *d = m ? (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(e->l2 + iplen)) : NULL;
    if (!d) {
        if (m)
            rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return;
    }
    uint8_t *ip = d + put_l2(e, d, udp_dst_mac(e), e->cfg.ipv6 ? 0x86DD : 0x0800);
    uint64_t ph;                    /* the pseudo header's addresses */
    if (e->cfg.ipv6) {
        memcpy(ip, e->ip6_tmpl, IP6_LEN);
        ip[6] = 17;
        wr16(ip + 4, (uint16_t)ulen);
        wr32(ip + (server ? 36 : 20), t.cip);
        if (dst6)
            memcpy(ip + 24, dst6, 16);
        ph = sum16(ip + 8, 32, 0);
    } else {
        uint32_t la = rte_cpu_to_be_32(server ? rte_be_to_cpu_32(e->cfg.ip) : t.cip);
        uint32_t ra = server ? rte_cpu_to_be_32(t.cip) : dst ? rte_cpu_to_be_32(dst) : e->cfg.server_ip;
        memcpy(ip, e->ip4_tmpl, IP_LEN);
        ip[9] = 17;
        wr16(ip + 2, (uint16_t)iplen);
        memcpy(ip + 12, &la, 4);
        memcpy(ip + 16, &ra, 4);
        ip[10] = ip[11] = 0;
        uint16_t ck = (uint16_t)~fold(sum16(ip, IP_LEN, 0));
        memcpy(ip + 10, &ck, 2);
        ph = sum16(ip + 12, 8, 0);
    }
    uint8_t *u = ip + (e->cfg.ipv6 ? IP6_LEN : IP_LEN);
    wr16(u, lport);
    wr16(u + 2, rport);
    wr16(u + 4, (uint16_t)ulen);
    u[6] = u[7] = 0;
    memcpy(u + UDP_LEN, e->msg, e->msg_len);
    uint16_t ck = (uint16_t)~fold(sum16(u, UDP_LEN, ph + ph6_tail(ulen, 17)) + msg_sum(e, 0, e->msg_len));
    if (ck == 0)
        ck = 0xffff;                /* 0 means no checksum (RFC 768) */
    memcpy(u + 6, &ck, 2);
    cnt(e, PK_udp_tx);
    tx_put(e, m);
}

static void udp_tx(pk_tcp_engine *e, uint32_t idx)
{
    udp_tx_to(e, idx, 0, NULL);
}

/* CLIENT, flood: pipeline datagrams of socket idx's tuple, each to tcp_flood_dst (change_dip:
 * the next address, as dperf's), nothing kept (dperf's UDP flood: an answer is no socket's, a
 * udp_drop). */
void tcp_udp_flood(pk_tcp_engine *e, uint32_t idx)
{
    for (uint32_t k = 0; k < pipe_n(e); k++) {
        if (e->cfg.ipv6)
            udp_tx_to(e, idx, 0, e->cfg.ndips ? e->dips6 + 16 * tcp_flood_next(e) : NULL);
        else
            udp_tx_to(e, idx, tcp_flood_dst(e), NULL);
    }
}

/* CLIENT: a request out on socket idx (its timer: the answer's deadline, or the keep-alive
 * grid, which then judges the answer). */
static void udp_request(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->flags |= F_WAITING;
    OUT(s)++;
    s->reqs++;
    s->t0 = now;
    cnt(e, PK_http_req);
    if (!e->cfg.raw)
        cnt(e, e->cfg.msg_len >= 4 && memcmp(e->msg, "POST", 4) == 0 ? PK_http_post : PK_http_get);
    udp_tx(e, idx);
}

static int udp_more(const pk_tcp_engine *e, const tsock *s)
{
    return e->cfg.ka_interval_ns && e->launching && (e->cfg.ka_requests == 0 || s->reqs < e->cfg.ka_requests);
}

/* CLIENT: requests until pipeline are out (or the socket's last request went). */
static void udp_fill(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    while (OUT(s) < pipe_n(e) && (e->cfg.ka_requests == 0 || s->reqs < e->cfg.ka_requests))
        udp_request(e, idx, now);
}

/* CLIENT: a socket opened by tcp_launch; its first request (pipeline: requests) goes now. */
void tcp_udp_open(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->state = S_ESTAB;
    udp_request(e, idx, now);
    if (e->cfg.ka_interval_ns)
        udp_fill(e, idx, now);
    /* keep-alive (an interval): the next request's time, which judges this one's answer; else
     * the answer's deadline */
    tcp_timer_add(e, idx, e->cfg.ka_interval_ns ? TL_KA : TL_RTO, now);
}

/* CLIENT: the next request on a keep-alive socket (pipeline: requests until that many are
 * out), or the socket's end once no answer is out. due: the grid point it was due at (dperf's
 * fixed grid: the one after is an interval later, so a worker that lost its CPU catches up),
 * 0: now (an answer that came after its grid point). */
static void udp_next(pk_tcp_engine *e, uint32_t idx, uint64_t now, uint64_t due)
{
    tsock *s = &e->socks[idx];
    if (udp_more(e, s)) {
        udp_fill(e, idx, now);
        tcp_timer_add_at(e, idx, TL_KA, (due ? due : now) + e->ka_c);
    } else if (OUT(s)) {            /* the last answers still out: until their deadline */
        if (s->tl != TL_RTO)
            tcp_timer_add_at(e, idx, TL_RTO, s->t0 + e->rto_c);
    } else {
        tcp_sock_free(e, idx, PK_sock_close);
    }
}

/* CLIENT: a timer of socket idx fired. The keep-alive one while the answer is out: the
 * answer gets until its deadline (the retransmit timeout after the request; it then goes at
 * once, catching up, as dperf's keepalive 0 does). The deadline passed: the answer is
 * missed (udp_rt), then the next request or the socket's end. */
void tcp_udp_timer(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    int was = s->tl;
    uint64_t due = s->deadline;
    tcp_timer_del(e, idx);
    if (OUT(s)) {
        if (was == TL_KA) {
            tcp_timer_add_at(e, idx, TL_RTO, s->t0 + e->rto_c);
            return;
        }
        s->flags &= (uint8_t)~F_WAITING;
        pk_add(&e->c, PK_udp_rt, OUT(s));   /* nothing for a timeout since the last request */
        OUT(s) = 0;
    }
    udp_next(e, idx, now, was == TL_KA ? due : 0);
}

/* CLIENT: the end of socket idx (the run's end drains keep-alive sockets through here). */
void tcp_udp_close(pk_tcp_engine *e, uint32_t idx)
{
    tsock *s = &e->socks[idx];
    pk_add(&e->c, PK_udp_rt, OUT(s));   /* answers that never came */
    OUT(s) = 0;
    tcp_sock_free(e, idx, PK_sock_close);
}

/* A response's status from its first line ("HTTP/1.x NNN"); 0 when it has none. */
static uint16_t udp_status(const uint8_t *p, uint32_t n)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ')
        return 0;
    uint16_t st = 0;
    for (int i = 9; i < 12; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        st = (uint16_t)(st * 10 + (p[i] - '0'));
    }
    return st;
}

static void udp_answer(pk_tcp_engine *e, uint32_t idx, const uint8_t *p, uint32_t n, uint64_t now)
{
    tsock *s = &e->socks[idx];
    if (s->state != S_ESTAB || !OUT(s)) {
        cnt(e, PK_udp_drop);        /* no request out: late (counted in udp_rt) or a duplicate */
        return;
    }
    int first = ANSWERS(s)++ == 0;
    if (--OUT(s) == 0)
        s->flags &= (uint8_t)~F_WAITING;
    cnt(e, PK_http_resp);
    uint16_t st = e->cfg.raw ? 200 : udp_status(p, n);
    cnt_status(e, st);
    if (st < 200 || st >= 400)
        cnt(e, PK_http_err);
    uint64_t rt = now - s->t0;
    if (first)
        record_rtt(e, rt);          /* dperf's rtt: the first exchange of a socket */
    if (pipe_n(e) == 1)             /* pipelined answers are not matched to their requests: not timed */
        pk_lat_sample(&e->c, &e->hist, &e->lat_min, (uint64_t)((double)rt * 1e9 / (double)e->hz), PK_LAT);
    if (!e->cfg.ka_interval_ns)     /* one request a socket */
        tcp_sock_free(e, idx, PK_sock_close);
    else if (s->tl == TL_RTO)       /* keep-alive, its grid point passed while waiting: the next now */
        udp_next(e, idx, now, 0);
    else if (pipe_n(e) > 1 && now >= s->deadline)
        udp_next(e, idx, now, s->deadline);   /* pipeline: its grid point passed, its timer not run yet */
    /* else the next request on its keep-alive timer */
}

/* A UDP datagram whose IP header passed (tcp_rx.c): sa, da its addresses of alen bytes, l4
 * its len bytes (IP payload length). pseudo: the pseudo header's addresses summed. Returns
 * nothing: a server's answer is queued here. */
void tcp_udp_in(pk_tcp_engine *e, const uint8_t *sa, const uint8_t *da, uint32_t alen, const uint8_t *l4,
                uint32_t len, uint64_t pseudo, uint64_t now)
{
    if (len < UDP_LEN || rd16(l4 + 4) < UDP_LEN || rd16(l4 + 4) > len) {
        cnt(e, PK_bad_rx);
        return;
    }
    len = rd16(l4 + 4);             /* the datagram (an Ethernet pad after it is not) */
    uint16_t field;
    memcpy(&field, l4 + 6, 2);
    if ((field != 0 || alen == 16) && fold(sum16(l4, len, pseudo + ph6_tail(len, 17))) != 0xffff &&
        !(e->kernel && field == fold(pseudo + ph6_tail(len, 17)))) {
        cnt(e, PK_bad_rx);          /* (a kernel peer's offloaded sum holds only the pseudo header's) */
        return;
    }
    int server = e->cfg.role == PK_TCP_SERVER;
    uint32_t sip = rd32(sa + alen - 4), dip = rd32(da + alen - 4);
    uint16_t sport = rd16(l4), dport = rd16(l4 + 2);
    uint32_t cip = server ? sip : dip, slot;
    uint16_t cport = server ? sport : dport, lport = server ? dport : sport;
    uint32_t li = (uint32_t)(uint16_t)(lport - e->cfg.listen);
    int ours;
    if (e->cfg.ipv6)
        ours = memcmp(server ? da : sa, server ? e->cfg.ip6 : e->cfg.server_ip6, 16) == 0 &&
               memcmp(server ? sa : da, e->cfg.client6_hi, 12) == 0;
    else
        ours = (server ? dip : sip) == rte_be_to_cpu_32(server ? e->cfg.ip : e->cfg.server_ip);
    if (!ours || li >= e->cfg.listen_num || tcp_ip_slot(e, cip, &slot) != 0 ||
        (!server && (uint32_t)(uint16_t)(cport - e->cfg.lport_lo) >= e->nports_c)) {
        cnt(e, PK_udp_drop);
        return;
    }
    uint32_t idx = server ? (slot * 65536u + cport) * e->cfg.listen_num + li
                          : (slot * e->nports_c + (uint32_t)(cport - e->cfg.lport_lo)) * e->cfg.listen_num + li;
    const uint8_t *p = l4 + UDP_LEN;
    uint32_t n = len - UDP_LEN;
    if (!server) {
        udp_answer(e, idx, p, n, now);
        return;
    }
    /* SERVER: every request is answered (dperf keeps no state for a UDP socket either) */
    if (!e->cfg.raw) {
        if (n >= 4 && memcmp(p, "POST", 4) == 0)
            cnt(e, PK_http_post);
        else
            cnt(e, PK_http_get);
    }
    cnt(e, PK_http_2xx);            /* a server's http2XX: the responses it sent (dperf's) */
    udp_tx(e, idx);
}
