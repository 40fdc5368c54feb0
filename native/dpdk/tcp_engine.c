/* perfkit's TCP for load testing over DPDK: see tcp_engine.h. */
#define _GNU_SOURCE
#include "tcp_engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_prefetch.h>

#include "perfkit/counters.h"
#include "perfkit/hist.h"
#include "perfkit/ip6ext.h"

#define ETH_LEN 14
#define IP_LEN 20
#define IP6_LEN 40
#define TCP_LEN 20
#define FCS_LEN 4
#define TXQ 32768                   /* frames held while the peer's ring is full (a peer descheduled for 10 ms on a shared machine misses 30k frames at 1M connections/s); a power of 2 */
#define TIMER_BUDGET 1024           /* timer expiries handled per loop */
#define DRAIN_BATCH 256             /* CLIENT: idle keep-alive connections closed per loop at the end */
#define ARP_RETRY_NS 200000000ull
#define ARP_GIVE_UP_NS 3000000000ull   /* of asking with the link up */
#define LINK_GIVE_UP_NS 10000000000ull /* of asking in all, the link down part of it */
#define MAX_HDR_BYTES 8192          /* request/response headers longer than this are malformed */
#define NIC_EVERY_NS 100000000ull
#define RCV_WINDOW 65535
#define PREFAULT_MAX (256u << 20)   /* socket tables up to this size are taken at create */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define RX_ROUNDS 8                 /* receive bursts a loop pass at most, while they come full */
#define STASH 32                    /* mbufs taken from the pool at once for transmit */
#define MSS_DEFAULT(e) ((e)->cfg.ipv6 ? 1220u : 536u)   /* a peer's MSS without the option (RFC 9293, 8200) */

enum { TH_FIN = 0x01, TH_SYN = 0x02, TH_RST = 0x04, TH_PSH = 0x08, TH_ACK = 0x10 };
enum { S_CLOSED = 0, S_SYN_SENT, S_SYN_RCVD, S_ESTAB };
enum {                              /* tsock.flags */
    F_SENDING = 0x01,               /* a message is in flight: una < msg_len */
    F_WANT_FIN = 0x02,              /* FIN goes with (or right after) the message */
    F_FIN_SENT = 0x04,
    F_FIN_ACKED = 0x08,
    F_FIN_RCVD = 0x10,
    F_HAVE_CL = 0x20,               /* CLIENT: the response has a Content-Length */
    F_WAITING = 0x40,               /* CLIENT: request out, response not whole yet */
    F_CHUNKED = 0x80,               /* CLIENT: the response is chunked */
};
enum { TL_NONE = 0, TL_RTO = 1, TL_KA = 2, TL_N = 3 };
enum { P_VER = 0, P_CODE, P_LINE, P_LSTART, P_NAME, P_CLVAL, P_TENAME, P_TEVAL, P_LF_END, P_BODY,
       P_CSIZE, P_CEXT, P_CDATA, P_CCRLF, P_TRAILER, P_TLINE, P_TLF, P_DONE };
#define MAX_CHUNK_LINE 64           /* a chunk-size line longer than this is malformed */

/* One socket: one cache line. Its addresses and ports are its index in the table. */
typedef struct tsock {
    uint32_t tnext, tprev;          /* timer list links: index + 1, 0 = none */
    uint64_t deadline;              /* TSC */
    uint64_t t0;                    /* TSC: CLIENT request sent (response time), SYN sent (connect);
                                       SERVER SYN-ACK sent */
    uint32_t rcv_nxt;
    uint32_t snd_base;              /* sequence number of the message's first byte (or of our FIN) */
    uint32_t una, nxt;              /* message bytes acknowledged, sent */
    uint32_t body_left;             /* CLIENT: response body bytes still to come */
    uint32_t iss;
    uint16_t win;                   /* the peer's window (no scaling: we never offer it) */
    uint16_t mss;
    uint16_t reqs;                  /* CLIENT: requests sent on this connection */
    uint16_t hdr_bytes;             /* header bytes seen of the message being received */
    uint16_t status;                /* CLIENT: response status */
    uint8_t state, flags, tl, retries, parse, match;
} __attribute__((aligned(64))) tsock;

_Static_assert(sizeof(tsock) == 64, "a socket is one cache line");

struct pk_tcp_engine {
    pk_counter_block c;             /* first: cache-line aligned, this worker writes it */
    pk_hist hist;                   /* CLIENT: response times; SERVER: none */
    pk_tcp_cfg cfg;
    pk_dpdk_port *port;
    int port_ok;                    /* pk_dpdk_port_burst_ok said yes since the last poll_idle */
    uint16_t pid;
    uint8_t mac[6];
    struct rte_mempool *pool;

    tsock *socks;
    uint32_t nsock;
    size_t map_len;
    uint32_t nports_c;              /* CLIENT: lport_hi - lport_lo + 1 */
    uint32_t slots;                 /* client addresses */
    uint8_t *msg;                   /* the one request or response */
    uint64_t *psum;                 /* psum[k]: sum of msg's 16-bit words before byte 2k */
    uint32_t msg_len;
    uint32_t head[TL_N], tail[TL_N];
    uint64_t rto_c, ka_c, hz;

    uint8_t peer_mac[6];
    int peer_mac_ok;
    uint32_t l2;                    /* Ethernet header bytes: 14, or 18 with an 802.1Q tag */
    uint8_t ip6_tmpl[IP6_LEN];      /* IPv6 header template: this role's addresses, the client's last 4 bytes 0 */
    uint64_t ph6_sum;               /* its addresses summed (pseudo header): a segment adds the client's last 4 */
    struct rte_mbuf *tx[TXQ];
    uint32_t txlen[TXQ];
    uint32_t txh, ntx;              /* a circular queue: first frame, frames queued */
    uint64_t current;               /* sockets not CLOSED */
    uint64_t lat_min;
    uint32_t iss_seed;
    /* transmit mbufs: taken STASH at a time from this worker's pool cache, the next one's
     * lines prefetched while this one is written (a pool's mbufs can be cold: the cache
     * refills from the pool's ring, which hands them out in FIFO order) */
    struct rte_mempool_cache *mcache;
    struct rte_mbuf *stash[STASH];
    uint32_t nstash, stash_i;
    uint32_t data_at;               /* a pool mbuf's first data byte, from the mbuf's start */
    uint8_t ip4_tmpl[IP_LEN];       /* the IPv4 header's fixed part (no length, addresses, checksum) */
    uint64_t ip4_sum;               /* its sum */
    uint64_t div_l, div_p;          /* n / listen_num, n / nports_c as (M * n) >> 64 (0: divide by 1) */

    /* CLIENT */
    uint32_t cursor;
    uint64_t launched;
    int launching, draining;

    uint64_t nic_base[3], last_nic;
    pthread_t thread;
    int started, running, stop;
    int kernel;                  /* the port takes frames from a Linux stack (tcp_csum_ok) */
    char err[512];
};

static void set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
/* sequence comparisons modulo 2^32 */
static inline int seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

#include "perfkit/csum.h"   /* sum16, fold */

/* The sum of msg[a, b) from the prefix sums (a even), else directly. */
static inline uint64_t msg_sum(const pk_tcp_engine *e, uint32_t a, uint32_t b)
{
    if (a & 1)
        return sum16(e->msg + a, b - a, 0);
    uint64_t s = e->psum[b / 2] - e->psum[a / 2];
    if (b & 1) {
        uint16_t x = 0;
        memcpy(&x, e->msg + b - 1, 1);
        s += x;
    }
    return s;
}

static inline uint32_t tsc_rand(pk_tcp_engine *e, uint64_t tsc)
{
    /* xorshift on the TSC (the pass's, read once): initial sequence numbers differ between connections */
    uint32_t x = e->iss_seed ^ (uint32_t)tsc;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    e->iss_seed = x;
    return x;
}

/* ------------------------------------------------------------ addresses */

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

static int ip_slot(const pk_tcp_engine *e, uint32_t ip_host, uint32_t *slot)
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

typedef struct tuple4 {
    uint32_t cip;                   /* host order */
    uint16_t cport, sport;          /* the client's port, the server's */
} tuple4;

/* n / d for a 32-bit n from M = 2^64 / d + 1 (exact for every 32-bit n and d > 1; M = 0
 * stands for d = 1): a multiply instead of a division per segment. */
static inline uint64_t div_magic(uint32_t d) { return d > 1 ? UINT64_MAX / d + 1 : 0; }
static inline uint32_t fdiv(uint32_t n, uint64_t M)
{
    return M ? (uint32_t)(((unsigned __int128)M * n) >> 64) : n;
}

static void sock_tuple(const pk_tcp_engine *e, uint32_t idx, tuple4 *t)
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

/* ------------------------------------------------------------ counters */

static inline void cnt(pk_tcp_engine *e, enum pk_counter_id id) { pk_add(&e->c, id, 1); }

static void record_latency(pk_tcp_engine *e, uint64_t ns)
{
    pk_hist_add(&e->hist, ns);
    pk_add(&e->c, PK_lat_count, 1);
    pk_add(&e->c, PK_lat_sum_ns, ns);
    if (e->lat_min == 0 || ns < e->lat_min) {
        e->lat_min = ns ? ns : 1;
        pk_set(&e->c, PK_lat_min_ns, e->lat_min);
    }
    if (ns > pk_read(&e->c, PK_lat_max_ns))
        pk_set(&e->c, PK_lat_max_ns, ns);
}

/* First-packet RTT from the TSC: a handshake answered on its first transmission. */
static inline void record_rtt(pk_tcp_engine *e, uint64_t tsc)
{
    uint64_t ns = (uint64_t)((double)tsc * 1e9 / (double)e->hz);
    pk_add(&e->c, PK_rtt_count, 1);
    pk_add(&e->c, PK_rtt_sum_ns, ns);
    if (ns > pk_read(&e->c, PK_rtt_max_ns))
        pk_set(&e->c, PK_rtt_max_ns, ns);
}

/* ------------------------------------------------------------ transmit */

/* Hand the queue to the port. What it does not take stays queued for the next
 * loop (a ring or memif peer that is a moment late); with drop, it is freed and
 * counted (the end of a run, or a queue still full). */
/* Is the port ready for a burst? (a memif port: up; see pk_dpdk_port_burst_ok) */
static inline int port_ready(pk_tcp_engine *e)
{
    return e->port_ok || (e->port_ok = pk_dpdk_port_burst_ok(e->port));
}

static void tx_flush_mode(pk_tcp_engine *e, int drop)
{
    uint64_t bytes = 0;
    uint32_t done = 0;
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

static void tx_flush(pk_tcp_engine *e) { tx_flush_mode(e, 0); }

/* The end of a run: what is queued goes out, unless the link is down (a memif peer that
 * has left: nothing takes it); what stays is freed and counted. (A memif peer leaving while we
 * poll is handled by the port layer: its departure waits until we do not poll.) */
static void end_flush(pk_tcp_engine *e)
{
    struct rte_eth_link link;
    for (int k = 0; k < 100 && e->ntx; k++) {
        memset(&link, 0, sizeof(link));
        if (rte_eth_link_get_nowait(e->pid, &link) != 0 || !link.link_status)
            break;
        tx_flush(e);
    }
    if (e->ntx) {
        for (uint32_t i = 0; i < e->ntx; i++)
            rte_pktmbuf_free(e->tx[(e->txh + i) & (TXQ - 1)]);
        pk_add(&e->c, PK_drop_tx, e->ntx);
        e->ntx = 0;
    }
}

/* Queue a frame; 0 when the queue stays full and it is dropped (counted). */
static inline int tx_put(pk_tcp_engine *e, struct rte_mbuf *m)
{
    if (e->ntx == TXQ)
        tx_flush(e);
    if (e->ntx == TXQ) {        /* the port takes nothing: this frame is lost */
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return 0;
    }
    uint32_t at = (e->txh + e->ntx++) & (TXQ - 1);
    e->txlen[at] = rte_pktmbuf_pkt_len(m);
    e->tx[at] = m;
    return 1;
}

static const uint8_t *dst_mac(const pk_tcp_engine *e)
{
    static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    if (e->cfg.role == PK_TCP_CLIENT)
        return e->cfg.gateway_mac;
    return e->peer_mac_ok ? e->peer_mac : bcast;
}

/* The Ethernet header (with the 802.1Q tag when a VLAN is set); returns its length. */
static inline uint32_t put_l2(const pk_tcp_engine *e, uint8_t *d, const uint8_t *dst, uint16_t type)
{
    memcpy(d, dst, 6);
    memcpy(d + 6, e->mac, 6);
    if (e->cfg.vlan) {
        wr16(d + 12, 0x8100);
        wr16(d + 14, e->cfg.vlan);
        wr16(d + 16, type);
        return 18;
    }
    wr16(d + 12, type);
    return ETH_LEN;
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
    if (len) {
        memcpy(th + TCP_LEN + opt, e->msg + off, len);
        s += msg_sum(e, off, off + len);
    }
    uint16_t ck = (uint16_t)~fold(s);
    memcpy(th + 16, &ck, 2);
}

/* Queue a built segment; count its flags when the queue took it. */
static void tx_seg_put(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t flags)
{
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
static void mbuf_unstash(pk_tcp_engine *e)
{
    if (e->stash_i < e->nstash)
        rte_mempool_generic_put(e->pool, (void **)(e->stash + e->stash_i), e->nstash - e->stash_i, e->mcache);
    e->stash_i = e->nstash = 0;
}

/* An IPv6 segment: from la to ra (16 bytes each), or with la NULL between this role's
 * addresses from the template, the client's last 4 bytes being client_low (host order). */
static void tx_seg6(pk_tcp_engine *e, const uint8_t *la, const uint8_t *ra, uint32_t client_low, uint16_t lport,
                    uint16_t rport, uint32_t seq, uint32_t ack, uint8_t flags, uint32_t off, uint32_t len)
{
    struct rte_mbuf *m = mbuf_get(e);
    if (!m) {
        cnt(e, PK_drop_tx);
        return;
    }
    uint32_t opt = (flags & TH_SYN) ? 4 : 0;
    uint32_t tcplen = TCP_LEN + opt + len;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(e->l2 + IP6_LEN + tcplen));
    if (!d) {
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return;
    }
    uint8_t *ip = d + put_l2(e, d, dst_mac(e), 0x86DD);
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
    tx_seg_put(e, m, flags);
}

/* One TCP segment from the template: Ethernet, IPv4 (TOS, DF), TCP with the
 * MSS option on SYNs; payload msg[off, off + len). lip, rip: host order; over IPv6
 * the client's address is the one of them this role's client is (see tx_seg6). */
static void tx_seg(pk_tcp_engine *e, uint32_t lip, uint32_t rip, uint16_t lport, uint16_t rport,
                   uint32_t seq, uint32_t ack, uint8_t flags, uint32_t off, uint32_t len)
{
    if (e->cfg.ipv6) {
        tx_seg6(e, NULL, NULL, e->cfg.role == PK_TCP_SERVER ? rip : lip, lport, rport, seq, ack, flags, off, len);
        return;
    }
    struct rte_mbuf *m = mbuf_get(e);
    if (!m) {
        cnt(e, PK_drop_tx);
        return;
    }
    uint32_t opt = (flags & TH_SYN) ? 4 : 0;
    uint32_t tcplen = TCP_LEN + opt + len;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(e->l2 + IP_LEN + tcplen));
    if (!d) {
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return;
    }
    uint8_t *ip = d + put_l2(e, d, dst_mac(e), 0x0800);
    /* the template's fixed fields (TOS, DF, TTL 64, TCP), then length and addresses,
     * summed from registers as put_tcp does */
    uint32_t la = rte_cpu_to_be_32(lip), ra = rte_cpu_to_be_32(rip);
    uint16_t tot = rte_cpu_to_be_16((uint16_t)(IP_LEN + tcplen));
    memcpy(ip, e->ip4_tmpl, IP_LEN);
    memcpy(ip + 2, &tot, 2);
    memcpy(ip + 12, &la, 4);
    memcpy(ip + 16, &ra, 4);
    uint64_t as = (la & 0xffff) + (la >> 16) + (ra & 0xffff) + (ra >> 16);
    uint16_t ipck = (uint16_t)~fold(e->ip4_sum + tot + as);
    memcpy(ip + 10, &ipck, 2);
    put_tcp(e, ip + IP_LEN, as, lport, rport, seq, ack, flags, opt, off, len);
    tx_seg_put(e, m, flags);
}

/* A segment of socket idx. */
static void sock_tx(pk_tcp_engine *e, uint32_t idx, uint32_t seq, uint8_t flags, uint32_t off, uint32_t len)
{
    tsock *s = &e->socks[idx];
    tuple4 t;
    sock_tuple(e, idx, &t);
    uint32_t ack = (flags & TH_ACK) ? s->rcv_nxt : 0;
    if (e->cfg.role == PK_TCP_SERVER)
        tx_seg(e, rte_be_to_cpu_32(e->cfg.ip), t.cip, t.sport, t.cport, seq, ack, flags, off, len);
    else
        tx_seg(e, t.cip, rte_be_to_cpu_32(e->cfg.server_ip), t.cport, t.sport, seq, ack, flags, off, len);
}

/* ------------------------------------------------------------ timers */

static void timer_del(pk_tcp_engine *e, uint32_t idx)
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
static void timer_add(pk_tcp_engine *e, uint32_t idx, int l, uint64_t now)
{
    timer_del(e, idx);
    tsock *s = &e->socks[idx];
    s->deadline = now + (l == TL_RTO ? e->rto_c : e->ka_c);
    s->tl = (uint8_t)l;
    s->tprev = e->tail[l];
    s->tnext = 0;
    if (e->tail[l])
        e->socks[e->tail[l] - 1].tnext = idx + 1;
    else
        e->head[l] = idx + 1;
    e->tail[l] = idx + 1;
}

/* ------------------------------------------------------------ socket life */

/* The sequence number after everything sent: the seq of a pure ACK or RST. */
static inline uint32_t snd_next(const tsock *s)
{
    return s->snd_base + ((s->flags & F_SENDING) ? s->nxt : 0) + ((s->flags & F_FIN_SENT) ? 1 : 0);
}

static void sock_free(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id how)
{
    timer_del(e, idx);
    memset(&e->socks[idx], 0, sizeof(tsock));
    cnt(e, how);                    /* PK_sock_close or PK_sock_error */
    e->current--;
    pk_set(&e->c, PK_sock_current, e->current);
}

static void sock_abort(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id why)
{
    tsock *s = &e->socks[idx];
    sock_tx(e, idx, snd_next(s), TH_RST | TH_ACK, 0, 0);
    cnt(e, why);
    sock_free(e, idx, PK_sock_error);
}

static int needs_rto(const tsock *s)
{
    return s->state == S_SYN_SENT || s->state == S_SYN_RCVD || (s->flags & F_SENDING) ||
           ((s->flags & F_FIN_SENT) && !(s->flags & F_FIN_ACKED));
}

/* Send what the window allows of the message from nxt; FIN on its last byte
 * when wanted. Returns segments sent. */
static int send_data(pk_tcp_engine *e, uint32_t idx, int at_least_one)
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
        sock_tx(e, idx, s->snd_base + s->nxt, fl, s->nxt, len);
        s->nxt += len;
        n++;
    }
    return n;
}

static void send_fin(pk_tcp_engine *e, uint32_t idx)
{
    tsock *s = &e->socks[idx];
    s->flags |= F_FIN_SENT;
    sock_tx(e, idx, s->snd_base, TH_FIN | TH_ACK, 0, 0);
}

static void start_message(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->flags |= F_SENDING;
    s->una = s->nxt = 0;
    s->retries = 0;
    send_data(e, idx, 1);
    timer_add(e, idx, TL_RTO, now);
}

/* ------------------------------------------------------------ HTTP */

/* SERVER: request bytes; 1 when the header section is whole (a blank line). */
static int server_scan(pk_tcp_engine *e, tsock *s, const uint8_t *p, uint32_t n)
{
    if (s->hdr_bytes == 0 && n >= 4) {
        if (memcmp(p, "GET ", 4) == 0)
            cnt(e, PK_http_get);
        else if (memcmp(p, "POST", 4) == 0)
            cnt(e, PK_http_post);
        /* the usual case: the whole header section in this segment, its end found at once
         * (the first "\r\n\r\n", as the loop below finds it, within MAX_HDR_BYTES + 1 bytes) */
        const uint8_t *q = s->match ? NULL : memmem(p, n, "\r\n\r\n", 4);
        if (q && (uint32_t)(q - p) + 4 <= MAX_HDR_BYTES + 1) {
            s->hdr_bytes = (uint16_t)(q - p + 4);
            s->match = 4;
            return 1;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (s->hdr_bytes < 0xffff)
            s->hdr_bytes++;
        /* "\r\n\r\n": match counts the characters seen of it */
        if (c == '\r')
            s->match = (s->match == 2) ? 3 : 1;
        else if (c == '\n' && (s->match == 1 || s->match == 3))
            s->match++;
        else
            s->match = 0;
        if (s->match == 4)
            return 1;
        if (s->hdr_bytes > MAX_HDR_BYTES)
            return -1;
    }
    return 0;
}

static const char CL_NAME[] = "content-length:";
static const char TE_NAME[] = "transfer-encoding:";
static const char CHUNKED[] = "chunked";

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* CLIENT: response bytes, in any split. Content-Length and chunked bodies (a body
 * read until close is not built). Returns 1 when the response is whole, 0 for more,
 * -1 malformed. Bytes after a whole response are an error (no pipelining). */
static int client_parse(tsock *s, const uint8_t *p, uint32_t n)
{
    uint32_t i = 0;
    while (i < n) {
        if (s->parse == P_BODY || s->parse == P_CDATA) {
            uint32_t k = n - i < s->body_left ? n - i : s->body_left;
            s->body_left -= k;
            i += k;
            if (s->body_left == 0) {
                s->parse = s->parse == P_BODY ? P_DONE : P_CCRLF;
                s->match = 0;
            }
            continue;
        }
        if (s->parse == P_DONE)
            return -1;
        if (s->parse == P_LINE) {   /* the rest of a line we do not read: to its LF at once */
            const uint8_t *nl = memchr(p + i, '\n', n - i);
            uint32_t k = nl ? (uint32_t)(nl - (p + i)) + 1 : n - i;
            if (s->hdr_bytes + k <= MAX_HDR_BYTES) {   /* else byte by byte, to fail where the limit is */
                s->hdr_bytes = (uint16_t)(s->hdr_bytes + k);
                i += k;
                if (nl)
                    s->parse = P_LSTART;
                continue;
            }
        }
        uint8_t c = p[i++];
        if (s->parse < P_BODY && ++s->hdr_bytes > MAX_HDR_BYTES)
            return -1;
        uint8_t lc = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
        switch (s->parse) {
        case P_VER:                 /* "HTTP/1.x " */
            if (s->match < 7 ? c != (uint8_t)"HTTP/1."[s->match]
                             : s->match == 7 ? (c != '0' && c != '1') : c != ' ')
                return -1;
            if (++s->match == 9) {
                s->parse = P_CODE;
                s->match = 0;
                s->status = 0;
            }
            break;
        case P_CODE:
            if (c < '0' || c > '9')
                return -1;
            s->status = (uint16_t)(s->status * 10 + (c - '0'));
            if (++s->match == 3) {
                if (s->status < 100)
                    return -1;
                s->parse = P_LINE;
            }
            break;
        case P_LINE:                /* the rest of a line we do not read */
            if (c == '\n')
                s->parse = P_LSTART;
            break;
        case P_LSTART:
            if (c == '\r') {
                s->parse = P_LF_END;
                break;
            }
            if (c == '\n')
                goto headers_done;
            s->match = 0;
            s->parse = (c == 't' || c == 'T') ? P_TENAME : P_NAME;
            if (s->parse == P_TENAME)
                goto te_name;
            /* fall through */
        case P_NAME:
            if (lc == (uint8_t)CL_NAME[s->match]) {
                if (++s->match == sizeof(CL_NAME) - 1) {
                    if (s->flags & F_HAVE_CL)
                        return -1;  /* two Content-Lengths */
                    s->flags |= F_HAVE_CL;
                    s->body_left = 0;
                    s->match = 0;
                    s->parse = P_CLVAL;
                }
            } else {
                s->parse = (c == '\n') ? P_LSTART : P_LINE;
            }
            break;
        case P_TENAME:
        te_name:
            if (lc == (uint8_t)TE_NAME[s->match]) {
                if (++s->match == sizeof(TE_NAME) - 1) {
                    s->match = 0;
                    s->parse = P_TEVAL;
                }
            } else {
                s->parse = (c == '\n') ? P_LSTART : P_LINE;
            }
            break;
        case P_TEVAL:               /* only "chunked" is understood */
            if ((c == ' ' || c == '\t') && (s->match == 0 || s->match == sizeof(CHUNKED) - 1))
                break;
            if (c == '\r' && s->match == sizeof(CHUNKED) - 1)
                break;
            if (c == '\n') {
                if (s->match != sizeof(CHUNKED) - 1 || (s->flags & F_CHUNKED))
                    return -1;
                s->flags |= F_CHUNKED;
                s->parse = P_LSTART;
                break;
            }
            if (s->match >= sizeof(CHUNKED) - 1 || lc != (uint8_t)CHUNKED[s->match])
                return -1;
            s->match++;
            break;
        case P_CLVAL:
            if (c == ' ' || c == '\t' || c == '\r')
                break;
            if (c == '\n') {
                if (!s->match)
                    return -1;      /* no digits */
                s->parse = P_LSTART;
                break;
            }
            if (c < '0' || c > '9' || s->body_left > (1u << 30))
                return -1;
            s->body_left = s->body_left * 10 + (uint32_t)(c - '0');
            s->match = 1;
            break;
        case P_LF_END:
            if (c != '\n')
                return -1;
        headers_done:
            if (s->flags & F_CHUNKED) {
                if (s->flags & F_HAVE_CL)
                    return -1;      /* both: ambiguous framing, refused */
                s->parse = P_CSIZE;
                s->match = 0;
                s->body_left = 0;
                break;
            }
            if (!(s->flags & F_HAVE_CL))
                return -1;          /* read-until-close: not built */
            s->parse = s->body_left ? P_BODY : P_DONE;
            break;
        case P_CSIZE:               /* hex size; match: characters of the line so far */
            if (++s->match > MAX_CHUNK_LINE)
                return -1;
            if (hexval(c) >= 0) {
                if (s->body_left >= (1u << 27))
                    return -1;
                s->body_left = s->body_left * 16 + (uint32_t)hexval(c);
                s->flags |= F_HAVE_CL;   /* here: at least one digit */
            } else if (c == ';' || c == ' ' || c == '\t') {
                s->parse = P_CEXT;
            } else if (c == '\r') {
                ;
            } else if (c == '\n') {
                goto chunk_line_done;
            } else {
                return -1;
            }
            break;
        case P_CEXT:
            if (++s->match > MAX_CHUNK_LINE)
                return -1;
            if (c == '\n')
                goto chunk_line_done;
            break;
        chunk_line_done:
            if (!(s->flags & F_HAVE_CL))
                return -1;          /* no digits */
            s->flags &= (uint8_t)~F_HAVE_CL;
            s->match = 0;
            s->parse = s->body_left ? P_CDATA : P_TRAILER;
            break;
        case P_CCRLF:               /* the CRLF after chunk data */
            if (c == '\r' && s->match == 0) {
                s->match = 1;
                break;
            }
            if (c != '\n')
                return -1;
            s->match = 0;
            s->parse = P_CSIZE;
            break;
        case P_TRAILER:             /* trailer lines, then an empty line */
            if (c == '\r') {
                s->parse = P_TLF;
                break;
            }
            if (c == '\n') {
                s->parse = P_DONE;
                break;
            }
            s->match = 1;
            s->parse = P_TLINE;
            break;
        case P_TLINE:
            if (++s->match > 250)  /* match is 8 bits: trailer lines up to 250 */
                return -1;
            if (c == '\n')
                s->parse = P_TRAILER;
            break;
        case P_TLF:
            if (c != '\n')
                return -1;
            s->parse = P_DONE;
            break;
        default:
            return -1;
        }
    }
    return s->parse == P_DONE ? 1 : 0;
}

static void client_reset_parser(tsock *s)
{
    s->parse = P_VER;
    s->match = 0;
    s->hdr_bytes = 0;
    s->status = 0;
    s->body_left = 0;
    s->flags &= (uint8_t)~(F_HAVE_CL | F_CHUNKED);
}

static void client_request(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    client_reset_parser(s);
    s->flags |= F_WAITING;
    s->reqs++;
    s->t0 = now;
    cnt(e, PK_http_req);
    cnt(e, e->cfg.msg_len >= 4 && memcmp(e->msg, "POST", 4) == 0 ? PK_http_post : PK_http_get);
    start_message(e, idx, now);
}

static void client_close(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    timer_del(e, idx);
    if (e->cfg.fast_close) {
        sock_tx(e, idx, snd_next(s), TH_RST | TH_ACK, 0, 0);
        sock_free(e, idx, PK_sock_close);
        return;
    }
    send_fin(e, idx);
    timer_add(e, idx, TL_RTO, now);
}

/* CLIENT: a whole response. */
static void client_response(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    s->flags &= (uint8_t)~F_WAITING;
    cnt(e, PK_http_resp);
    uint16_t st = s->status;
    if (st >= 200 && st < 300)
        cnt(e, PK_http_2xx);
    else if (st >= 300 && st < 400)
        cnt(e, PK_http_3xx);
    else if (st >= 400 && st < 500)
        cnt(e, PK_http_4xx);
    else if (st >= 500)
        cnt(e, PK_http_5xx);
    if (st >= 400)
        cnt(e, PK_http_err);
    record_latency(e, (uint64_t)((double)(now - s->t0) * 1e9 / (double)e->hz));
    int more = e->cfg.ka_interval_ns && e->launching && !(s->flags & F_FIN_RCVD) &&
               (e->cfg.ka_requests == 0 || s->reqs < e->cfg.ka_requests);
    if (more) {
        timer_add(e, idx, TL_KA, now);
        return;
    }
    client_close(e, idx, now);
}

/* ------------------------------------------------------------ receive */

typedef struct seg {
    uint32_t sip, dip;              /* host order */
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint16_t win;
    uint16_t mss;                   /* the MSS option, 0 = none */
    const uint8_t *data;
    uint32_t len;
    const uint8_t *smac;
    const uint8_t *sa, *da;         /* the addresses in the packet (IPv6: sip, dip are their last 4 bytes) */
} seg;

/* A segment answering g, from its destination to its source. */
static void tx_reply(pk_tcp_engine *e, const seg *g, uint32_t seq, uint32_t ack, uint8_t flags)
{
    if (e->cfg.ipv6)
        tx_seg6(e, g->da, g->sa, 0, g->dport, g->sport, seq, ack, flags, 0, 0);
    else
        tx_seg(e, g->dip, g->sip, g->dport, g->sport, seq, ack, flags, 0, 0);
}

/* A segment for no socket: RST (tcp_rst), or an ACK for a FIN (no TIME_WAIT: the
 * peer's FIN retransmitted after we closed). */
static void reply_nosock(pk_tcp_engine *e, const seg *g)
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

static void open_server(pk_tcp_engine *e, uint32_t idx, const seg *g, uint64_t now)
{
    tsock *s = &e->socks[idx];
    memset(s, 0, sizeof(*s));
    s->state = S_SYN_RCVD;
    s->iss = tsc_rand(e, now);
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
    sock_tx(e, idx, s->iss, TH_SYN | TH_ACK, 0, 0);
    timer_add(e, idx, TL_RTO, now);
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

/* IPv6: the server's address is the one expected and the client's has the clients'
 * first 12 bytes (its last 4 then go through ip_slot as an IPv4 address does). */
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
    if (!ours || li >= e->cfg.listen_num || ip_slot(e, cip, &slot) != 0 ||
        (!server && (uint32_t)(uint16_t)(cport - e->cfg.lport_lo) >= e->nports_c)) {
        cnt(e, PK_tcp_drop);
        reply_nosock(e, g);
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
                sock_free(e, idx, PK_sock_error);
            } else {
                cnt(e, PK_tcp_drop);
            }
        } else if (g->seq == s->rcv_nxt) {
            int clean = !server && !(s->flags & (F_WAITING | F_SENDING));
            if (!clean)
                cnt(e, PK_err_reset);
            sock_free(e, idx, clean ? PK_sock_close : PK_sock_error);
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
                    reply_nosock(e, g);
                return;
            }
            if (s->state == S_CLOSED) {
                open_server(e, idx, g, now);
            } else if (g->seq + 1 == s->rcv_nxt) {
                if (s->state == S_SYN_RCVD)   /* our SYN-ACK was lost */
                    sock_tx(e, idx, s->iss, TH_SYN | TH_ACK, 0, 0);
                else
                    sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
            } else {
                /* a new connection on a busy tuple: the peer has forgotten the old one */
                sock_free(e, idx, PK_sock_error);
                open_server(e, idx, g, now);
            }
            return;
        }
        /* CLIENT: SYN-ACK */
        if (!(g->flags & TH_ACK) || s->state == S_CLOSED) {
            cnt(e, PK_tcp_drop);
            if (s->state == S_CLOSED)
                reply_nosock(e, g);
            return;
        }
        if (s->state == S_SYN_SENT) {
            if (g->ack != s->iss + 1) {
                cnt(e, PK_tcp_drop);
                return;
            }
            if (s->retries == 0)
                record_rtt(e, now - s->t0);
            s->state = S_ESTAB;
            s->rcv_nxt = g->seq + 1;
            s->win = g->win;
            s->snd_base = s->iss + 1;
            s->mss = g->mss && g->mss < e->cfg.mss ? g->mss : (g->mss ? e->cfg.mss : MSS_DEFAULT(e) < e->cfg.mss ? MSS_DEFAULT(e) : e->cfg.mss);
            client_request(e, idx, now);   /* the request carries the handshake's ACK */
        } else if (g->seq + 1 == s->rcv_nxt) {
            sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
        } else {
            cnt(e, PK_tcp_drop);
        }
        return;
    }

    if (s->state == S_CLOSED || !(g->flags & TH_ACK) || s->state == S_SYN_SENT) {
        cnt(e, PK_tcp_drop);
        if (s->state == S_CLOSED)
            reply_nosock(e, g);
        return;
    }
    if (s->state == S_SYN_RCVD) {
        if (g->ack != s->iss + 1) {
            cnt(e, PK_tcp_drop);
            return;
        }
        if (s->retries == 0)
            record_rtt(e, now - s->t0);
        s->state = S_ESTAB;
        s->retries = 0;
        timer_del(e, idx);
    }
    s->win = g->win;
    if (take_ack(e, s, g->ack) != 0) {
        cnt(e, PK_tcp_drop);
        sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
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
            need_ack = 1;
            if (g->len && server) {
                int r = server_scan(e, s, g->data, g->len);
                if (r < 0) {
                    cnt(e, PK_http_err);
                    sock_abort(e, idx, PK_err_read);
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
                        start_message(e, idx, now);
                        sent = 1;
                    }
                }
            } else if (g->len) {
                if (!(s->flags & F_WAITING)) {
                    sock_abort(e, idx, PK_err_read);   /* bytes nobody asked for */
                    return;
                }
                int r = client_parse(s, g->data, g->len);
                if (r < 0) {
                    cnt(e, PK_http_err);
                    sock_abort(e, idx, PK_err_read);
                    return;
                }
                if (g->flags & TH_FIN) {
                    s->rcv_nxt++;
                    s->flags |= F_FIN_RCVD;
                }
                if (r == 1) {
                    client_response(e, idx, now);
                    if (e->socks[idx].state == S_CLOSED)
                        return;    /* fast close */
                    sent = (s->flags & F_FIN_SENT) != 0;
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
            sock_abort(e, idx, PK_err_read);
            return;
        }
        if (!(s->flags & F_FIN_SENT)) {
            if (s->flags & F_SENDING) {
                s->flags |= F_WANT_FIN;   /* after the message */
            } else if (!server && s->tl == TL_KA) {
                client_close(e, idx, now);
                sent = 1;
            } else if (server || !(s->flags & F_WAITING)) {
                timer_del(e, idx);
                send_fin(e, idx);
                timer_add(e, idx, TL_RTO, now);
                sent = 1;
            }
        }
        if ((s->flags & F_FIN_SENT) && (s->flags & F_FIN_ACKED)) {
            if (need_ack && !sent)
                sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
            sock_free(e, idx, PK_sock_close);
            return;
        }
    }
    /* more of the message as the window opens */
    if (s->flags & F_SENDING) {
        if (send_data(e, idx, 0))
            sent = 1;
    }
    if (need_ack && !sent)
        sock_tx(e, idx, snd_next(s), TH_ACK, 0, 0);
    if (needs_rto(s)) {
        if (s->tl != TL_RTO || s->retries == 0)
            timer_add(e, idx, TL_RTO, now);
    } else if (s->tl == TL_RTO) {
        timer_del(e, idx);
    }
}

/* ------------------------------------------------------------ ARP, ICMP */

static int my_addr(const pk_tcp_engine *e, uint32_t ip_net)
{
    if (e->cfg.ipv6)
        return 0;                   /* an IPv6 engine has no IPv4 address */
    if (ip_net == e->cfg.ip)
        return 1;
    uint32_t slot;
    return e->cfg.role == PK_TCP_CLIENT && ip_slot(e, rte_be_to_cpu_32(ip_net), &slot) == 0;
}

static int handle_arp(pk_tcp_engine *e, uint8_t *d, uint32_t len, uint32_t l2)
{
    if (len < l2 + 28) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t *arp = d + l2;
    if (rd16(arp) != 1 || rd16(arp + 2) != 0x0800 || arp[4] != 6 || arp[5] != 4) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    cnt(e, PK_arp_rx);
    uint16_t op = rd16(arp + 6);
    uint32_t spa, tpa;
    memcpy(&spa, arp + 14, 4);
    memcpy(&tpa, arp + 24, 4);
    if (e->cfg.role == PK_TCP_CLIENT && !e->cfg.gateway_mac_set && spa == e->cfg.gateway_ip && op == 2) {
        memcpy(e->cfg.gateway_mac, arp + 8, 6);
        e->cfg.gateway_mac_set = 1;
    }
    if (e->cfg.role == PK_TCP_SERVER && !e->peer_mac_ok) {
        memcpy(e->peer_mac, arp + 8, 6);
        e->peer_mac_ok = 1;
    }
    if (op != 1 || !my_addr(e, tpa))
        return 0;
    wr16(arp + 6, 2);
    memcpy(arp + 18, arp + 8, 6);
    memcpy(arp + 24, &spa, 4);
    memcpy(arp + 8, e->mac, 6);
    memcpy(arp + 14, &tpa, 4);
    memcpy(d, arp + 18, 6);
    memcpy(d + 6, e->mac, 6);
    return 1;
}

static void send_arp_request(pk_tcp_engine *e)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
    if (!m)
        return;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, 60);
    if (!d) {
        rte_pktmbuf_free(m);
        return;
    }
    static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    memset(d, 0, 60);
    uint8_t *a = d + put_l2(e, d, bcast, 0x0806);
    wr16(a, 1);
    wr16(a + 2, 0x0800);
    a[4] = 6;
    a[5] = 4;
    wr16(a + 6, 1);
    memcpy(a + 8, e->mac, 6);
    memcpy(a + 14, &e->cfg.ip, 4);
    memcpy(a + 24, &e->cfg.gateway_ip, 4);
    tx_put(e, m);
}


/* ------------------------------------------------------------ IPv6: ND, ICMPv6, TCP */

static void tcp_in(pk_tcp_engine *e, seg *gp, const uint8_t *d, const uint8_t *l4, uint32_t doff,
                   uint32_t l4len, uint64_t now);

static int my_addr6(const pk_tcp_engine *e, const uint8_t *a)
{
    if (memcmp(a, e->cfg.ip6, 16) == 0)
        return 1;
    uint32_t slot;
    return e->cfg.role == PK_TCP_CLIENT && memcmp(a, e->cfg.client6_hi, 12) == 0 &&
           ip_slot(e, rd32(a + 12), &slot) == 0;
}

/* The IPv6 pseudo header's upper-layer length and next header, summed (RFC 8200 8.1). */
static inline uint64_t ph6_tail(uint32_t len, uint8_t nh)
{
    uint8_t b[8] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, 0, 0, 0, nh };
    return sum16(b, 8, 0);
}

/* A TCP segment's checksum over the pseudo header's sum `pseudo` and len bytes from l4.
 * A Linux sender on a veth leaves the checksum to an offload (CHECKSUM_PARTIAL): the field
 * holds only the pseudo header's folded sum, and af_packet, af_xdp and tap hand the frame
 * over so. On such a port (the frame crossed no wire) that field passes; any other wrong
 * sum is bad. */
static inline int tcp_csum_ok(const pk_tcp_engine *e, const uint8_t *l4, uint32_t len, uint64_t pseudo)
{
    if (fold(sum16(l4, len, pseudo)) == 0xffff)
        return 1;
    uint16_t field;
    memcpy(&field, l4 + 16, 2);
    return e->kernel && field == fold(pseudo);
}

/* An ICMPv6 message (its checksum filled in here) from src to dst with hop limit 255,
 * as Neighbor Discovery requires. */
static void tx_icmp6(pk_tcp_engine *e, const uint8_t *dmac, const uint8_t *src, const uint8_t *dst,
                     const uint8_t *body, uint32_t blen)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(e->pool);
    if (!m) {
        cnt(e, PK_drop_tx);
        return;
    }
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(e->l2 + IP6_LEN + blen));
    if (!d) {
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return;
    }
    uint8_t *ip = d + put_l2(e, d, dmac, 0x86DD);
    memset(ip, 0, 4);
    ip[0] = 0x60;
    wr16(ip + 4, (uint16_t)blen);
    ip[6] = 58;
    ip[7] = 255;
    memcpy(ip + 8, src, 16);
    memcpy(ip + 24, dst, 16);
    uint8_t *ic = ip + IP6_LEN;
    memcpy(ic, body, blen);
    ic[2] = ic[3] = 0;
    uint16_t ck = (uint16_t)~fold(sum16(ic, blen, sum16(ip + 8, 32, ph6_tail(blen, 58))));
    memcpy(ic + 2, &ck, 2);
    tx_put(e, m);
}

/* CLIENT: a Neighbor Solicitation for the gateway, to its solicited-node group. */
static void send_ns(pk_tcp_engine *e)
{
    const uint8_t *t = e->cfg.gateway_ip6;
    uint8_t dst[16] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, t[13], t[14], t[15] };
    uint8_t mac[6] = { 0x33, 0x33, 0xff, t[13], t[14], t[15] };
    uint8_t b[32] = { 135, 0 };
    memcpy(b + 8, t, 16);
    b[24] = 1;                      /* source link-layer address */
    b[25] = 1;
    memcpy(b + 26, e->mac, 6);
    tx_icmp6(e, mac, e->cfg.ip6, dst, b, 32);
}

/* ICMPv6 (the plen bytes at ic, after any extension headers): echo requests to our
 * addresses are answered in place (returns 1; the reply carries no extension headers);
 * Neighbor Solicitations for them get an Advertisement; the gateway's Advertisement gives
 * the client its MAC. Every message is checked: checksum, lengths, ND's hop limit 255,
 * options inside the message (RFC 4861 7.1). */
static int handle_icmp6(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t *d, uint32_t l2, uint8_t *ip, uint8_t *ic,
                        uint32_t plen)
{
    if (plen < 8 || fold(sum16(ic, plen, sum16(ip + 8, 32, ph6_tail(plen, 58)))) != 0xffff) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    cnt(e, PK_icmp_rx);
    uint8_t type = ic[0];
    if (type == 128) {              /* echo request */
        if (ic[1] != 0 || !my_addr6(e, ip + 24))
            return 0;
        if (ic != ip + IP6_LEN) {   /* drop the extension headers: the message moves up */
            memmove(ip + IP6_LEN, ic, plen);
            ic = ip + IP6_LEN;
            wr16(ip + 4, (uint16_t)plen);
            ip[6] = 58;
        }
        uint8_t t[16];
        memcpy(d, d + 6, 6);
        memcpy(d + 6, e->mac, 6);
        memcpy(t, ip + 8, 16);
        memcpy(ip + 8, ip + 24, 16);
        memcpy(ip + 24, t, 16);
        ip[7] = 64;
        ic[0] = 129;
        ic[2] = ic[3] = 0;
        uint16_t c = (uint16_t)~fold(sum16(ic, plen, sum16(ip + 8, 32, ph6_tail(plen, 58))));
        memcpy(ic + 2, &c, 2);
        m->data_len = (uint16_t)(l2 + IP6_LEN + plen);
        m->pkt_len = l2 + IP6_LEN + plen;
        return 1;
    }
    if (type != 135 && type != 136)
        return 0;
    if (ip[7] != 255 || ic[1] != 0 || plen < 24 || ic[8] == 0xff) {   /* hop limit, code, a unicast target */
        cnt(e, PK_bad_rx);
        return 0;
    }
    const uint8_t *target = ic + 8, *lla = NULL;
    for (uint32_t o = 24; o < plen;) {
        if (plen - o < 8 || ic[o + 1] == 0 || (uint32_t)ic[o + 1] * 8 > plen - o) {
            cnt(e, PK_bad_rx);
            return 0;
        }
        if (ic[o] == (type == 135 ? 1 : 2) && ic[o + 1] == 1)
            lla = ic + o + 2;
        o += (uint32_t)ic[o + 1] * 8;
    }
    if (type == 136) {              /* Neighbor Advertisement */
        if (e->cfg.role == PK_TCP_CLIENT && !e->cfg.gateway_mac_set && memcmp(target, e->cfg.gateway_ip6, 16) == 0) {
            memcpy(e->cfg.gateway_mac, lla ? lla : d + 6, 6);
            e->cfg.gateway_mac_set = 1;
        }
        return 0;
    }
    /* Neighbor Solicitation: to the target itself or to its solicited-node group */
    static const uint8_t unspec[16];
    const uint8_t *dst = ip + 24;
    int to_group = dst[0] == 0xff && dst[1] == 0x02 && memcmp(dst + 2, unspec, 9) == 0 && dst[11] == 1 &&
                   dst[12] == 0xff && memcmp(dst + 13, target + 13, 3) == 0;
    if (!my_addr6(e, target) || (!to_group && memcmp(dst, target, 16) != 0))
        return 0;
    if (memcmp(ip + 8, unspec, 16) == 0)
        return 0;                   /* duplicate address detection: not defended */
    const uint8_t *peer = lla ? lla : d + 6;
    if (e->cfg.role == PK_TCP_SERVER && !e->peer_mac_ok) {
        memcpy(e->peer_mac, peer, 6);
        e->peer_mac_ok = 1;
    }
    uint8_t b[32] = { 136, 0 };
    b[4] = 0x60;                    /* Solicited, Override */
    memcpy(b + 8, target, 16);
    b[24] = 2;                      /* target link-layer address */
    b[25] = 1;
    memcpy(b + 26, e->mac, 6);
    tx_icmp6(e, peer, target, ip + 8, b, 32);
    return 0;
}

/* An IPv6 frame: the fixed header, extension headers (perfkit/ip6ext.h: a fragment, a
 * Routing header with segments left or a discard option counts in other_rx and is
 * dropped; a cut or overlong chain in bad_rx), then ICMPv6 or TCP. */
static int handle_ip6(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t *d, uint32_t len, uint32_t l2, uint64_t now)
{
    if (!e->cfg.ipv6) {
        cnt(e, PK_other_rx);
        return 0;
    }
    if (len < l2 + IP6_LEN || m->nb_segs != 1) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t *ip = d + l2;
    uint32_t plen = rd16(ip + 4);
    if ((ip[0] >> 4) != 6 || l2 + IP6_LEN + plen > len) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t nh;
    uint32_t xlen;                  /* extension headers' bytes: the upper layer has plen - xlen */
    int walk = pk_ip6_walk(ip, plen, &nh, &xlen);
    if (walk != PK_IP6_UPPER) {
        cnt(e, walk == PK_IP6_BAD ? PK_bad_rx : PK_other_rx);
        return 0;
    }
    plen -= xlen;
    if (nh == 58)
        return handle_icmp6(e, m, d, l2, ip, ip + IP6_LEN + xlen, plen);
    if (nh == 17) {
        cnt(e, PK_udp_rx);
        return 0;
    }
    if (nh != 6) {
        cnt(e, PK_other_rx);
        return 0;
    }
    const uint8_t *l4 = ip + IP6_LEN + xlen;
    uint32_t doff = plen >= TCP_LEN ? (uint32_t)(l4[12] >> 4) * 4 : 0;
    if (plen < TCP_LEN || doff < TCP_LEN || doff > plen ||
        !tcp_csum_ok(e, l4, plen, sum16(ip + 8, 32, ph6_tail(plen, 6)))) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    cnt(e, PK_tcp_rx);
    if (!my_addr6(e, ip + 24)) {
        cnt(e, PK_tcp_drop);
        return 0;
    }
    seg g;
    g.sip = rd32(ip + 20);
    g.dip = rd32(ip + 36);
    g.sa = ip + 8;
    g.da = ip + 24;
    tcp_in(e, &g, d, l4, doff, plen, now);
    return 0;
}

/* Returns 1 when the frame was turned into a reply (send it), 0 = free it. */
static int handle_frame(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (len < ETH_LEN) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint16_t type = rd16(d + 12);
    uint32_t l2 = ETH_LEN;
    if (type == 0x8100) {           /* 802.1Q: ours only with our VLAN */
        if (len < 18) {
            cnt(e, PK_bad_rx);
            return 0;
        }
        if (!e->cfg.vlan || (rd16(d + 14) & 0x0fff) != e->cfg.vlan) {
            cnt(e, PK_other_rx);
            return 0;
        }
        type = rd16(d + 16);
        l2 = 18;
    } else if (e->cfg.vlan) {       /* untagged, while we are on a VLAN */
        cnt(e, PK_other_rx);
        return 0;
    }
    if (type == 0x0806)
        return handle_arp(e, d, len, l2);
    if (type == 0x86DD)
        return handle_ip6(e, m, d, len, l2, now);
    if (type != 0x0800) {
        cnt(e, PK_other_rx);
        return 0;
    }
    if (len < l2 + IP_LEN || m->nb_segs != 1) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t *ip = d + l2;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    uint32_t tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || l2 + ihl > len || tot < ihl || l2 + tot > len ||
        fold(sum16(ip, ihl, 0)) != 0xffff) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    if ((rd16(ip + 6) & 0x3fff) != 0) {
        cnt(e, PK_other_rx);        /* a fragment: well formed, not reassembled (as over IPv6) */
        return 0;
    }
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
    uint8_t *l4 = ip + ihl;
    uint32_t l4len = tot - ihl;
    if (ip[9] == 1) {
        if (l4len < 8) {
            cnt(e, PK_bad_rx);
            return 0;
        }
        if (fold(sum16(l4, l4len, 0)) != 0xffff) {
            cnt(e, PK_bad_rx);
            return 0;
        }
        cnt(e, PK_icmp_rx);
        if (l4[0] != 8 || l4[1] != 0 || !my_addr(e, dst))
            return 0;
        uint8_t t6[6], t4[4];
        memcpy(t6, d + 6, 6);
        memcpy(d, t6, 6);
        memcpy(d + 6, e->mac, 6);
        memcpy(t4, ip + 12, 4);
        memcpy(ip + 12, ip + 16, 4);
        memcpy(ip + 16, t4, 4);
        ip[8] = 64;
        ip[10] = ip[11] = 0;
        uint16_t c = (uint16_t)~fold(sum16(ip, ihl, 0));
        memcpy(ip + 10, &c, 2);
        l4[0] = 0;
        l4[2] = l4[3] = 0;
        c = (uint16_t)~fold(sum16(l4, l4len, 0));
        memcpy(l4 + 2, &c, 2);
        m->data_len = (uint16_t)(l2 + tot);
        m->pkt_len = l2 + tot;
        return 1;
    }
    if (ip[9] == 17) {
        cnt(e, PK_udp_rx);
        return 0;
    }
    if (ip[9] != 6) {
        cnt(e, PK_other_rx);
        return 0;
    }
    /* TCP: header length, checksum over pseudo header and segment, options */
    if (l4len < TCP_LEN) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint32_t doff = (uint32_t)(l4[12] >> 4) * 4;
    if (doff < TCP_LEN || doff > l4len) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t ph[12];
    memcpy(ph, ip + 12, 8);
    ph[8] = 0;
    ph[9] = 6;
    wr16(ph + 10, (uint16_t)l4len);
    if (!tcp_csum_ok(e, l4, l4len, sum16(ph, 12, 0))) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    cnt(e, PK_tcp_rx);
    if (!my_addr(e, dst)) {
        cnt(e, PK_tcp_drop);
        return 0;
    }
    seg g;
    g.sip = rd32(ip + 12);
    g.dip = rd32(ip + 16);
    g.sa = ip + 12;
    g.da = ip + 16;
    tcp_in(e, &g, d, l4, doff, l4len, now);
    return 0;
}

/* A TCP segment of either family whose checksum held (g has its addresses): the
 * options, then its socket. */
static void tcp_in(pk_tcp_engine *e, seg *gp, const uint8_t *d, const uint8_t *l4, uint32_t doff,
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
    if (e->cfg.role == PK_TCP_SERVER) {
        memcpy(e->peer_mac, g.smac, 6);
        e->peer_mac_ok = 1;
    }
    handle_tcp(e, &g, now);
}

/* One receive burst, handled; returns its frames. */
static uint16_t rx_burst(pk_tcp_engine *e, uint64_t now)
{
    struct rte_mbuf *m[256];
    if (!port_ready(e))
        return 0;
    uint16_t n = rte_eth_rx_burst(e->pid, e->cfg.queue, m, (uint16_t)e->cfg.burst);
    if (!n)
        return 0;
    uint64_t bytes = 0;             /* counted once per burst, before any frame is handled */
    for (uint16_t i = 0; i < n; i++)
        bytes += rte_pktmbuf_pkt_len(m[i]) + FCS_LEN;
    pk_add(&e->c, PK_pkts_rx, n);
    pk_add(&e->c, PK_bytes_rx, bytes);
    struct rte_mbuf *done[256];     /* freed together after the burst: one pool-cache lookup */
    uint16_t nd = 0;
    for (uint16_t i = 0; i < n; i++) {
        if (i + 1 < n)
            rte_prefetch0(rte_pktmbuf_mtod(m[i + 1], const void *));
        if (handle_frame(e, m[i], now))
            tx_put(e, m[i]);
        else
            done[nd++] = m[i];
    }
    if (nd)
        rte_pktmbuf_free_bulk(done, nd);
    return n;
}

/* ------------------------------------------------------------ timers fire */

static void on_rto(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    tsock *s = &e->socks[idx];
    if (!needs_rto(s)) {
        timer_del(e, idx);
        return;
    }
    if (s->retries >= e->cfg.retries) {
        if (s->state == S_SYN_SENT) {
            cnt(e, PK_err_connect);
            cnt(e, PK_err_timeout);
            timer_del(e, idx);
            sock_free(e, idx, PK_sock_error);   /* nothing to reset: nobody answered */
            return;
        }
        if (s->flags & F_WAITING)
            cnt(e, PK_http_err);
        sock_abort(e, idx, PK_err_timeout);
        return;
    }
    s->retries++;
    /* a retransmit counts once the port's queue took it (syn_tx / fin_tx went up); one the
     * full queue dropped is in drop_tx only, so syn_tx - retrans_syn is the first SYNs sent */
    if (s->state == S_SYN_SENT || s->state == S_SYN_RCVD) {
        uint64_t before = pk_read(&e->c, PK_syn_tx);
        sock_tx(e, idx, s->iss, s->state == S_SYN_SENT ? TH_SYN : TH_SYN | TH_ACK, 0, 0);
        pk_add(&e->c, PK_retrans_syn, pk_read(&e->c, PK_syn_tx) - before);
    } else if (s->flags & F_SENDING) {
        /* go back to the first unacknowledged byte */
        if (s->nxt == e->msg_len && (s->flags & F_FIN_SENT))
            s->flags &= (uint8_t)~F_FIN_SENT;   /* it is sent again with the last segment */
        s->nxt = s->una;
        uint64_t before = pk_read(&e->c, PK_pkts_tx);
        send_data(e, idx, 1);
        pk_add(&e->c, PK_retrans_push, pk_read(&e->c, PK_pkts_tx) - before);
    } else {
        uint64_t before = pk_read(&e->c, PK_fin_tx);
        sock_tx(e, idx, s->snd_base, TH_FIN | TH_ACK, 0, 0);
        pk_add(&e->c, PK_retrans_fin, pk_read(&e->c, PK_fin_tx) - before);
    }
    timer_add(e, idx, TL_RTO, now);
}

static void on_ka(pk_tcp_engine *e, uint32_t idx, uint64_t now)
{
    timer_del(e, idx);
    if (e->launching)
        client_request(e, idx, now);
    else
        client_close(e, idx, now);
}

static void run_timers(pk_tcp_engine *e, uint64_t now)
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
                on_ka(e, idx, now);
        }
    }
}

/* ------------------------------------------------------------ client launch */

static void launch(pk_tcp_engine *e, uint64_t now, uint64_t t_start)
{
    double el = (double)(now - t_start) / (double)e->hz;
    double ss = (double)e->cfg.slow_start_ns / 1e9;
    double target = (ss > 0 && el < ss) ? e->cfg.cps * el * el / (2 * ss)
                                        : e->cfg.cps * (el - ss / 2);
    if (target < 1 && el > 0)
        target = 1;                 /* the first connection at once */
    uint32_t budget = e->cfg.launch_num;
    /* behind (the worker lost its CPU): catch up only as the transmit queue has room */
    while (budget-- && (double)e->launched < target && e->ntx < TXQ / 2) {
        if (e->cfg.flood) {         /* a SYN from the next tuple; nothing is kept */
            tuple4 t;
            sock_tuple(e, e->cursor, &t);
            e->cursor = (e->cursor + 1 == e->nsock) ? 0 : e->cursor + 1;
            e->launched++;
            tx_seg(e, t.cip, rte_be_to_cpu_32(e->cfg.server_ip), t.cport, t.sport, tsc_rand(e, now), 0, TH_SYN, 0, 0);
            continue;
        }
        if (e->cfg.cc && e->current >= e->cfg.cc) {
            e->launched = (uint64_t)target;   /* at the concurrency target: no backlog */
            return;
        }
        uint32_t idx = UINT32_MAX;
        for (uint32_t probe = 0; probe < 64; probe++) {
            uint32_t i = e->cursor;
            e->cursor = (e->cursor + 1 == e->nsock) ? 0 : e->cursor + 1;
            if (e->socks[i].state == S_CLOSED) {
                idx = i;
                break;
            }
        }
        if (idx == UINT32_MAX)
            return;                 /* the table is busy here: later */
        tsock *s = &e->socks[idx];
        memset(s, 0, sizeof(*s));
        s->state = S_SYN_SENT;
        s->iss = tsc_rand(e, now);
        s->snd_base = s->iss + 1;
        s->t0 = now;
        e->launched++;
        e->current++;
        cnt(e, PK_sock_open);
        pk_set(&e->c, PK_sock_current, e->current);
        sock_tx(e, idx, s->iss, TH_SYN, 0, 0);
        timer_add(e, idx, TL_RTO, now);
    }
}

/* ------------------------------------------------------------ worker */

static void read_nic(pk_tcp_engine *e, int base)
{
    uint64_t nic[3];
    if (e->cfg.queue != 0)
        return;                     /* the port's counters: once, by queue 0's engine */
    if (pk_dpdk_port_nic(e->port, nic) != 0)   /* the dpdk engine's: kernel drops included */
        return;
    if (base) {
        memcpy(e->nic_base, nic, sizeof(nic));
        return;
    }
    pk_set(&e->c, PK_nic_ierrors, nic[0] - e->nic_base[0]);
    pk_set(&e->c, PK_nic_oerrors, nic[1] - e->nic_base[1]);
    pk_set(&e->c, PK_nic_imissed, nic[2] - e->nic_base[2]);
}

static inline int stopping(const pk_tcp_engine *e) { return __atomic_load_n(&e->stop, __ATOMIC_RELAXED); }

static void worker_loop(pk_tcp_engine *e)
{
    const uint64_t hz = e->hz;
    uint64_t t0 = rte_rdtsc(), now = t0;
    uint64_t busy = 0, wall0 = t0, nic_every = (uint64_t)((double)NIC_EVERY_NS * hz / 1e9);
    /* a pass takes microseconds; one over 1 ms lost the CPU (a shared machine) */
    uint64_t stall = 0, stall_c = hz / 1000;
    uint64_t to_c = (uint64_t)((double)e->cfg.duration_ns * hz / 1e9);
    int client = e->cfg.role == PK_TCP_CLIENT;
    uint64_t last_arp = 0, arp_until = t0 + (uint64_t)((double)(ARP_GIVE_UP_NS + e->cfg.wait_ns) * hz / 1e9);
    const uint64_t arp_give_up_c = (uint64_t)((double)ARP_GIVE_UP_NS * hz / 1e9);
    const uint64_t arp_last_c = t0 + (uint64_t)((double)(LINK_GIVE_UP_NS + e->cfg.wait_ns) * hz / 1e9);
    uint32_t arp_asked = 0, arp_link_down = 0;  /* requests sent; of them, with the link down */
    uint64_t ctl_wait = 0;          /* cycles spent stepping out for the memif control */
    uint64_t launch_at = 0, launch_end = 0, drain_end = 0, drain_at = 0;
    double closed = 0;              /* CLIENT: idle keep-alive connections closed by the drain */
    uint64_t arp_c = (uint64_t)((double)ARP_RETRY_NS * hz / 1e9);
    uint64_t drain_c = e->rto_c * (e->cfg.retries + 2) + hz;
    if (!client)
        launch_end = t0 + to_c;
    uint64_t next = t0;             /* the TSC a pass starts at: the last pass's end (one read a pass) */
    for (;;) {
        now = next;
        uint64_t before = pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx);
        /* full bursts: more is waiting; take it before timers and launches add more work
         * (a client launching launch_num a pass, 3 frames back for each, outruns one burst
         * of 32 a pass and overflows its ring) */
        for (int k = 0; k < RX_ROUNDS && rx_burst(e, now) == e->cfg.burst; k++)
            ;
        run_timers(e, now);
        if (client) {
            if (!e->cfg.gateway_mac_set) {
                if (now >= arp_until) {
                    char a[INET6_ADDRSTRLEN];
                    const uint8_t *g = (const uint8_t *)&e->cfg.gateway_ip;
                    snprintf(a, sizeof(a), "%u.%u.%u.%u", g[0], g[1], g[2], g[3]);
                    if (e->cfg.ipv6)
                        inet_ntop(AF_INET6, e->cfg.gateway_ip6, a, sizeof(a));
                    snprintf(e->err, sizeof(e->err), "no %s from %s on port %s: is the gateway (or the "
                             "server) up and on this link, with the address in its %s? (%u requests in "
                             "%.1f s, %u of them with the link down; %llu frames received; this worker "
                             "lost its CPU for %.0f ms and stepped out for the memif control for %.0f ms)",
                             e->cfg.ipv6 ? "Neighbor Advertisement (IPv6 ND)" : "ARP reply", a,
                             pk_dpdk_port_name(e->port), e->cfg.ipv6 ? "prefix" : "subnet", arp_asked,
                             (double)(now - t0) / hz, arp_link_down,
                             (unsigned long long)pk_read(&e->c, PK_pkts_rx), (double)stall * 1e3 / hz,
                             (double)ctl_wait * 1e3 / hz);
                    break;
                }
                if (now - last_arp >= arp_c) {
                    /* a link that is down (a memif peer reconnecting) does not use up the time
                     * to answer: the wait starts over while it is, up to LINK_GIVE_UP_NS */
                    if (pk_dpdk_port_link(e->port) == 0) {
                        arp_link_down++;
                        if (now + arp_give_up_c > arp_until)
                            arp_until = now + arp_give_up_c < arp_last_c ? now + arp_give_up_c : arp_last_c;
                    }
                    arp_asked++;
                    if (e->cfg.ipv6)
                        send_ns(e);
                    else
                        send_arp_request(e);
                    last_arp = now;
                }
            } else if (!launch_at) {
                launch_at = now + (uint64_t)((double)e->cfg.wait_ns * hz / 1e9);
                launch_end = launch_at + to_c;
            } else if (now >= launch_at && now < launch_end && !stopping(e)) {
                e->launching = 1;
                launch(e, now, launch_at);
            } else if (now >= launch_end || stopping(e)) {
                if (e->launching || !e->draining) {
                    e->launching = 0;
                    e->draining = 1;
                    drain_at = now;
                    closed = 0;
                    /* time to close the idle keep-alive connections at the connection rate,
                     * four times over: a peer that loses its CPU slows the closing down */
                    drain_end = now + (e->cfg.flood ? drain_c / 8 : drain_c) +
                                (e->cfg.cps > 0 ? (uint64_t)(4.0 * (double)e->current / e->cfg.cps * hz) : 0);
                }
                /* idle keep-alive connections close now, at the rate they were opened (which
                 * the path carried) and as the transmit queue has room: a million FINs at once
                 * would overflow both sides' queues and come back as retransmissions */
                double due = e->cfg.cps > 0 ? e->cfg.cps * (double)(now - drain_at) / hz + DRAIN_BATCH : 1e18;
                for (int k = 0; e->head[TL_KA] && k < DRAIN_BATCH && e->ntx < TXQ / 2 && closed < due; k++, closed++)
                    on_ka(e, e->head[TL_KA] - 1, now);
                /* a flood keeps no sockets: it stays a moment to answer the last SYN-ACKs */
                if ((e->current == 0 && !e->cfg.flood) || now >= drain_end)
                    break;
            }
        } else if (now >= launch_end || stopping(e)) {
            break;
        }
        if (e->ntx)
            tx_flush(e);
        uint64_t t1 = rte_rdtsc();
        next = t1;
        if (t1 - now > stall_c)
            stall += t1 - now;
        else if (pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx) != before)
            busy += t1 - now;
        if (t1 - e->last_nic >= nic_every) {
            e->last_nic = t1;
            read_nic(e, 0);
            pk_set(&e->c, PK_cpu_busy_ns, (uint64_t)((double)busy * 1e9 / hz));
            pk_set(&e->c, PK_cpu_stall_ns, (uint64_t)((double)stall * 1e9 / hz));
            pk_set(&e->c, PK_cpu_wall_ns, (uint64_t)((double)(t1 - wall0) * 1e9 / hz));
            /* idle: a memif peer's leaving or coming is handled now (dpdk_engine.c) */
            uint64_t idle_at = rte_rdtsc();
            pk_dpdk_port_poll_idle(e->port, e->cfg.queue, pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx));
            e->port_ok = 0;         /* the memif control may have run: look at the link again */
            next = rte_rdtsc();     /* the NIC read stays out of the next pass */
            ctl_wait += next - idle_at;
        }
    }
    end_flush(e);
    /* what is still open at the end: the client's are errors (they did not finish in the
     * drain time); the server's stay counted as current */
    if (client) {
        for (uint32_t i = 0; i < e->nsock && e->current; i++)
            if (e->socks[i].state != S_CLOSED)
                sock_abort(e, i, PK_err_timeout);
        end_flush(e);
    }
    uint64_t t1 = rte_rdtsc();
    read_nic(e, 0);
    pk_set(&e->c, PK_cpu_busy_ns, (uint64_t)((double)busy * 1e9 / hz));
    pk_set(&e->c, PK_cpu_stall_ns, (uint64_t)((double)stall * 1e9 / hz));
    pk_set(&e->c, PK_cpu_wall_ns, (uint64_t)((double)(t1 - wall0) * 1e9 / hz));
}

static void *worker_main(void *arg)
{
    pk_tcp_engine *e = arg;
    if (e->cfg.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(e->cfg.cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    pthread_setname_np(pthread_self(), e->cfg.role == PK_TCP_SERVER ? "pk-tcp-srv" : "pk-tcp-cli");
    if (rte_thread_register() != 0) {
        snprintf(e->err, sizeof(e->err), "tcp worker: rte_thread_register: %s", rte_strerror(rte_errno));
        goto out;
    }
    e->last_nic = rte_rdtsc();   /* the NIC base was read by pk_tcp_start */
    e->mcache = rte_mempool_default_cache(e->pool, rte_lcore_id());
    worker_loop(e);
    mbuf_unstash(e);
    struct rte_mempool_cache *cache = rte_mempool_default_cache(e->pool, rte_lcore_id());
    if (cache)
        rte_mempool_cache_flush(cache, e->pool);
    rte_thread_unregister();
out:
    pk_dpdk_port_poll_end(e->port);   /* its last burst is done: memif control may run */
    __atomic_store_n(&e->running, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

pk_tcp_engine *pk_tcp_create(pk_dpdk_port *port, const pk_tcp_cfg *cfg, char *err, size_t errlen)
{
    struct rte_mempool *pool = pk_dpdk_pool();
    if (!pool) {
        set_err(err, errlen, "DPDK EAL is not initialised (no mbuf pool)");
        return NULL;
    }
    if (cfg->role != PK_TCP_SERVER && cfg->role != PK_TCP_CLIENT) {
        set_err(err, errlen, "role: server or client");
        return NULL;
    }
    if (cfg->nranges < 1 || cfg->nranges > PK_TCP_MAX_RANGES || (cfg->role == PK_TCP_CLIENT && cfg->nranges != 1)) {
        set_err(err, errlen, "client address ranges: 1..%d (a client: 1)", PK_TCP_MAX_RANGES);
        return NULL;
    }
    if (cfg->listen_num < 1 || (uint32_t)cfg->listen + cfg->listen_num > 65536 || cfg->mss < 64 ||
        cfg->burst < 1 || cfg->burst > 256 || cfg->msg_len == 0 || cfg->msg_len > PK_TCP_MAX_MSG ||
        cfg->vlan > 4094 ||
        (cfg->role == PK_TCP_CLIENT && (cfg->lport_lo < 1 || cfg->lport_lo > cfg->lport_hi ||
                                        cfg->msg_len > cfg->mss || !(cfg->cps > 0) || cfg->launch_num < 1))) {
        set_err(err, errlen, "tcp: a field is out of range (the spec checks them: use perfkit's specs)");
        return NULL;
    }
    uint64_t slots = 0;
    for (int r = 0; r < cfg->nranges; r++)
        slots += cfg->client_num[r];
    uint64_t per = cfg->role == PK_TCP_SERVER ? 65536u : (uint64_t)(cfg->lport_hi - cfg->lport_lo + 1);
    uint64_t nsock = slots * per * cfg->listen_num;
    if (nsock == 0 || nsock > PK_TCP_MAX_SOCKETS) {
        set_err(err, errlen, "tcp: %llu sockets: 1..%u", (unsigned long long)nsock, PK_TCP_MAX_SOCKETS);
        return NULL;
    }
    if (cfg->queue >= pk_dpdk_port_queues(port)) {
        set_err(err, errlen, "tcp: queue %u: port %s has %d queues", cfg->queue, pk_dpdk_port_name(port),
                pk_dpdk_port_queues(port));
        return NULL;
    }
    /* several queues: the engines are made together, queue 0 first, and only it claims */
    if (cfg->queue == 0 && pk_dpdk_port_claim(port) != 0) {
        set_err(err, errlen, "port %s is in use by another engine", pk_dpdk_port_name(port));
        return NULL;
    }
    pk_tcp_engine *e = aligned_alloc(64, (sizeof(*e) + 63) & ~(size_t)63);
    if (!e) {
        if (cfg->queue == 0)
            pk_dpdk_port_release(port);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    e->cfg = *cfg;
    e->port = port;
    e->kernel = pk_dpdk_port_kernel(port);
    e->pid = (uint16_t)pk_dpdk_port_id(port);
    pk_dpdk_port_mac(port, e->mac);
    e->pool = pool;
    e->l2 = cfg->vlan ? 18 : ETH_LEN;
    if (cfg->ipv6) {                /* the IPv6 header template and its addresses' sum */
        uint8_t *t = e->ip6_tmpl;
        int server = cfg->role == PK_TCP_SERVER;
        t[0] = (uint8_t)(0x60 | (cfg->tos >> 4));   /* traffic class = tos */
        t[1] = (uint8_t)(cfg->tos << 4);
        t[6] = 6;
        t[7] = 64;
        memcpy(t + (server ? 8 : 24), server ? cfg->ip6 : cfg->server_ip6, 16);
        memcpy(t + (server ? 24 : 8), cfg->client6_hi, 12);
        e->ph6_sum = sum16(t + 8, 32, 0);
    }
    e->slots = (uint32_t)slots;
    e->nports_c = cfg->role == PK_TCP_CLIENT ? (uint32_t)per : 0;
    e->div_l = div_magic(cfg->listen_num);
    e->div_p = div_magic(e->nports_c);
    {                               /* the IPv4 header's fixed fields: version, TOS, DF, TTL, TCP */
        uint8_t *t = e->ip4_tmpl;
        t[0] = 0x45;
        t[1] = cfg->tos;
        t[6] = 0x40;
        t[8] = 64;
        t[9] = 6;
        e->ip4_sum = sum16(t, IP_LEN, 0);
    }
    e->data_at = (uint32_t)(sizeof(struct rte_mbuf) + rte_pktmbuf_priv_size(pool) + RTE_PKTMBUF_HEADROOM);
    e->nsock = (uint32_t)nsock;
    e->map_len = (size_t)nsock * sizeof(tsock);
    /* anonymous memory is zero (S_CLOSED) and taken page by page as sockets are used */
    void *map = mmap(NULL, e->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    e->msg = malloc(cfg->msg_len + 1);
    e->psum = malloc(sizeof(uint64_t) * (cfg->msg_len / 2 + 1));
    if (map == MAP_FAILED || !e->msg || !e->psum) {
        if (map != MAP_FAILED)
            munmap(map, e->map_len);
        free(e->msg);
        free(e->psum);
        if (cfg->queue == 0)
            pk_dpdk_port_release(port);
        free(e);
        set_err(err, errlen, "tcp: cannot allocate %llu sockets: %s", (unsigned long long)nsock, strerror(errno));
        return NULL;
    }
    e->socks = map;
    /* 2 MB pages where the kernel has them (512 times fewer page faults and TLB entries),
     * and a table up to PREFAULT_MAX taken now, as dperf preallocates: a worker sweeping a
     * million connections a second otherwise spends its first second in page faults */
    madvise(map, e->map_len, MADV_HUGEPAGE);
    if (e->map_len <= PREFAULT_MAX)
        madvise(map, e->map_len, MADV_POPULATE_WRITE);   /* best effort: else page by page */
    memcpy(e->msg, cfg->msg, cfg->msg_len);
    e->msg_len = cfg->msg_len;
    e->cfg.msg = e->msg;
    e->psum[0] = 0;
    for (uint32_t k = 1; k <= cfg->msg_len / 2; k++) {
        uint16_t x;
        memcpy(&x, e->msg + 2 * (k - 1), 2);
        e->psum[k] = e->psum[k - 1] + x;
    }
    e->hz = rte_get_tsc_hz();
    e->rto_c = (uint64_t)((double)cfg->rto_ns * e->hz / 1e9);
    e->ka_c = (uint64_t)((double)cfg->ka_interval_ns * e->hz / 1e9);
    e->iss_seed = (uint32_t)rte_rdtsc() | 1;
    static const uint8_t none6[16];
    if (cfg->role == PK_TCP_SERVER && (cfg->ipv6 ? memcmp(cfg->ip6, none6, 16) == 0 : cfg->ip == 0)) {
        pk_tcp_destroy(e);
        set_err(err, errlen, "tcp server: no address");
        return NULL;
    }
    return e;
}

int pk_tcp_start(pk_tcp_engine *e, char *err, size_t errlen)
{
    if (e->started || e->running) {
        set_err(err, errlen, "this engine has already run; make a new one");
        return -1;
    }
    /* the port-wide NIC counters' base, here before this worker exists: queue 0 starts first,
     * so no queue's worker has sent yet (read in a worker, a late queue 0 thread missed what
     * another queue had already made the PMD count) */
    read_nic(e, 1);
    e->running = 1;
    pk_dpdk_port_poll_begin(e->port);   /* a connected memif port: its control waits (dpdk_engine.c) */
    int rc = pthread_create(&e->thread, NULL, worker_main, e);
    if (rc != 0) {
        pk_dpdk_port_poll_end(e->port);
        e->running = 0;
        set_err(err, errlen, "tcp worker: pthread_create: %s", strerror(rc));
        return -1;
    }
    e->started = 1;
    return 0;
}

void pk_tcp_stop(pk_tcp_engine *e) { __atomic_store_n(&e->stop, 1, __ATOMIC_RELAXED); }

int pk_tcp_running(const pk_tcp_engine *e) { return __atomic_load_n(&e->running, __ATOMIC_ACQUIRE); }

void pk_tcp_join(pk_tcp_engine *e)
{
    if (e->started) {
        pthread_join(e->thread, NULL);
        e->started = -1;   /* ran once */
    }
}

void pk_tcp_nic_last(pk_tcp_engine *e)
{
    if (e->started == -1)   /* joined: no worker writes its counters now */
        read_nic(e, 0);
}

void pk_tcp_snapshot(const pk_tcp_engine *e, uint64_t *counters, uint64_t *hist)
{
    for (int k = 0; k < PK_NCOUNTERS; k++)
        counters[k] = pk_read(&e->c, (enum pk_counter_id)k);
    if (hist)
        for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
            hist[k] = __atomic_load_n(&e->hist.b[k], __ATOMIC_RELAXED);
}

const char *pk_tcp_error(const pk_tcp_engine *e) { return e->err[0] ? e->err : NULL; }

void pk_tcp_destroy(pk_tcp_engine *e)
{
    if (!e)
        return;
    pk_tcp_stop(e);
    if (e->started > 0)
        pk_tcp_join(e);
    for (uint32_t i = 0; i < e->ntx; i++)
        rte_pktmbuf_free(e->tx[(e->txh + i) & (TXQ - 1)]);
    if (e->socks)
        munmap(e->socks, e->map_len);
    free(e->msg);
    free(e->psum);
    if (e->cfg.queue == 0)
        pk_dpdk_port_release(e->port);
    free(e);
}
