/* Log-linear latency histogram (HDR-style), in nanoseconds.
 *
 * Values below 2^PK_HIST_SUB_BITS get one bucket each; above, every power of
 * two is split into 2^PK_HIST_SUB_BITS equal buckets, so a bucket is at most
 * 1/32 (3.1%) of its value wide. Values from 2^PK_HIST_MAX_EXP up land in the
 * last bucket (about 36 minutes: no real latency gets there).
 * The bucket maths lives here only; Python gets the bounds through
 * perfkit._counters.hist_bucket_bounds(). So does recording a latency sample
 * (pk_lat_sample, pk_record_latency): every engine's workers call these.
 */
#ifndef PERFKIT_HIST_H
#define PERFKIT_HIST_H

#include <stdint.h>

#include "perfkit/counters.h"

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

/* Which counters a latency sample goes to: the lat_* ones, or a DPDK probe's probe_* ones. */
enum pk_lat_kind { PK_LAT = 0, PK_LAT_PROBE = 1 };

/* One latency sample (ns) into a worker's histogram and its count, sum, min and max
 * counters. min is the worker's own copy of the minimum (0 = none yet). Single writer. */
static inline void pk_lat_sample(pk_counter_block *c, pk_hist *h, uint64_t *min, uint64_t v, enum pk_lat_kind kind)
{
    const int p = kind == PK_LAT_PROBE;
    pk_hist_add(h, v);
    pk_add(c, p ? PK_probe_rx : PK_lat_count, 1);
    pk_add(c, p ? PK_probe_lat_sum_ns : PK_lat_sum_ns, v);
    if (*min == 0 || v < *min) {
        *min = v ? v : 1;
        pk_set(c, p ? PK_probe_lat_min_ns : PK_lat_min_ns, *min);
    }
    if (v > pk_read(c, p ? PK_probe_lat_max_ns : PK_lat_max_ns))
        pk_set(c, p ? PK_probe_lat_max_ns : PK_lat_max_ns, v);
}

/* A flow's latency sample: pk_lat_sample, and its jitter against the flow's last sample
 * (last_lat, per flow). */
static inline void pk_record_latency(pk_counter_block *c, pk_hist *h, uint64_t *lat_min, uint64_t lat,
                                     uint64_t *last_lat)
{
    pk_lat_sample(c, h, lat_min, lat, PK_LAT);
    if (*last_lat)
        pk_add(c, PK_jitter_sum_ns, lat > *last_lat ? lat - *last_lat : *last_lat - lat);
    *last_lat = lat;
}

#endif
