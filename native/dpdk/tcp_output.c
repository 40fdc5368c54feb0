/* Transmit: the frame queue, segments from the header templates, and a socket's message out. */
#include "tcp_internal.h"

/* Hand the queue to the port. What it does not take stays queued for the next
 * loop (a ring or memif peer that is a moment late); with drop, it is freed and
 * counted (the end of a run, or a queue still full). */
void tcp_tx_flush_mode(pk_tcp_engine *e, int drop)
{
    uint64_t bytes = 0;
    uint32_t done = 0;
    e->tx_fresh = 0;
    for (int tries = 0; e->ntx && tries < 8 && port_ready(e); tries++) {
        uint32_t n = TXQ - e->txh < e->ntx ? TXQ - e->txh : e->ntx;   /* the contiguous part */
        uint32_t k = rte_eth_tx_burst(e->pid, e->cfg.queue, e->tx + e->txh, (uint16_t)n);
        /* counted as the port takes them (the mbufs are its now: lengths first) */
        for (uint32_t i = 0; i < k; i++)
            bytes += e->txlen[e->txh + i] + FCS_LEN;
        done += k;
        e->txh = (e->txh + k) & (TXQ - 1);
        e->ntx -= k;
        if (k == 0)
            break;                  /* the peer's ring is full: asking again at once finds it so */
        if (k == n && e->ntx)
            tries--;                /* wrapped: the rest is at the front, not a failed try */
    }
    if (done) {
        pk_add(&e->c, PK_pkts_tx, done);
        pk_add(&e->c, PK_bytes_tx, bytes);
    }
    if (e->ntx && drop) {
        for (uint32_t i = 0; i < e->ntx; i++)
            rte_pktmbuf_free(e->tx[(e->txh + i) & (TXQ - 1)]);
        pk_add(&e->c, PK_drop_tx, e->ntx);
        e->ntx = 0;
    }
}

void tcp_tx_flush(pk_tcp_engine *e) { tcp_tx_flush_mode(e, 0); }

/* The end of a run: what is queued goes out, unless the link is down (a memif peer that
 * has left: nothing takes it); what stays is freed and counted. (A memif peer leaving while we
 * poll is handled by the port layer: its departure waits until we do not poll.) */
void tcp_end_flush(pk_tcp_engine *e)
{
    struct rte_eth_link link;
    for (int k = 0; k < 100 && e->ntx; k++) {
        memset(&link, 0, sizeof(link));
        if (rte_eth_link_get_nowait(e->pid, &link) != 0 || !link.link_status)
            break;
        tcp_tx_flush(e);
    }
    if (e->ntx) {
        for (uint32_t i = 0; i < e->ntx; i++)
            rte_pktmbuf_free(e->tx[(e->txh + i) & (TXQ - 1)]);
        pk_add(&e->c, PK_drop_tx, e->ntx);
        e->ntx = 0;
    }
}

static const uint8_t *dst_mac(const pk_tcp_engine *e)
{
    static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    if (e->cfg.role == PK_TCP_CLIENT)
        return e->cfg.gateway_mac;
    return e->peer_mac_ok ? e->peer_mac : bcast;
}

/* The TCP header at th (the MSS option on SYNs), payload msg[off, off + len) and the
 * checksum: addr_sum is the pseudo header's addresses summed (IPv4 or IPv6; the rest of
 * either pseudo header sums the same: protocol 6 and the TCP length). */
static void put_tcp(const pk_tcp_engine *e, uint8_t *th, uint64_t addr_sum, uint16_t lport, uint16_t rport,
                    uint32_t seq, uint32_t ack, uint8_t flags, uint32_t opt, uint32_t off, uint32_t len)
{
    uint32_t tcplen = TCP_LEN + opt + len;
    /* the header as 32-bit words in network order, summed from registers: a word's two
     * halves sum as its two 16-bit words in memory do, in either byte order */
    uint32_t w[6];
    w[0] = rte_cpu_to_be_32(((uint32_t)lport << 16) | rport);
    w[1] = rte_cpu_to_be_32(seq);
    w[2] = rte_cpu_to_be_32(ack);
    w[3] = rte_cpu_to_be_32(((uint32_t)(TCP_LEN + opt) << 26) | ((uint32_t)flags << 16) | RCV_WINDOW);
    w[4] = 0;                       /* checksum, urgent pointer */
    w[5] = rte_cpu_to_be_32(0x02040000u | e->cfg.mss);   /* the MSS option (SYNs) */
    /* pseudo header (protocol 6, the TCP length) + header + the payload's precomputed sum */
    uint64_t s = addr_sum + rte_cpu_to_be_16(6) + rte_cpu_to_be_16((uint16_t)tcplen);
    for (int k = 0; k < 4; k++)
        s += (w[k] & 0xffff) + (w[k] >> 16);
    if (opt) {
        s += (w[5] & 0xffff) + (w[5] >> 16);
        memcpy(th, w, TCP_LEN + 4);
    } else {
        memcpy(th, w, TCP_LEN);
    }
    if (e->ol_tcp) {   /* the device sums header and payload over the pseudo header's sum */
        uint16_t ph = fold(addr_sum + rte_cpu_to_be_16(6) + rte_cpu_to_be_16((uint16_t)tcplen));
        if (len)
            memcpy(th + TCP_LEN + opt, e->msg + off, len);
        memcpy(th + 16, &ph, 2);
        return;
    }
    if (len) {
        memcpy(th + TCP_LEN + opt, e->msg + off, len);
        s += msg_sum(e, off, off + len);
    }
    uint16_t ck = (uint16_t)~fold(s);
    memcpy(th + 16, &ck, 2);
}

/* Which sums the device fills in: what the port enabled and left in use, decided once per
 * engine (no per-segment lookups). */
void tcp_offloads_init(pk_tcp_engine *e, uint64_t tx_offloads)
{
    e->ol_ip4 = (tx_offloads & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
    e->ol_tcp = (tx_offloads & RTE_ETH_TX_OFFLOAD_TCP_CKSUM) != 0;
}

/* A segment's mbuf asks the device for the sums it does (DPDK: flags, l2/l3 lengths). */
static inline void seg_offload(const pk_tcp_engine *e, struct rte_mbuf *m, int ipv6)
{
    if (ipv6) {
        if (e->ol_tcp)
            m->ol_flags |= RTE_MBUF_F_TX_IPV6 | RTE_MBUF_F_TX_TCP_CKSUM;
    } else if (e->ol_ip4 || e->ol_tcp) {
        m->ol_flags |= RTE_MBUF_F_TX_IPV4 | (e->ol_ip4 ? RTE_MBUF_F_TX_IP_CKSUM : 0) |
                       (e->ol_tcp ? RTE_MBUF_F_TX_TCP_CKSUM : 0);
    }
    m->l2_len = e->l2;
    m->l3_len = ipv6 ? IP6_LEN : IP_LEN;
}

/* Queue a built segment; count its flags when the queue took it. */
static void tx_seg_put(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t flags)
{
    cnt(e, PK_tcp_tx);
    if (!tx_put(e, m))
        return;
    if (flags & TH_SYN)
        cnt(e, PK_syn_tx);
    if (flags & TH_FIN)
        cnt(e, PK_fin_tx);
    if (flags & TH_RST)
        cnt(e, PK_rst_tx);
}

/* An mbuf for a segment (rte_pktmbuf_alloc's result), from the stash. */
static inline struct rte_mbuf *mbuf_get(pk_tcp_engine *e)
{
    if (e->stash_i == e->nstash) {
        e->stash_i = e->nstash = 0;
        if (rte_mempool_generic_get(e->pool, (void **)e->stash, STASH, e->mcache) != 0)
            return rte_pktmbuf_alloc(e->pool);   /* fewer than STASH left: one */
        e->nstash = STASH;
        for (uint32_t i = 0; i < STASH; i++)   /* their first lines at once: the misses overlap */
            rte_prefetch0(e->stash[i]);
    }
    struct rte_mbuf *m = e->stash[e->stash_i++];
    if (e->stash_i < e->nstash) {   /* the next one's header lines and first data line */
        const uint8_t *n = (const uint8_t *)e->stash[e->stash_i];
        rte_prefetch0(n);
        rte_prefetch0(n + RTE_CACHE_LINE_SIZE);
        rte_prefetch0(n + e->data_at);
    }
    rte_pktmbuf_reset(m);
    return m;
}

/* The stash's mbufs back to the pool (the end of the worker). */
void tcp_mbuf_unstash(pk_tcp_engine *e)
{
    if (e->stash_i < e->nstash)
        rte_mempool_generic_put(e->pool, (void **)(e->stash + e->stash_i), e->nstash - e->stash_i, e->mcache);
    e->stash_i = e->nstash = 0;
}

/* A segment's frame: an mbuf of the Ethernet header, written, and iplen bytes after it,
 * which the caller fills; NULL (a transmit drop) when the pool or the mbuf has no room. */
static inline uint8_t *seg_frame(pk_tcp_engine *e, struct rte_mbuf **mp, uint16_t ethertype, uint32_t iplen)
{
    struct rte_mbuf *m = mbuf_get(e);
    if (!m) {
        cnt(e, PK_drop_tx);
        return NULL;
    }
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(e->l2 + iplen));
    if (!d) {
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return NULL;
    }
    *mp = m;
    return d + put_l2(e, d, dst_mac(e), ethertype);
}

/* An IPv6 segment: from la to ra (16 bytes each), or with la NULL between this role's
 * addresses from the template, the client's last 4 bytes being client_low (host order). */
static void tx_seg6(pk_tcp_engine *e, const uint8_t *la, const uint8_t *ra, uint32_t client_low, uint16_t lport,
                    uint16_t rport, uint32_t seq, uint32_t ack, uint8_t flags, uint32_t off, uint32_t len)
{
    const uint32_t opt = (flags & TH_SYN) ? 4 : 0, tcplen = TCP_LEN + opt + len;   /* SYN: the MSS option */
    struct rte_mbuf *m;
    uint8_t *ip = seg_frame(e, &m, 0x86DD, IP6_LEN + tcplen);
    if (!ip)
        return;
    memcpy(ip, e->ip6_tmpl, IP6_LEN);
    wr16(ip + 4, (uint16_t)tcplen);
    uint64_t as;
    if (la) {
        memcpy(ip + 8, la, 16);
        memcpy(ip + 24, ra, 16);
        as = sum16(ip + 8, 32, 0);
    } else {
        uint8_t *c = ip + (e->cfg.role == PK_TCP_SERVER ? 36 : 20);
        wr32(c, client_low);
        as = e->ph6_sum + sum16(c, 4, 0);
    }
    put_tcp(e, ip + IP6_LEN, as, lport, rport, seq, ack, flags, opt, off, len);
    if (e->ol_tcp)
        seg_offload(e, m, 1);
    tx_seg_put(e, m, flags);
}

void tcp_tx_syn6_to(pk_tcp_engine *e, uint32_t client_low, const uint8_t *ra, uint16_t lport, uint16_t rport,
                    uint32_t seq)
{
    uint8_t la[16];
    memcpy(la, e->cfg.client6_hi, 12);
    wr32(la + 12, client_low);
    tx_seg6(e, la, ra, client_low, lport, rport, seq, 0, TH_SYN, 0, 0);
}

/* One TCP segment from the template: Ethernet, IPv4 (TOS, DF), TCP with the
 * MSS option on SYNs; payload msg[off, off + len). lip, rip: host order; over IPv6
 * the client's address is the one of them this role's client is (see tx_seg6). */
void tcp_tx_seg(pk_tcp_engine *e, uint32_t lip, uint32_t rip, uint16_t lport, uint16_t rport,
                uint32_t seq, uint32_t ack, uint8_t flags, uint32_t off, uint32_t len)
{
    if (e->cfg.ipv6) {
        tx_seg6(e, NULL, NULL, e->cfg.role == PK_TCP_SERVER ? rip : lip, lport, rport, seq, ack, flags, off, len);
        return;
    }
    const uint32_t opt = (flags & TH_SYN) ? 4 : 0, tcplen = TCP_LEN + opt + len;   /* SYN: the MSS option */
    struct rte_mbuf *m;
    uint8_t *ip = seg_frame(e, &m, 0x0800, IP_LEN + tcplen);
    if (!ip)
        return;
    /* the template's fixed fields (TOS, DF, TTL 64, TCP), then length and addresses,
     * summed from registers as put_tcp does */
    uint32_t la = rte_cpu_to_be_32(lip), ra = rte_cpu_to_be_32(rip);
    uint16_t tot = rte_cpu_to_be_16((uint16_t)(IP_LEN + tcplen));
    memcpy(ip, e->ip4_tmpl, IP_LEN);
    memcpy(ip + 2, &tot, 2);
    memcpy(ip + 12, &la, 4);
    memcpy(ip + 16, &ra, 4);
    uint64_t as = (la & 0xffff) + (la >> 16) + (ra & 0xffff) + (ra >> 16);
    uint16_t ipck = e->ol_ip4 ? 0 : (uint16_t)~fold(e->ip4_sum + tot + as);
    memcpy(ip + 10, &ipck, 2);
    put_tcp(e, ip + IP_LEN, as, lport, rport, seq, ack, flags, opt, off, len);
    if (e->ol_ip4 | e->ol_tcp)
        seg_offload(e, m, 0);
    tx_seg_put(e, m, flags);
}

/* A segment of socket idx. */
void tcp_sock_tx(pk_tcp_engine *e, uint32_t idx, uint32_t seq, uint8_t flags, uint32_t off, uint32_t len)
{
    tsock *s = &e->socks[idx];
    tuple4 t;
    tcp_sock_tuple(e, idx, &t);
    uint32_t ack = (flags & TH_ACK) ? s->rcv_nxt : 0;
    if (flags & TH_ACK)
        s->ack_owed = 0;            /* this segment carries it */
    if (e->cfg.role == PK_TCP_SERVER)
        tcp_tx_seg(e, rte_be_to_cpu_32(e->cfg.ip), t.cip, t.sport, t.cport, seq, ack, flags, off, len);
    else
        tcp_tx_seg(e, t.cip, rte_be_to_cpu_32(e->cfg.server_ip), t.cport, t.sport, seq, ack, flags, off, len);
}

/* In-order data to acknowledge (RFC 9293 3.8.6.3, delayed ACK): what this socket sends later in
 * this pass (the next request, the response) carries the ACK; else a pure ACK goes at the pass's
 * end (tcp_acks_flush), microseconds later. A second segment owed acknowledges both at once
 * (an ACK at least every second full-sized segment, as a Linux sender's window growth expects). */
void tcp_ack_later(pk_tcp_engine *e, uint32_t idx)
{
    tsock *s = &e->socks[idx];
    if (s->ack_owed || e->nack == ACKQ) {
        tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
        return;
    }
    s->ack_owed = 1;
    e->ackq[e->nack++] = idx;
}

/* The pass's end: a pure ACK from each socket that still owes one (a socket closed or sent
 * since owes none: ack_owed is clear). */
void tcp_acks_flush(pk_tcp_engine *e)
{
    for (uint32_t i = 0; i < e->nack; i++) {
        uint32_t idx = e->ackq[i];
        tsock *s = &e->socks[idx];
        if (s->ack_owed && s->state != S_CLOSED)
            tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
    }
    e->nack = 0;
}

/* Send what the window allows of the message from nxt; FIN on its last byte
 * when wanted. Returns segments sent. */
int tcp_send_data(pk_tcp_engine *e, uint32_t idx, int at_least_one)
{
    tsock *s = &e->socks[idx];
    int n = 0;
    while (s->nxt < e->msg_len) {
        uint32_t len = e->msg_len - s->nxt;
        if (len > s->mss)
            len = s->mss;
        if (s->nxt - s->una + len > s->win && !(at_least_one && n == 0))
            break;
        uint8_t fl = TH_ACK;
        if (s->nxt + len == e->msg_len) {
            fl |= TH_PSH;
            if (s->flags & F_WANT_FIN) {
                fl |= TH_FIN;
                s->flags |= F_FIN_SENT;
            }
        }
        tcp_sock_tx(e, idx, s->snd_base + s->nxt, fl, s->nxt, len);
        s->nxt += len;
        n++;
    }
    return n;
}

void tcp_send_fin(pk_tcp_engine *e, uint32_t idx)
{
    tsock *s = &e->socks[idx];
    s->flags |= F_FIN_SENT;
    tcp_sock_tx(e, idx, s->snd_base, TH_FIN | TH_ACK, 0, 0);
}

void tcp_start_message(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->flags |= F_SENDING;
    s->una = s->nxt = 0;
    s->retries = 0;
    tcp_send_data(e, idx, 1);
    tcp_timer_add(e, idx, TL_RTO, now);
}

/* A segment answering g, from its destination to its source. */
static void tx_reply(pk_tcp_engine *e, const seg *g, uint32_t seq, uint32_t ack, uint8_t flags)
{
    if (e->cfg.ipv6)
        tx_seg6(e, g->da, g->sa, 0, g->dport, g->sport, seq, ack, flags, 0, 0);
    else
        tcp_tx_seg(e, g->dip, g->sip, g->dport, g->sport, seq, ack, flags, 0, 0);
}

/* A segment for no socket: RST (tcp_rst), or an ACK for a FIN (no TIME_WAIT: the
 * peer's FIN retransmitted after we closed). */
void tcp_reply_nosock(pk_tcp_engine *e, const seg *g)
{
    if (g->flags & TH_RST)
        return;
    uint32_t end = g->seq + g->len + ((g->flags & TH_SYN) ? 1 : 0) + ((g->flags & TH_FIN) ? 1 : 0);
    if ((g->flags & TH_FIN) && !(g->flags & TH_SYN) && (g->flags & TH_ACK)) {
        tx_reply(e, g, g->ack, end, TH_ACK);
        return;
    }
    if (!e->cfg.tcp_rst)
        return;
    if (g->flags & TH_ACK)
        tx_reply(e, g, g->ack, 0, TH_RST);
    else
        tx_reply(e, g, 0, end, TH_RST | TH_ACK);
}
