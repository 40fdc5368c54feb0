/* What the units of perfkit's DPDK engine share; dpdk_engine.h is the API (Cython,
 * tcp_engine.c), this is not. The units, by concern:
 *   eal.c          EAL once per process, the mbuf pools, the TSC time base, the crash report
 *   port.c         ports: ring pairs, network namespaces, open/close, raw send/recv, claims
 *   port_kdrops.c  drops only the kernel counts (af_packet, af_xdp): nic_imissed
 *   memif.c        memif: the peer leaving (EAL's interrupt thread held while a worker polls)
 *   udp_rx.c       receive: parse, count, sequence and latency per flow, reflect; the receiver
 *   udp_gen.c      the UDP generator: template frames, flows, pacing, probes
 *   udp_fwd.c      the forwarder between two ports
 *   udp_neigh.c    ARP: answer for the port, ask for a generator's destination
 *   udp_icmp.c     ICMP echo: answer for the port
 *   dpdk_engine.c  the engine: workers checked and allocated, their thread hooks, join, results
 *                  (threads, stop, running, snapshots: the shared core, native/common/engine.c)
 * Everything here is hidden in the extension (one shared object); the pkd_ prefix keeps
 * these names apart from the TCP engine's. */
#ifndef PERFKIT_DPDK_INTERNAL_H
#define PERFKIT_DPDK_INTERNAL_H

#include "dpdk_engine.h"

#include <pthread.h>
#include "engine.h"
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "perfkit/clock.h"
#include "perfkit/csum.h"   /* sum16, fold */
#include "perfkit/seqwin.h"
#include "perfkit/wire.h"

#define QUIET_NS        50000000ull  /* receivers: quiet this long after their feeders are done */
#define FLUSH_NS        1000000ull   /* refresh the CPU counters this often */
#define NIC_EVERY_NS    100000000ull /* read the PMD's counters this often */
#define IDLE_YIELD      256          /* idle loops before a worker yields its CPU */

/* 64-byte frames have 18 bytes of UDP payload: too few for pk_wire_hdr (24).
 * They carry this short form of it instead: the same fields, the sequence and
 * the timestamp cut to their low 32 bits (the receiver restores the sequence
 * from its window, and latencies below 4.29 s from its own clock). Host byte
 * order, as pk_wire_hdr. Frames of 70 bytes and more carry pk_wire_hdr itself,
 * so a socket-engine receiver can read them. */
#define PK_WIRE_SHORT_MAGIC 0x706b7331u /* "pks1" */
typedef struct pk_wire_short {
    uint32_t magic;
    uint32_t flow;
    uint32_t seq_lo;
    uint32_t tx_ns_lo;
} pk_wire_short;
#define PK_WIRE_SHORT_LEN ((uint32_t)sizeof(pk_wire_short))

/* Latency probes carry pk_wire_hdr with this magic; flow = the generator's queue. */
#define PK_WIRE_PROBE_MAGIC 0x706b7031u /* "pkp1" */
#define PROBE_FLAG 0x80000000u          /* in pend_len: this pending frame is a probe */

#define ETH_LEN   14
#define IP_LEN    20
#define UDP_LEN   8
#define HDRS_LEN  (ETH_LEN + IP_LEN + UDP_LEN)
#define FCS_LEN   4

/* ------------------------------------------------------------ time base */

/* TSC -> CLOCK_MONOTONIC nanoseconds, calibrated at each engine start against
 * a TSC/clock pair taken at EAL init (the TSC is invariant on the targets). */
typedef struct timebase {
    uint64_t tsc0, ns0, hz;
    uint64_t mult;               /* ns per cycle, << 32 */
} timebase;

static inline uint64_t tb_cyc_ns(const timebase *tb, uint64_t cycles)
{
    return (uint64_t)(((unsigned __int128)cycles * tb->mult) >> 32);
}

static inline uint64_t tb_ns(const timebase *tb, uint64_t tsc)
{
    if (tsc >= tb->tsc0)
        return tb->ns0 + tb_cyc_ns(tb, tsc - tb->tsc0);
    return tb->ns0 - tb_cyc_ns(tb, tb->tsc0 - tsc);  /* another core, a few cycles behind */
}

static inline uint64_t tb_cycles(const timebase *tb, uint64_t ns)
{
    return (uint64_t)(((unsigned __int128)ns * tb->hz) / 1000000000ull);
}

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------ EAL (eal.c) */

extern int pkd_eal_state;                   /* 0 never, 1 up, -1 failed */
extern struct rte_mempool *pkd_pool;
extern struct rte_mempool *pkd_jumbo_pool;  /* frames above one standard mbuf: made on first need */

void pkd_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
unsigned pkd_main_socket(void);
int pkd_need_pool(char *err, size_t errlen);
int pkd_need_jumbo_pool(char *err, size_t errlen);
void pkd_timebase_now(timebase *tb);

/* ------------------------------------------------------------------ ports (port.c) */

struct pk_dpdk_port {
    uint16_t pid;
    char name[RTE_ETH_NAME_MAX_LEN];  /* ethdev (= vdev) name */
    uint8_t mac[6];
    uint32_t ip;                      /* network order; 0 = none */
    int busy;                         /* an engine uses it */
    int started;                      /* rte_eth_dev_start succeeded */
    int pair, end;                    /* ring:NAME:end, else pair = -1 */
    uint16_t nq;                      /* rx and tx queues */
    int rss;                          /* rx queues fed by RSS */
    /* ARP resolution shared by the port's workers: the reply may come in on any queue */
    uint32_t arp_ip;                  /* asked for (network order), 0 = none */
    uint8_t arp_mac[6];
    int arp_claim, arp_done;          /* atomic */
    char netns[128];                  /* where it was probed: its control calls run there too */
    int kernel;                       /* af_packet, af_xdp, tap: frames from a Linux stack; or
                                       * an rx L4 checksum offload: partial sums may come in */
    /* af_packet and af_xdp: the PMD's own sockets, found when the port opened, for the drops
     * the kernel counts and DPDK 22.11 leaves out of imissed (see kernel_missed) */
    int kfd[PK_DPDK_MAX_QUEUES];
    int nkfd, kfamily;
    uint64_t ktp_drops;               /* af_packet: PACKET_STATISTICS is read-and-clear: the sum */
    uint64_t kxdp_base;               /* af_xdp: rx_ring_full when the port opened */
    int memif;                        /* net_memif: in memif_open[] while open */
    int pci;                          /* a NIC on the PCI bus (EAL's -a), not a vdev */
    int polling;                      /* workers polling it now (under ctl_lock) */
    uint64_t idle_moved[PK_DPDK_MAX_QUEUES];  /* pk_dpdk_port_poll_idle: frames at its last call */
    pk_dpdk_port_setup setup;         /* what setup_queues chose from rte_eth_dev_info */
};

/* An outgoing IPv4 frame (its IPv4 header l2 bytes in, all of it in the first segment): its
 * IPv4 and UDP/TCP checksums, by the device where the port enabled that tx offload (the mbuf
 * is flagged, the L4 field holds the pseudo header's sum), else computed here. -1: not an
 * IPv4 frame it can read (left as it is). */
int pkd_tx_csum(const pk_dpdk_port *p, struct rte_mbuf *m, uint32_t l2);

static inline void free_frames(struct rte_mbuf **m, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        rte_pktmbuf_free(m[i]);
}

/* port_kdrops.c: the sockets this process has open now, fds below MAX_FDS_SEEN, as a bitmap;
 * after the port's probe and queue setup, its PMD's sockets that appeared since `before` */
#define MAX_FDS_SEEN 4096
void pkd_sockets_now(uint8_t *bits);
void pkd_find_kernel_sockets(pk_dpdk_port *p, const char *dev, const uint8_t *before);

/* memif.c */
void pkd_memif_add(pk_dpdk_port *p);
void pkd_memif_remove(pk_dpdk_port *p);
void pkd_ctl_quiet_begin(void);
void pkd_ctl_quiet_end(void);

/* --------------------------------------------------------------- engine */

typedef pk_flow_state flow_state;  /* perfkit/seqwin.h */

typedef struct worker {
    /* the counters first: one cache-line-aligned block, this worker writes it */
    pk_counter_block c;
    pk_hist hist;
    pk_hist probe_hist;

    pk_dpdk_worker_cfg cfg;
    struct pk_dpdk_engine *engine;
    pk_dpdk_port *port;
    uint16_t pid, queue;
    /* FORWARD: where frames leave; the other direction's worker when this thread runs it
     * too (guest), or 1 when another worker's thread runs this one (hosted) */
    pk_dpdk_port *out;
    uint16_t out_pid;
    struct worker *guest;
    int ports_ok;                /* pk_dpdk_port_burst_ok said yes for port and out since the
                                  * last poll_idle */
    int hosted;
    int done_sending;            /* atomic: a generator sets it when it stops sending */

    /* GEN */
    uint8_t *tmpl;               /* the longest frame, without the FCS: headers, zero filler */
    uint32_t frame_len;          /* its length */
    uint16_t *pattern;           /* frame lengths without FCS, sent in turn */
    struct rte_mempool *gpool;   /* where its frames come from: the jumbo pool for long ones */
    struct rte_mempool_cache *gcache;  /* this thread's cache of it (no TLS lookup per burst) */
    uint32_t npattern, next_size;
    uint64_t ip_base;            /* IPv4 header words that never change (length, addresses: 0) */
    uint64_t udp_base;           /* UDP words that never change (protocol; the filler is 0) */
    /* tx checksum offloads, chosen once from the port's setup (gen_offloads): each frame's
     * mbuf flags, and which sums the device fills in */
    uint64_t ol_flags;
    uint8_t ol_ip, ol_udp;
    uint64_t *flow_seq;          /* next sequence per flow = frames sent per flow */
    uint32_t next_flow;
    uint32_t src_h, dst_h;       /* first source and destination address, host order */
    uint32_t nsp, ndp, nsi, ndi; /* the ranges, each >= 1 */
    uint32_t dsp, ddp, dsi, ddi; /* next_flow's place in them */
    uint32_t wrap[4];            /* flow_first's place (dsp ddp dsi ddi): a wrap without division */
    struct rte_mbuf *pend[PK_DPDK_MAX_BURST + 1];  /* built, not yet taken by the port (+1: a probe) */
    uint32_t pend_len[PK_DPDK_MAX_BURST + 1];      /* their frame bytes, FCS counted; | PROBE_FLAG */
    uint64_t probe_seq;          /* probes sent = the next probe sequence number */
    uint64_t probe_every, next_probe;  /* TSC */
    uint64_t probe_min;
    uint32_t npend;
    uint32_t flow_end;           /* flow_first + the flows it sends now (grows to flow_first + flows) */
    /* the control slot (pk_dpdk_set_rate): ctl_rate written first, then ctl_gen (release);
     * the worker reads ctl_gen once per burst and compares it with the one it applied */
    double ctl_rate;
    uint32_t ctl_gen;
    uint8_t dst_mac[6];
    int resolved, dst_broadcast;

    /* RXONLY, and GEN with track: the port's table, shared by its receivers */
    flow_state *flows;           /* nflows load flows, then PK_DPDK_MAX_QUEUES probe flows */
    uint32_t nflows;
    int owns_flows;              /* this worker allocated it, settles and frees it */
    uint32_t flows_seen;         /* the table's owner, at join: load flows that had a frame in */
    uint64_t drop_ctr;
    uint64_t lat_min;

    /* CPU and NIC accounting */
    uint64_t wall0, busy, last_flush, last_nic;
    uint64_t nic_base[PK_NIC_N], nic_raw[PK_NIC_N], nic_gone[PK_NIC_N];   /* pkd_read_nic */
    int nic_owner;               /* the port's first worker in this engine */
    int cpu_frozen;

    char err[256];
} worker;

struct pk_dpdk_engine {
    pk_engine core;              /* threads, stop flag, running, snapshots, errors */
    int n;
    worker *w;
    timebase tb;
    uint64_t hard_end;           /* TSC */
    int settled;
};

static inline int stopping(const worker *w)
{
    return pk_engine_stopping(&w->engine->core);
}

/* ------------------------------------------------------------ checksums */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "words32/words64 assume a little-endian host");

/* The 16-bit words of a host-order value as they lie in memory, summed
 * (little-endian hosts: memory word k is bits 16k..16k+15). */
static inline uint64_t words32(uint32_t v) { return (v & 0xffff) + (v >> 16); }
static inline uint64_t words64(uint64_t v) { return words32((uint32_t)v) + words32((uint32_t)(v >> 32)); }

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

/* A frame sent back where it came from: its Ethernet and IPv4 addresses swapped in place
 * (ip: its IPv4 header; the sums stay the same). */
static inline void swap_eth_ip4(uint8_t *d, uint8_t *ip)
{
    uint8_t t6[6];
    uint8_t t4[4];
    memcpy(t6, d, 6); memcpy(d, d + 6, 6); memcpy(d + 6, t6, 6);
    memcpy(t4, ip + 12, 4); memcpy(ip + 12, ip + 16, 4); memcpy(ip + 16, t4, 4);
}

/* Counters, once per rx burst. */
typedef struct rx_acc {
    uint64_t pkts, bytes, udp, tcp, arp, icmp, other, bad, lost, dup, reorder;
} rx_acc;

/* What the receive path does with a frame (a handler returns -1: dropped unseen). */
enum { ACT_FREE = 0, ACT_REPLY, ACT_REFLECT };

/* ------------------------------------------------------------ the units' entries */

void pkd_read_nic(worker *w, uint64_t now, int base);                      /* dpdk_engine.c */
void *pkd_zalloc(size_t size);
uint32_t pkd_rx_service(worker *w);                                         /* udp_rx.c */
void pkd_run_rx(worker *w);
void pkd_l4_csum_finish(const uint8_t *ip, uint8_t *l4, uint32_t len, uint8_t proto);
int pkd_gen_alloc(worker *w);                                               /* udp_gen.c */
void pkd_run_gen(worker *w);
void pkd_run_fwd(worker *w);                                                /* udp_fwd.c */
int pkd_handle_arp(worker *w, uint8_t *d, uint32_t len, rx_acc *a);        /* udp_neigh.c */
void pkd_gen_resolve(worker *w);
int pkd_handle_icmp(worker *w, struct rte_mbuf *m, uint8_t *ip, uint32_t ihl, uint32_t tot,
                    uint32_t l4room, rx_acc *a);                            /* udp_icmp.c */

/* ------------------------------------------------------------ accounting */

static inline void flush_cpu(worker *w, uint64_t now)
{
    const timebase *tb = &w->engine->tb;
    w->last_flush = now;
    if (w->cpu_frozen)
        return;
    pk_set(&w->c, PK_cpu_busy_ns, tb_cyc_ns(tb, w->busy));
    pk_set(&w->c, PK_cpu_wall_ns, tb_cyc_ns(tb, now - w->wall0));
}

/* May w burst on its port and out port? (a memif port: up; see pk_dpdk_port_burst_ok) */
static inline int ports_ready(worker *w)
{
    return w->ports_ok || (w->ports_ok = pk_dpdk_port_burst_ok(w->port) &&
                                         (!w->out || pk_dpdk_port_burst_ok(w->out)));
}

/* Have the generators that feed w (its peer, or one on its port) all stopped sending?
 * any: there are some. */
static inline int feeders_done(const worker *w, int *any)
{
    const pk_dpdk_engine *e = w->engine;
    int me = (int)(w - e->w);
    *any = 0;
    for (int j = 0; j < e->n; j++) {
        if (e->w[j].cfg.role != PK_DPDK_GEN || e->w[j].cfg.peer < 0 ||
            (e->w[j].cfg.peer != me && e->w[e->w[j].cfg.peer].port != w->port))
            continue;
        *any = 1;
        if (!__atomic_load_n(&e->w[j].done_sending, __ATOMIC_ACQUIRE))
            return 0;
    }
    return 1;
}

/* A worker's poll loop went round from t0 to t1: busy time when it moved frames; after
 * IDLE_YIELD rounds of nothing, a partner polling on this CPU runs, rather than the
 * worker spinning out its time slice. */
static inline void round_done(worker *w, uint32_t moved, uint64_t t0, uint64_t t1, uint32_t *idle)
{
    if (moved) {
        w->busy += t1 - t0;
        *idle = 0;
    } else if (++*idle >= IDLE_YIELD) {
        *idle = 0;
        sched_yield();
    }
}

static inline void housekeeping(worker *w, uint64_t now, uint64_t flush_c, uint64_t nic_c)
{
    if (now - w->last_flush < flush_c)
        return;
    flush_cpu(w, now);
    if (now - w->last_nic >= nic_c) {
        pkd_read_nic(w, now, 0);
        /* idle: a memif peer's leaving or coming is handled now (see "memif: the peer leaving") */
        pk_dpdk_port_poll_idle(w->port, w->cfg.queue, pk_read(&w->c, PK_pkts_rx) + pk_read(&w->c, PK_pkts_tx));
        w->ports_ok = 0;         /* the memif control may have run: look at the links again */
        if (w->guest)
            w->guest->ports_ok = 0;
    }
}

#pragma GCC visibility pop

#endif
