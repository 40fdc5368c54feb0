/* dperf's receive counts that need a look at the packet or the socket (tosRx, ackDup): kept
 * here so the receive path gains one call each. */
#ifndef PERFKIT_TCP_COUNTS_H
#define PERFKIT_TCP_COUNTS_H

#include "tcp_internal.h"

/* tosRx: an IP packet whose TOS (IPv6: traffic class) is this side's tos, when one is set
 * (dperf counts only then: it tells its own marked traffic from the rest). */
static inline void count_tos(pk_tcp_engine *e, uint8_t tos)
{
    if (e->cfg.tos && tos == e->cfg.tos)
        cnt(e, PK_tos_rx);
}

static inline uint8_t ip6_tclass(const uint8_t *ip) { return (uint8_t)((ip[0] << 4) | (ip[1] >> 4)); }

/* ackDup: a bare ACK (no data, no FIN) on an established connection with data out that
 * acknowledges nothing new and keeps the window (RFC 5681's duplicate ACK; dperf counts an
 * ACK at snd_una while it has data out). Called before the segment's window is taken. */
static inline void count_dup_ack(pk_tcp_engine *e, const tsock *s, const seg *g)
{
    if (g->len == 0 && !(g->flags & TH_FIN) && s->state == S_ESTAB && (s->flags & F_SENDING) &&
        s->una < s->nxt && g->ack == s->snd_base + s->una && g->win == s->win)
        cnt(e, PK_ack_dup);
}

#endif
