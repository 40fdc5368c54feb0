/* Per-flow sequence accounting (loss, duplicates, reordering), shared by the socket
 * and DPDK engines and tests/native/seq_fuzz.c; a flow's latency samples go through
 * perfkit/hist.h's pk_record_latency.
 *
 * A flow keeps a window of the last PK_SEQ_WINDOW sequence numbers below the
 * highest seen + 1. A number is declared lost only when it leaves the window
 * unseen, so counters never go back; an arrival older than the window
 * (reordered by more than PK_SEQ_WINDOW) counts as reordered: it was already
 * declared lost. At the end, pk_seq_window_missing() plus what the sender sent
 * beyond next settles the remaining loss.
 *
 * Single writer per flow state: the worker that receives the flow.
 */
#ifndef PERFKIT_SEQWIN_H
#define PERFKIT_SEQWIN_H

#include <stdint.h>
#include <string.h>

#include "perfkit/counters.h"
#include "perfkit/hist.h"

#define PK_SEQ_WINDOW 4096
#define PK_SEQ_WORDS  (PK_SEQ_WINDOW / 64)

typedef struct pk_flow_state {
    uint64_t next;                  /* highest sequence seen + 1 */
    uint64_t last_lat;              /* for jitter */
    uint64_t seen[PK_SEQ_WORDS];    /* bit s % PK_SEQ_WINDOW: s in [next-W, next) arrived */
} pk_flow_state;

static inline int pk_seen_get(const pk_flow_state *f, uint64_t s)
{
    return (f->seen[(s % PK_SEQ_WINDOW) / 64] >> (s % 64)) & 1;
}

static inline void pk_seen_put(pk_flow_state *f, uint64_t s, int v)
{
    uint64_t bit = 1ull << (s % 64);
    uint64_t *word = &f->seen[(s % PK_SEQ_WINDOW) / 64];
    *word = v ? (*word | bit) : (*word & ~bit);
}

/* Sequence numbers in the window [next-W, next) that never arrived. */
static inline uint64_t pk_seq_window_missing(const pk_flow_state *f)
{
    uint64_t have = 0;
    for (int i = 0; i < PK_SEQ_WORDS; i++)
        have += (uint64_t)__builtin_popcountll(f->seen[i]);
    uint64_t span = f->next < PK_SEQ_WINDOW ? f->next : PK_SEQ_WINDOW;
    return span - have;
}

/* Account one arrival of sequence number s. */
static inline void pk_seq_arrive(pk_flow_state *f, uint64_t s, uint64_t *lost, uint64_t *dup,
                                 uint64_t *reorder)
{
    if (s >= f->next) {
        if (s - f->next >= PK_SEQ_WINDOW) {
            *lost += pk_seq_window_missing(f) + (s + 1 - PK_SEQ_WINDOW - f->next);
            memset(f->seen, 0, sizeof(f->seen));
        } else {
            /* at most PK_SEQ_WINDOW steps; counted, so it cannot wrap at UINT64_MAX */
            for (uint64_t t = f->next, k = s - f->next + 1; k > 0; t++, k--) {
                if (t >= PK_SEQ_WINDOW && !pk_seen_get(f, t - PK_SEQ_WINDOW))
                    (*lost)++;
                pk_seen_put(f, t, 0);
            }
        }
        pk_seen_put(f, s, 1);
        f->next = s + 1;
    } else if (f->next - s > PK_SEQ_WINDOW) {
        (*reorder)++;
    } else if (pk_seen_get(f, s)) {
        (*dup)++;
    } else {
        pk_seen_put(f, s, 1);
        (*reorder)++;
    }
}

/* Settle a flow at the end: what is missing in its window, plus what the
 * sender sent (sent = its next sequence number) that never arrived. */
static inline uint64_t pk_seq_settle(pk_flow_state *f, uint64_t sent)
{
    uint64_t lost = pk_seq_window_missing(f);
    if (sent > f->next) {
        lost += sent - f->next;
        f->next = sent;
    }
    return lost;
}

/* The 64-bit sequence nearest to the flow's next from its low 32 bits (frames
 * too short for a 64-bit sequence carry only those). */
static inline uint64_t pk_seq_widen(uint64_t next, uint32_t lo)
{
    uint64_t s = (next & ~0xffffffffull) | lo;
    if (s > next && s - next > 0x80000000ull && s >= 0x100000000ull)
        s -= 0x100000000ull;
    else if (s < next && next - s > 0x80000000ull)
        s += 0x100000000ull;
    return s;
}

#endif
