/* The socket table (a socket's addresses and ports are its index: no hashing), its end, and its
 * timers: FIFO lists, one timeout each (retransmission, keep-alive), and what fires. */
#include "tcp_internal.h"

#include <sys/random.h>
#include <unistd.h>

/* Host-order client address of a slot, and back. */
static uint32_t slot_ip(const pk_tcp_engine *e, uint32_t slot)
{
    for (int r = 0; r < e->cfg.nranges; r++) {
        if (slot < e->cfg.client_num[r])
            return e->cfg.client_first[r] + slot;
        slot -= e->cfg.client_num[r];
    }
    return 0;
}

int tcp_ip_slot(const pk_tcp_engine *e, uint32_t ip_host, uint32_t *slot)
{
    uint32_t base = 0;
    for (int r = 0; r < e->cfg.nranges; r++) {
        if (ip_host - e->cfg.client_first[r] < e->cfg.client_num[r]) {
            *slot = base + (ip_host - e->cfg.client_first[r]);
            return 0;
        }
        base += e->cfg.client_num[r];
    }
    return -1;
}

void tcp_sock_tuple(const pk_tcp_engine *e, uint32_t idx, tuple4 *t)
{
    uint32_t L = e->cfg.listen_num, q = fdiv(idx, e->div_l);
    t->sport = (uint16_t)(e->cfg.listen + (idx - q * L));
    idx = q;
    if (e->cfg.role == PK_TCP_SERVER) {
        t->cport = (uint16_t)(idx % 65536);
        t->cip = slot_ip(e, idx / 65536);
    } else {
        q = fdiv(idx, e->div_p);
        t->cport = (uint16_t)(e->cfg.lport_lo + (idx - q * e->nports_c));
        t->cip = slot_ip(e, q);
    }
}

/* RFC 6528's secret, one for the process (its connections on a tuple then follow one clock
 * from engine to engine), and the clock's scale. */
static uint64_t isn_key[2];
static pthread_once_t isn_once = PTHREAD_ONCE_INIT;

static void isn_key_init(void)
{
    if (getrandom(isn_key, sizeof(isn_key), 0) != (ssize_t)sizeof(isn_key)) {   /* no entropy yet */
        isn_key[0] = isn_mix(rte_rdtsc());
        isn_key[1] = isn_mix(isn_key[0] ^ (uint64_t)getpid());
    }
}

void tcp_isn_init(pk_tcp_engine *e)
{
    pthread_once(&isn_once, isn_key_init);
    e->isn_key[0] = isn_key[0];
    e->isn_key[1] = isn_key[1];
    e->isn_mul = (uint64_t)((double)(1ull << 32) * 250000.0 / (double)e->hz);
}

void tcp_sock_free(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id how)
{
    tcp_timer_del(e, idx);
    memset(&e->socks[idx], 0, sizeof(tsock));
    cnt(e, how);                    /* PK_sock_close or PK_sock_error */
    e->current--;
    pk_set(&e->c, PK_sock_current, e->current);
}

void tcp_sock_abort(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id why)
{
    if (e->cfg.udp) {               /* nothing to reset: the socket ends */
        tcp_udp_close(e, idx);
        return;
    }
    tsock *s = &e->socks[idx];
    tcp_sock_tx(e, idx, snd_next(s), TH_RST | TH_ACK, 0, 0);
    cnt(e, why);
    tcp_sock_free(e, idx, PK_sock_error);
}

void tcp_timer_del(pk_tcp_engine *e, uint32_t idx)
{
    tsock *s = &e->socks[idx];
    int l = s->tl;
    if (l == TL_NONE)
        return;
    if (s->tprev)
        e->socks[s->tprev - 1].tnext = s->tnext;
    else
        e->head[l] = s->tnext;
    if (s->tnext)
        e->socks[s->tnext - 1].tprev = s->tprev;
    else
        e->tail[l] = s->tprev;
    s->tnext = s->tprev = 0;
    s->tl = TL_NONE;
}

/* Each list has one timeout, so appending keeps it in deadline order. */
void tcp_timer_add(pk_tcp_engine *e, uint32_t idx, int l, uint64_t now)
{
    tcp_timer_add_at(e, idx, l, now + (l == TL_RTO ? e->rto_c : e->ka_c));
}

/* A deadline off the list's own timeout (the keep-alive grid): a late one (at or before the
 * last one queued) still goes last; it fires on the next pass. */
void tcp_timer_add_at(pk_tcp_engine *e, uint32_t idx, int l, uint64_t deadline)
{
    tcp_timer_del(e, idx);
    tsock *s = &e->socks[idx];
    s->deadline = deadline;
    s->tl = (uint8_t)l;
    s->tprev = e->tail[l];
    s->tnext = 0;
    if (e->tail[l])
        e->socks[e->tail[l] - 1].tnext = idx + 1;
    else
        e->head[l] = idx + 1;
    e->tail[l] = idx + 1;
}

static void on_rto(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    if (e->cfg.udp) {
        tcp_udp_timer(e, idx, now);
        return;
    }
    tsock *s = &e->socks[idx];
    if (!needs_rto(s)) {
        tcp_timer_del(e, idx);
        return;
    }
    if (s->retries >= e->cfg.retries) {
        if (s->state == S_SYN_SENT) {
            cnt(e, PK_err_connect);
            cnt(e, PK_err_timeout);
            tcp_timer_del(e, idx);
            tcp_sock_free(e, idx, PK_sock_error);   /* nothing to reset: nobody answered */
            return;
        }
        if (s->state == S_ESTAB && !(s->flags & (F_SENDING | F_WAITING)) && (s->flags & F_FIN_SENT)) {
            /* the exchange is whole, only our FIN went unacknowledged: a close timeout, not an error */
            tcp_sock_tx(e, idx, snd_next(s), TH_RST | TH_ACK, 0, 0);
            cnt(e, PK_close_timeout);
            tcp_sock_free(e, idx, PK_sock_close);
            return;
        }
        if (s->flags & F_WAITING)
            cnt(e, PK_http_err);
        tcp_sock_abort(e, idx, PK_err_timeout);
        return;
    }
    s->retries++;
    /* a retransmit counts once the port's queue took it (syn_tx / fin_tx went up); one the
     * full queue dropped is in drop_tx only, so syn_tx - retrans_syn is the first SYNs sent */
    if (s->state == S_SYN_SENT || s->state == S_SYN_RCVD) {
        uint64_t before = pk_read(&e->c, PK_syn_tx);
        tcp_sock_tx(e, idx, s->iss, s->state == S_SYN_SENT ? TH_SYN : TH_SYN | TH_ACK, 0, 0);
        pk_add(&e->c, PK_retrans_syn, pk_read(&e->c, PK_syn_tx) - before);
    } else if (s->flags & F_SENDING) {
        /* go back to the first unacknowledged byte */
        if (s->nxt == e->msg_len && (s->flags & F_FIN_SENT))
            s->flags &= (uint8_t)~F_FIN_SENT;   /* it is sent again with the last segment */
        s->nxt = s->una;
        /* the segments the queue took (pkts_tx counts only at the flush, later) */
        uint64_t drops = pk_read(&e->c, PK_drop_tx), fins = pk_read(&e->c, PK_fin_tx);
        int n = tcp_send_data(e, idx, 1);
        pk_add(&e->c, PK_retrans_push, (uint64_t)n - (pk_read(&e->c, PK_drop_tx) - drops));
        /* the last segment carries the FIN again (a server's response with FIN): that FIN is a
         * retransmit too, so fin_tx - retrans_fin stays the first FINs sent */
        pk_add(&e->c, PK_retrans_fin, pk_read(&e->c, PK_fin_tx) - fins);
    } else {
        uint64_t before = pk_read(&e->c, PK_fin_tx);
        tcp_sock_tx(e, idx, s->snd_base, TH_FIN | TH_ACK, 0, 0);
        pk_add(&e->c, PK_retrans_fin, pk_read(&e->c, PK_fin_tx) - before);
    }
    tcp_timer_add(e, idx, TL_RTO, now);
}

void tcp_on_ka(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    if (e->cfg.udp) {
        tcp_udp_timer(e, idx, now);
        return;
    }
    uint64_t due = e->socks[idx].deadline;   /* this request's grid point */
    tcp_timer_del(e, idx);
    if (e->launching) {
        tcp_client_request(e, idx, now);
        uint64_t lag = now > due ? now - due : 0;
        e->socks[idx].ka_lag = lag > UINT32_MAX ? UINT32_MAX : (uint32_t)lag;
    } else {
        tcp_client_close(e, idx, now);
    }
}

void tcp_run_timers(pk_tcp_engine *e, uint64_t now)
{
    for (int l = TL_RTO; l < TL_N; l++) {
        for (int k = 0; k < TIMER_BUDGET && e->head[l]; k++) {
            uint32_t idx = e->head[l] - 1;
            if (e->socks[idx].deadline > now)
                break;
            if (e->ntx >= TXQ / 2)
                break;              /* requests and retransmissions wait for room to send */
            if (l == TL_RTO)
                on_rto(e, idx, now);
            else
                tcp_on_ka(e, idx, now);
        }
    }
}
