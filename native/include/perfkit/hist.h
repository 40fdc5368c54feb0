/* Log-linear latency histogram (HDR-style), in nanoseconds.
 *
 * Values below 2^PK_HIST_SUB_BITS get one bucket each; above, every power of
 * two is split into 2^PK_HIST_SUB_BITS equal buckets, so a bucket is at most
 * 1/32 (3.1%) of its value wide. Values from 2^PK_HIST_MAX_EXP up land in the
 * last bucket (about 36 minutes: no real latency gets there).
 * The bucket maths lives here only; Python gets the bounds through
 * perfkit._counters.hist_bucket_bounds().
 */
#ifndef PERFKIT_HIST_H
#define PERFKIT_HIST_H

#include <stdint.h>

#define PK_HIST_SUB_BITS 5
#define PK_HIST_SUB      (1u << PK_HIST_SUB_BITS)
#define PK_HIST_MAX_EXP  41
#define PK_HIST_BUCKETS  ((PK_HIST_MAX_EXP - PK_HIST_SUB_BITS + 1) * PK_HIST_SUB)

typedef struct pk_hist {
    uint64_t b[PK_HIST_BUCKETS];
} __attribute__((aligned(64))) pk_hist;

static inline uint32_t pk_hist_index(uint64_t v)
{
    if (v < PK_HIST_SUB)
        return (uint32_t)v;
    if (v >= (1ull << PK_HIST_MAX_EXP))
        return PK_HIST_BUCKETS - 1;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v);      /* e >= SUB_BITS */
    uint64_t m = v >> (e - PK_HIST_SUB_BITS);            /* in [SUB, 2*SUB) */
    return (e - PK_HIST_SUB_BITS + 1) * PK_HIST_SUB + (uint32_t)(m - PK_HIST_SUB);
}

/* Smallest value that lands in bucket i. */
static inline uint64_t pk_hist_lower(uint32_t i)
{
    if (i < PK_HIST_SUB)
        return i;
    uint32_t g = i >> PK_HIST_SUB_BITS;                  /* >= 1 */
    uint64_t m = PK_HIST_SUB + (i & (PK_HIST_SUB - 1));
    return m << (g - 1);
}

/* Single writer: the owning worker. */
static inline void pk_hist_add(pk_hist *h, uint64_t v)
{
    uint32_t i = pk_hist_index(v);
    __atomic_store_n(&h->b[i], h->b[i] + 1, __ATOMIC_RELAXED);
}

#endif
