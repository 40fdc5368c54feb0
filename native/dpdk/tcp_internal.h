/* What perfkit's DPDK TCP units (tcp_*.c) share: constants, the socket and engine structs,
 * the hot inline helpers, and each unit's functions for the others. Not for Cython: the
 * public face is tcp_engine.h. */
#ifndef PERFKIT_TCP_INTERNAL_H
#define PERFKIT_TCP_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tcp_engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include "engine.h"
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
#include "perfkit/csum.h"   /* sum16, fold */
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
/* queued frames go to the port every TX_EAGER, not only at a pass's end: a pass of 8 bursts of
 * 128 requests with 12-frame responses queued 12k frames (18 MB) and took over 1 ms (bench/RESULTS-fast.md: 16 KiB responses 25 -> 41 Gbit/s with dperf's settings) */
#define TX_EAGER 32
#define RX_ROUNDS 8                 /* receive bursts a loop pass at most, while they come full */
#define RH_MAX 512                  /* CLIENT: response header sections up to this long are remembered (tcp_client_take) */
#define ACKQ 4096                   /* sockets owing an ACK at the end of a pass (RX_ROUNDS x 256 segments at most) */
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
    union {
        uint32_t iss;               /* until the handshake is done */
        uint32_t ka_lag;            /* CLIENT, then: TSC the request went after its keep-alive grid
                                       point (the next point is that one + the interval) */
    };
    uint16_t win;                   /* the peer's window (no scaling: we never offer it) */
    uint16_t mss;
    uint16_t reqs;                  /* CLIENT: requests sent on this connection */
    uint16_t hdr_bytes;             /* header bytes seen of the message being received */
    uint16_t status;                /* CLIENT: response status */
    uint8_t state, flags;
    uint8_t tl : 2;                 /* the timer list it is on (TL_*) */
    uint8_t ack_owed : 1;           /* in-order data not acknowledged yet: on ackq (tcp_ack_later) */
    uint8_t retries, parse, match;
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
    uint32_t ackq[ACKQ];            /* sockets that owed an ACK this pass (ack_owed says if they still do) */
    uint32_t nack;
    struct rte_mbuf *tx[TXQ];
    uint32_t txlen[TXQ];
    uint32_t txh, ntx;              /* a circular queue: first frame, frames queued */
    uint32_t tx_fresh;              /* frames queued since the last flush (TX_EAGER) */
    uint64_t current;               /* sockets not CLOSED */
    uint64_t lat_min;
    uint32_t iss_seed;              /* flood SYNs only: connections take isn_for */
    uint32_t *dips;                 /* CLIENT flood, change_dip: the destinations in turn (IPv4) */
    uint8_t *dips6;                 /* (IPv6: 16 bytes each) */
    uint32_t dip_i;                 /* the next one */
    uint64_t isn_key[2];            /* RFC 6528's secret: this process's (tcp_isn_key) */
    uint64_t isn_mul;               /* TSC -> 4-microsecond ticks as (now * isn_mul) >> 32 */
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
    uint8_t rh[RH_MAX];             /* the header section of the last response parsed whole from a segment's start */
    uint32_t rh_len, rh_body;       /* its length (0: none yet), its Content-Length */
    uint16_t rh_status;
    uint32_t cursor;
    uint64_t launched;
    int launching, draining;
    int held;                       /* the last launch found the concurrency target reached */

    uint64_t nic_base[PK_NIC_N], last_nic;
    pk_engine core;                 /* its one worker's thread, stop flag, running, error */
    int ran;                        /* started once; -1: and joined since */
    int kernel;                  /* the port takes frames from a Linux stack (tcp_csum_ok) */
    /* tx checksum offloads, chosen once from the port's setup (tcp_offloads_init): the device
     * fills in the IPv4 header's sum (ol_ip4) and the TCP one (ol_tcp); seg_offload flags mbufs */
    int ol_ip4, ol_tcp;
    char err[512];
};

typedef struct tuple4 {
    uint32_t cip;                   /* host order */
    uint16_t cport, sport;          /* the client's port, the server's */
} tuple4;

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

/* Each unit's functions for the others (kept inside the extension). */
#pragma GCC visibility push(hidden)

/* tcp_socket.c */
void tcp_isn_init(pk_tcp_engine *e);
int tcp_ip_slot(const pk_tcp_engine *e, uint32_t ip_host, uint32_t *slot);
void tcp_sock_tuple(const pk_tcp_engine *e, uint32_t idx, tuple4 *t);
void tcp_sock_free(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id how);
void tcp_sock_abort(pk_tcp_engine *e, uint32_t idx, enum pk_counter_id why);
void tcp_timer_del(pk_tcp_engine *e, uint32_t idx);
void tcp_timer_add(pk_tcp_engine *e, uint32_t idx, int l, uint64_t now);
void tcp_timer_add_at(pk_tcp_engine *e, uint32_t idx, int l, uint64_t deadline);
void tcp_on_ka(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_run_timers(pk_tcp_engine *e, uint64_t now);

/* tcp_output.c */
void tcp_tx_flush_mode(pk_tcp_engine *e, int drop);
void tcp_tx_flush(pk_tcp_engine *e);
void tcp_end_flush(pk_tcp_engine *e);
void tcp_mbuf_unstash(pk_tcp_engine *e);
void tcp_offloads_init(pk_tcp_engine *e, uint64_t tx_offloads);
void tcp_tx_seg(pk_tcp_engine *e, uint32_t lip, uint32_t rip, uint16_t lport, uint16_t rport,
                uint32_t seq, uint32_t ack, uint8_t flags, uint32_t off, uint32_t len);
void tcp_sock_tx(pk_tcp_engine *e, uint32_t idx, uint32_t seq, uint8_t flags, uint32_t off, uint32_t len);
void tcp_ack_later(pk_tcp_engine *e, uint32_t idx);
void tcp_acks_flush(pk_tcp_engine *e);
int tcp_send_data(pk_tcp_engine *e, uint32_t idx, int at_least_one);
void tcp_send_fin(pk_tcp_engine *e, uint32_t idx);
void tcp_start_message(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_reply_nosock(pk_tcp_engine *e, const seg *g);

/* tcp_input.c */
void tcp_in(pk_tcp_engine *e, seg *gp, const uint8_t *d, const uint8_t *l4, uint32_t doff,
            uint32_t l4len, uint64_t now);

/* tcp_rx.c */
int tcp_handle_frame(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now);
int tcp_handle_l2(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now);
/* tcp_vxlan.c */
int tcp_vxlan_frame(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now);
int tcp_vxlan_encap(pk_tcp_engine *e, struct rte_mbuf *m);
uint16_t tcp_rx_burst(pk_tcp_engine *e, uint64_t now);

/* tcp_neigh.c */
int tcp_my_addr(const pk_tcp_engine *e, uint32_t ip_net);
int tcp_handle_arp(pk_tcp_engine *e, uint8_t *d, uint32_t len, uint32_t l2);
void tcp_send_arp_request(pk_tcp_engine *e);
int tcp_my_addr6(const pk_tcp_engine *e, const uint8_t *a);
void tcp_send_ns(pk_tcp_engine *e);
int tcp_handle_icmp6(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t *d, uint32_t l2, uint8_t *ip, uint8_t *ic,
                     uint32_t plen);

/* tcp_http.c */
int tcp_server_scan(pk_tcp_engine *e, tsock *s, const uint8_t *p, uint32_t n);
int tcp_client_parse(tsock *s, const uint8_t *p, uint32_t n);
int tcp_client_take(pk_tcp_engine *e, tsock *s, const uint8_t *p, uint32_t n);
void tcp_client_request(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_client_close(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_client_response(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_launch(pk_tcp_engine *e, uint64_t now, uint64_t t_start);

/* tcp_udp.c (dperf's protocol udp) */
void tcp_udp_open(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_udp_timer(pk_tcp_engine *e, uint32_t idx, uint64_t now);
void tcp_udp_close(pk_tcp_engine *e, uint32_t idx);
void tcp_udp_flood(pk_tcp_engine *e, uint32_t idx);
/* tcp_output.c: a flood's SYN over IPv6 from the client address whose last 4 bytes are
 * client_low to ra (16 bytes) */
void tcp_tx_syn6_to(pk_tcp_engine *e, uint32_t client_low, const uint8_t *ra, uint16_t lport, uint16_t rport,
                    uint32_t seq);
void tcp_udp_in(pk_tcp_engine *e, const uint8_t *sa, const uint8_t *da, uint32_t alen, const uint8_t *l4,
                uint32_t len, uint64_t pseudo, uint64_t now);

#pragma GCC visibility pop

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

/* RFC 6528's initial sequence number: a keyed hash of the 4-tuple (client address and port,
 * server address and port, host order) plus a 4-microsecond clock, so a connection on a
 * tuple a peer still holds in TIME_WAIT starts after the old one's sequence numbers (RFC
 * 6191), as Linux's own clients' do. */
static inline uint64_t isn_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline uint32_t isn_for(const pk_tcp_engine *e, uint32_t cip, uint16_t cport, uint32_t sip, uint16_t sport,
                               uint64_t tsc)
{
    uint64_t h = isn_mix((((uint64_t)cip << 32) | sip) ^ e->isn_key[0]);
    h = isn_mix(h ^ (((uint64_t)cport << 16) | sport) ^ e->isn_key[1]);
    return (uint32_t)h + (uint32_t)(((unsigned __int128)tsc * e->isn_mul) >> 32);
}

/* n / d for a 32-bit n from M = 2^64 / d + 1 (exact for every 32-bit n and d > 1; M = 0
 * stands for d = 1): a multiply instead of a division per segment. */
static inline uint64_t div_magic(uint32_t d) { return d > 1 ? UINT64_MAX / d + 1 : 0; }

static inline uint32_t fdiv(uint32_t n, uint64_t M)
{
    return M ? (uint32_t)(((unsigned __int128)M * n) >> 64) : n;
}

static inline void cnt(pk_tcp_engine *e, enum pk_counter_id id) { pk_add(&e->c, id, 1); }

/* CLIENT flood: the index of its next packet's destination in change_dip's list (dperf's: the
 * next address of this worker's share); call only with a list (cfg.ndips). */
static inline uint32_t tcp_flood_next(pk_tcp_engine *e)
{
    uint32_t k = e->dip_i;
    e->dip_i = k + 1 == e->cfg.ndips ? 0 : k + 1;
    return k;
}

/* CLIENT flood, IPv4: where its next packet goes (host order): change_dip's next, else server_ip. */
static inline uint32_t tcp_flood_dst(pk_tcp_engine *e)
{
    return e->cfg.ndips ? e->dips[tcp_flood_next(e)] : rte_be_to_cpu_32(e->cfg.server_ip);
}

/* A response's status class (2xx..5xx), the one place both HTTP over TCP and over UDP count it */
static inline void cnt_status(pk_tcp_engine *e, uint16_t st)
{
    if (st >= 200 && st < 300)
        cnt(e, PK_http_2xx);
    else if (st >= 300 && st < 400)
        cnt(e, PK_http_3xx);
    else if (st >= 400 && st < 500)
        cnt(e, PK_http_4xx);
    else if (st >= 500)
        cnt(e, PK_http_5xx);
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

/* Is the port ready for a burst? (a memif port: up; see pk_dpdk_port_burst_ok) */
static inline int port_ready(pk_tcp_engine *e)
{
    return e->port_ok || (e->port_ok = pk_dpdk_port_burst_ok(e->port));
}

/* Queue a frame as it is; 0 when the queue stays full and it is dropped (counted). */
static inline int tx_put_raw(pk_tcp_engine *e, struct rte_mbuf *m)
{
    if (e->ntx == TXQ)
        tcp_tx_flush(e);
    if (e->ntx == TXQ) {        /* the port takes nothing: this frame is lost */
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return 0;
    }
    uint32_t at = (e->txh + e->ntx++) & (TXQ - 1);
    e->txlen[at] = rte_pktmbuf_pkt_len(m);
    e->tx[at] = m;
    if (++e->tx_fresh == TX_EAGER)  /* a pass's frames go out as they come (TX_EAGER) */
        tcp_tx_flush(e);
    return 1;
}

/* Queue a frame (with vxlan: in its outer headers); 0 when it is dropped (counted). */
static inline int tx_put(pk_tcp_engine *e, struct rte_mbuf *m)
{
    if (e->cfg.vxlan && !tcp_vxlan_encap(e, m)) {
        rte_pktmbuf_free(m);
        cnt(e, PK_drop_tx);
        return 0;
    }
    return tx_put_raw(e, m);
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

/* The sequence number after everything sent: the seq of a pure ACK or RST. */
static inline uint32_t snd_next(const tsock *s)
{
    return s->snd_base + ((s->flags & F_SENDING) ? s->nxt : 0) + ((s->flags & F_FIN_SENT) ? 1 : 0);
}

static inline int needs_rto(const tsock *s)
{
    return s->state == S_SYN_SENT || s->state == S_SYN_RCVD || (s->flags & F_SENDING) ||
           ((s->flags & F_FIN_SENT) && !(s->flags & F_FIN_ACKED));
}

/* The IPv6 pseudo header's upper-layer length and next header, summed (RFC 8200 8.1). */
static inline uint64_t ph6_tail(uint32_t len, uint8_t nh)
{
    uint8_t b[8] = { (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, 0, 0, 0, nh };
    return sum16(b, 8, 0);
}

#endif
