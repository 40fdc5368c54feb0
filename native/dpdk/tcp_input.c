/* TCP input: a segment's options, then its socket's state machine. */
#include "tcp_internal.h"
#include "tcp_counts.h"

static void open_server(pk_tcp_engine *e, uint32_t idx, const seg *g, uint64_t now)
{
    tsock *s = &e->socks[idx];
    memset(s, 0, sizeof(*s));
    s->state = S_SYN_RCVD;
    s->iss = isn_for(e, g->sip, g->sport, g->dip, g->dport, now);
    s->snd_base = s->iss + 1;
    s->rcv_nxt = g->seq + 1;
    s->win = g->win;
    s->mss = g->mss && g->mss < e->cfg.mss ? g->mss : e->cfg.mss;
    if (!g->mss)
        s->mss = MSS_DEFAULT(e) < e->cfg.mss ? MSS_DEFAULT(e) : e->cfg.mss;
    e->current++;
    cnt(e, PK_sock_open);
    pk_set(&e->c, PK_sock_current, e->current);
    s->t0 = now;                    /* SYN-ACK sent: first-packet RTT */
    tcp_sock_tx(e, idx, s->iss, TH_SYN | TH_ACK, 0, 0);
    tcp_timer_add(e, idx, TL_RTO, now);
}

/* ACK processing shared by both roles; -1 = drop the segment. */
static int take_ack(pk_tcp_engine *e, tsock *s, uint32_t ack)
{
    uint32_t off = ack - s->snd_base;
    uint32_t limit = ((s->flags & F_SENDING) ? s->nxt : 0) + ((s->flags & F_FIN_SENT) ? 1 : 0);
    if (off > limit && !seq_lt(ack, s->snd_base))
        return -1;                  /* acknowledges what we never sent */
    if (seq_lt(ack, s->snd_base))
        return 0;                   /* old */
    if (s->flags & F_SENDING) {
        uint32_t got = off < e->msg_len ? off : e->msg_len;
        if (got > s->una) {
            s->una = got;
            s->retries = 0;
        }
        if (s->una == e->msg_len) {
            s->flags &= (uint8_t)~F_SENDING;
            s->snd_base += e->msg_len;
            off -= e->msg_len;
            s->una = s->nxt = 0;
        }
    }
    if ((s->flags & F_FIN_SENT) && !(s->flags & F_SENDING) && off == 1)
        s->flags |= F_FIN_ACKED;
    return 0;
}

/* A segment its socket's state does not take: dropped, and answered with a reset where
 * there is no connection. */
static inline void drop_seg(pk_tcp_engine *e, const tsock *s, const seg *g)
{
    cnt(e, PK_tcp_drop);
    if (s->state == S_CLOSED)
        tcp_reply_nosock(e, g);
}

/* The handshake's answer to our SYN (either role): 0 when it acknowledges it (established,
 * the first-packet RTT recorded unless the SYN was sent again), else -1 (dropped). */
static inline int syn_acked(pk_tcp_engine *e, tsock *s, const seg *g, uint64_t now)
{
    if (g->ack != s->iss + 1) {
        cnt(e, PK_tcp_drop);
        return -1;
    }
    if (s->retries == 0)
        record_rtt(e, now - s->t0);
    s->state = S_ESTAB;
    return 0;
}

/* CLIENT: our SYN answered by a bare ACK. A peer holding the tuple in TIME_WAIT answers so a
 * SYN whose sequence number is not past the old connection's (its ACK is that connection's
 * rcv_nxt). RFC 9293 3.10.7.3: a reset at that ACK (it ends TIME_WAIT on Linux unless
 * tcp_rfc1337 is set), then the SYN again, from past the old sequence numbers either way.
 * Counted as a SYN retransmission; the retransmission limit bounds it as it bounds the RTO. */
static void syn_answered_by_ack(pk_tcp_engine *e, uint32_t idx, const seg *g, uint64_t now)
{
    tsock *s = &e->socks[idx];
    if (g->ack == s->iss + 1 || s->retries >= e->cfg.retries) {
        cnt(e, PK_tcp_drop);        /* the RTO goes on (and ends it) */
        return;
    }
    tcp_sock_tx(e, idx, g->ack, TH_RST, 0, 0);
    tuple4 t;
    tcp_sock_tuple(e, idx, &t);
    uint32_t iss = isn_for(e, t.cip, t.cport, rte_be_to_cpu_32(e->cfg.server_ip), t.sport, now);
    if (!seq_lt(g->ack, iss))
        iss = g->ack + RCV_WINDOW;
    s->iss = iss;
    s->snd_base = iss + 1;
    s->retries++;
    uint64_t before = pk_read(&e->c, PK_syn_tx);
    tcp_sock_tx(e, idx, s->iss, TH_SYN, 0, 0);
    pk_add(&e->c, PK_retrans_syn, pk_read(&e->c, PK_syn_tx) - before);
    tcp_timer_add(e, idx, TL_RTO, now);
}

/* IPv6: the server's address is the one expected and the client's has the clients'
 * first 12 bytes (its last 4 then go through tcp_ip_slot as an IPv4 address does). */
static int ours6(const pk_tcp_engine *e, const seg *g, int server)
{
    const uint8_t *srv = server ? g->da : g->sa, *cli = server ? g->sa : g->da;
    return memcmp(srv, server ? e->cfg.ip6 : e->cfg.server_ip6, 16) == 0 &&
           memcmp(cli, e->cfg.client6_hi, 12) == 0;
}

static void handle_tcp(pk_tcp_engine *e, const seg *g, uint64_t now)
{
    uint32_t slot, idx;
    int server = e->cfg.role == PK_TCP_SERVER;
    uint32_t cip = server ? g->sip : g->dip;
    uint16_t cport = server ? g->sport : g->dport, sport = server ? g->dport : g->sport;
    uint32_t li = (uint32_t)(uint16_t)(sport - e->cfg.listen);
    int ours = e->cfg.ipv6 ? ours6(e, g, server)
                           : (server ? g->dip : g->sip) == (server ? rte_be_to_cpu_32(e->cfg.ip)
                                                                   : rte_be_to_cpu_32(e->cfg.server_ip));
    if (!ours || li >= e->cfg.listen_num || tcp_ip_slot(e, cip, &slot) != 0 ||
        (!server && (uint32_t)(uint16_t)(cport - e->cfg.lport_lo) >= e->nports_c)) {
        cnt(e, PK_tcp_drop);
        tcp_reply_nosock(e, g);
        return;
    }
    if (server)
        idx = (slot * 65536u + cport) * e->cfg.listen_num + li;
    else
        idx = (slot * e->nports_c + (uint32_t)(cport - e->cfg.lport_lo)) * e->cfg.listen_num + li;
    tsock *s = &e->socks[idx];
    if (g->flags & TH_SYN)
        cnt(e, PK_syn_rx);
    if (g->flags & TH_FIN)
        cnt(e, PK_fin_rx);
    if (g->flags & TH_RST)
        cnt(e, PK_rst_rx);

    /* RST: accepted only at the expected sequence number (or answering our SYN) */
    if (g->flags & TH_RST) {
        if (s->state == S_CLOSED) {
            cnt(e, PK_tcp_drop);
        } else if (s->state == S_SYN_SENT) {
            if ((g->flags & TH_ACK) && g->ack == s->iss + 1) {
                cnt(e, PK_err_connect);
                tcp_sock_free(e, idx, PK_sock_error);
            } else {
                cnt(e, PK_tcp_drop);
            }
        } else if (g->seq == s->rcv_nxt) {
            int clean = !server && !(s->flags & (F_WAITING | F_SENDING));
            if (!clean)
                cnt(e, PK_err_reset);
            tcp_sock_free(e, idx, clean ? PK_sock_close : PK_sock_error);
        } else {
            cnt(e, PK_tcp_drop);
        }
        return;
    }

    if (g->flags & TH_SYN) {
        if (server) {
            if (g->flags & TH_ACK) {
                cnt(e, PK_tcp_drop);
                if (s->state == S_CLOSED)
                    tcp_reply_nosock(e, g);
                return;
            }
            if (s->state == S_CLOSED) {
                open_server(e, idx, g, now);
            } else if (g->seq + 1 == s->rcv_nxt) {
                if (s->state == S_SYN_RCVD)   /* our SYN-ACK was lost */
                    tcp_sock_tx(e, idx, s->iss, TH_SYN | TH_ACK, 0, 0);
                else
                    tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
            } else {
                /* a new connection on a busy tuple: the peer has forgotten the old one */
                tcp_sock_free(e, idx, PK_sock_error);
                open_server(e, idx, g, now);
            }
            return;
        }
        /* CLIENT: SYN-ACK */
        if (!(g->flags & TH_ACK) || s->state == S_CLOSED) {
            drop_seg(e, s, g);
            return;
        }
        if (s->state == S_SYN_SENT) {
            if (syn_acked(e, s, g, now) != 0)
                return;
            s->rcv_nxt = g->seq + 1;
            s->win = g->win;
            s->snd_base = s->iss + 1;
            s->mss = g->mss && g->mss < e->cfg.mss ? g->mss : (g->mss ? e->cfg.mss : MSS_DEFAULT(e) < e->cfg.mss ? MSS_DEFAULT(e) : e->cfg.mss);
            tcp_client_request(e, idx, now);   /* the request carries the handshake's ACK */
        } else if (g->seq + 1 == s->rcv_nxt) {
            tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
        } else {
            cnt(e, PK_tcp_drop);
        }
        return;
    }

    if (s->state == S_SYN_SENT && (g->flags & TH_ACK) && !server) {
        syn_answered_by_ack(e, idx, g, now);
        return;
    }
    if (s->state == S_CLOSED || !(g->flags & TH_ACK) || s->state == S_SYN_SENT) {
        drop_seg(e, s, g);
        return;
    }
    if (s->state == S_SYN_RCVD) {
        if (syn_acked(e, s, g, now) != 0)
            return;
        s->retries = 0;
        tcp_timer_del(e, idx);
    }
    count_dup_ack(e, s, g);
    s->win = g->win;
    if (take_ack(e, s, g->ack) != 0) {
        cnt(e, PK_tcp_drop);
        tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
        return;
    }
    int need_ack = 0, sent = 0;
    if (g->len || (g->flags & TH_FIN)) {
        if (g->seq != s->rcv_nxt) {
            /* out of order or a retransmission: stop-and-wait keeps nothing; say where we are */
            if (!seq_lt(g->seq, s->rcv_nxt))
                cnt(e, PK_tcp_drop);
            need_ack = 1;
        } else {
            s->rcv_nxt += g->len;
            need_ack = (g->flags & TH_FIN) ? 1 : 2;   /* 2: in-order data, its ACK may wait (tcp_ack_later) */
            if (g->len && server) {
                int r = tcp_server_scan(e, s, g->data, g->len);
                if (r < 0) {
                    cnt(e, PK_http_err);
                    tcp_sock_abort(e, idx, PK_err_read);
                    return;
                }
                if (r == 1) {
                    s->hdr_bytes = 0;
                    s->match = 0;
                    if (s->flags & (F_SENDING | F_FIN_SENT)) {
                        cnt(e, PK_tcp_drop);   /* pipelined: not served */
                    } else {
                        if (!e->cfg.keepalive)
                            s->flags |= F_WANT_FIN;
                        tcp_start_message(e, idx, now);
                        sent = 1;
                    }
                }
            } else if (g->len) {
                if (!(s->flags & F_WAITING)) {
                    tcp_sock_abort(e, idx, PK_err_read);   /* bytes nobody asked for */
                    return;
                }
                int r = tcp_client_take(e, s, g->data, g->len);
                if (r < 0) {
                    cnt(e, PK_http_err);
                    tcp_sock_abort(e, idx, PK_err_read);
                    return;
                }
                if (g->flags & TH_FIN) {
                    s->rcv_nxt++;
                    s->flags |= F_FIN_RCVD;
                }
                if (r == 1) {
                    tcp_client_response(e, idx, now);
                    if (e->socks[idx].state == S_CLOSED)
                        return;    /* fast close */
                    sent = (s->flags & F_FIN_SENT) != 0;
                    if (e->cfg.disable_ack && !(g->flags & TH_FIN))
                        need_ack = 0;   /* disable_ack: the next request or FIN acknowledges it */
                }
            }
            if ((g->flags & TH_FIN) && !(s->flags & F_FIN_RCVD)) {
                s->rcv_nxt++;
                s->flags |= F_FIN_RCVD;
            }
        }
    }
    if (s->flags & F_FIN_RCVD) {
        if (!server && (s->flags & F_WAITING)) {
            /* the server closed before the whole response */
            cnt(e, PK_http_err);
            tcp_sock_abort(e, idx, PK_err_read);
            return;
        }
        if (!(s->flags & F_FIN_SENT)) {
            if (s->flags & F_SENDING) {
                s->flags |= F_WANT_FIN;   /* after the message */
            } else if (!server && s->tl == TL_KA) {
                tcp_client_close(e, idx, now);
                sent = 1;
            } else if (server || !(s->flags & F_WAITING)) {
                tcp_timer_del(e, idx);
                tcp_send_fin(e, idx);
                tcp_timer_add(e, idx, TL_RTO, now);
                sent = 1;
            }
        }
        if ((s->flags & F_FIN_SENT) && (s->flags & F_FIN_ACKED)) {
            if (need_ack && !sent)
                tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
            tcp_sock_free(e, idx, PK_sock_close);
            return;
        }
    }
    /* more of the message as the window opens */
    if (s->flags & F_SENDING) {
        if (tcp_send_data(e, idx, 0))
            sent = 1;
    }
    if (need_ack && !sent) {
        if (need_ack == 2)
            tcp_ack_later(e, idx);
        else
            tcp_sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
    }
    if (needs_rto(s)) {
        if (s->tl != TL_RTO || s->retries == 0)
            tcp_timer_add(e, idx, TL_RTO, now);
    } else if (s->tl == TL_RTO) {
        tcp_timer_del(e, idx);
    }
}

/* A TCP segment of either family whose checksum held (g has its addresses): the
 * options, then its socket. */
void tcp_in(pk_tcp_engine *e, seg *gp, const uint8_t *d, const uint8_t *l4, uint32_t doff,
            uint32_t l4len, uint64_t now)
{
    seg g = *gp;
    g.sport = rd16(l4);
    g.dport = rd16(l4 + 2);
    g.seq = rd32(l4 + 4);
    g.ack = rd32(l4 + 8);
    g.flags = l4[13] & 0x3f;
    g.win = rd16(l4 + 14);
    g.mss = 0;
    g.data = l4 + doff;
    g.len = l4len - doff;
    g.smac = d + 6;
    for (uint32_t o = TCP_LEN; o < doff;) {       /* options: only MSS is read */
        uint8_t kind = l4[o];
        if (kind == 0)
            break;
        if (kind == 1) {
            o++;
            continue;
        }
        if (o + 1 >= doff || l4[o + 1] < 2 || o + l4[o + 1] > doff) {
            cnt(e, PK_bad_rx);
            return;
        }
        if (kind == 2 && l4[o + 1] == 4)
            g.mss = rd16(l4 + o + 2);
        o += l4[o + 1];
    }
    if (g.mss && g.mss < 64)
        g.mss = 64;
    if ((g.flags & TH_SYN) && (g.flags & (TH_FIN | TH_RST))) {
        cnt(e, PK_bad_rx);
        return;
    }
    if (e->cfg.role == PK_TCP_SERVER && !e->cfg.vxlan) {   /* vxlan: tcp_vxlan.c takes the outer source */
        memcpy(e->peer_mac, g.smac, 6);
        e->peer_mac_ok = 1;
    }
    handle_tcp(e, &g, now);
}
