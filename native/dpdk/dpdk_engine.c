/* perfkit's DPDK engine: see dpdk_engine.h; its units: dpdk_internal.h. */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_lcore.h>

#define ARP_RETRY_NS    200000000ull /* a generator re-sends its ARP request this often */
#define GEN_RX_EVERY_NS 20000ull     /* a generator that expects nothing back polls rx this often */
#define CATCHUP_NS      250000000ull /* a paced generator may finish this late */

/* ------------------------------------------------------------ accounting */

static inline void record_latency(worker *w, uint64_t lat, uint64_t *last_lat)
{
    pk_record_latency(&w->c, &w->hist, &w->lat_min, lat, last_lat);
}

void pkd_read_nic(worker *w, uint64_t now, int base)
{
    uint64_t nic[3];
    w->last_nic = now;
    if (!w->nic_owner)   /* port-wide counters: one worker per port reports them */
        return;
    if (pk_dpdk_port_nic(w->port, nic) != 0)
        return;
    if (base) {
        memcpy(w->nic_base, nic, sizeof(nic));
        return;
    }
    pk_set(&w->c, PK_nic_ierrors, nic[0] - w->nic_base[0]);
    pk_set(&w->c, PK_nic_oerrors, nic[1] - w->nic_base[1]);
    pk_set(&w->c, PK_nic_imissed, nic[2] - w->nic_base[2]);
}

/* --------------------------------------------------------------- receive */

static void track_payload(worker *w, const uint8_t *pl, uint32_t plen, uint64_t now_ns, rx_acc *a)
{
    uint32_t magic;
    if (plen < PK_WIRE_SHORT_LEN)
        return;
    memcpy(&magic, pl, 4);
    uint32_t flow;
    uint64_t seq, lat;
    if (magic == PK_WIRE_MAGIC && plen >= PK_WIRE_HDR_LEN) {
        pk_wire_hdr h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= w->nflows)
            return;
        flow = h.flow;
        seq = h.seq;
        lat = now_ns >= h.tx_ns ? now_ns - h.tx_ns : UINT64_MAX;
    } else if (magic == PK_WIRE_PROBE_MAGIC && plen >= PK_WIRE_HDR_LEN) {
        pk_wire_hdr h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= PK_DPDK_MAX_QUEUES)
            return;
        flow_state *f = &w->flows[w->nflows + h.flow];
        pk_seq_arrive(f, h.seq, &a->lost, &a->dup, &a->reorder);
        if (now_ns >= h.tx_ns) {
            uint64_t lat = now_ns - h.tx_ns;
            pk_hist_add(&w->probe_hist, lat);
            pk_add(&w->c, PK_probe_rx, 1);
            pk_add(&w->c, PK_probe_lat_sum_ns, lat);
            if (w->probe_min == 0 || lat < w->probe_min) {
                w->probe_min = lat ? lat : 1;
                pk_set(&w->c, PK_probe_lat_min_ns, w->probe_min);
            }
            if (lat > pk_read(&w->c, PK_probe_lat_max_ns))
                pk_set(&w->c, PK_probe_lat_max_ns, lat);
        }
        return;
    } else if (magic == PK_WIRE_SHORT_MAGIC) {
        pk_wire_short h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= w->nflows)
            return;
        flow = h.flow;
        seq = pk_seq_widen(w->flows[flow].next, h.seq_lo);
        uint32_t d = (uint32_t)now_ns - h.tx_ns_lo;
        lat = d < 0x80000000u ? d : UINT64_MAX;  /* a timestamp "from the future": skip */
    } else {
        return;
    }
    flow_state *f = &w->flows[flow];
    pk_seq_arrive(f, seq, &a->lost, &a->dup, &a->reorder);
    if (lat != UINT64_MAX)
        record_latency(w, lat, &f->last_lat);
}

/* A Linux sender on a veth leaves its UDP/TCP checksum to an offload (CHECKSUM_PARTIAL):
 * the field holds only the pseudo header's folded sum, and af_packet (and tap, af_xdp) hand
 * the frame over so; sent on as it is, the next kernel drops it. Such a segment gets its
 * whole checksum here. Any other wrong sum is left alone, so corruption still shows at the
 * far end. len bytes of L4 (header and data) lie in the first segment. */
static void l4_csum_finish(const uint8_t *ip, uint8_t *l4, uint32_t len, uint8_t proto)
{
    uint8_t *at = l4 + (proto == 17 ? 6 : 16);
    uint16_t field;
    memcpy(&field, at, 2);
    if (proto == 17 && field == 0)
        return;   /* no UDP checksum: IPv4 allows it */
    const uint8_t head[4] = { 0, proto, (uint8_t)(len >> 8), (uint8_t)len };
    const uint64_t pseudo = sum16(ip + 12, 8, sum16(head, 4, 0));
    if (fold(sum16(l4, len, pseudo)) == 0xffff || field != fold(pseudo))
        return;   /* right already, or wrong in another way */
    memset(at, 0, 2);
    uint16_t c = (uint16_t)~fold(sum16(l4, len, pseudo));
    if (proto == 17 && c == 0)
        c = 0xffff;
    memcpy(at, &c, 2);
}

/* The same for a frame a forwarder passes on from a kernel port: IPv4 (no fragment) UDP or
 * TCP, the whole datagram in the first segment; anything else is left as it is. */
static void fwd_csum_finish(struct rte_mbuf *m)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (len < ETH_LEN + IP_LEN || rd16(d + 12) != 0x0800)
        return;
    uint8_t *ip = d + ETH_LEN;
    const uint32_t ihl = (uint32_t)(ip[0] & 15) * 4, tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || tot < ihl || ETH_LEN + tot > len || (rd16(ip + 6) & 0x3fff))
        return;
    uint8_t *l4 = ip + ihl;
    const uint32_t l4len = tot - ihl;
    if (ip[9] == 17 && l4len >= UDP_LEN) {
        const uint32_t ulen = rd16(l4 + 4);
        if (ulen >= UDP_LEN && ulen <= l4len)
            l4_csum_finish(ip, l4, ulen, 17);
    } else if (ip[9] == 6 && l4len >= 20) {
        l4_csum_finish(ip, l4, l4len, 6);
    }
}

/* ARP: answer requests for the port's address; a resolving generator takes the
 * reply for its destination. */
static int handle_arp(worker *w, uint8_t *d, uint32_t len, rx_acc *a)
{
    if (len < ETH_LEN + 28) {
        a->bad++;
        return ACT_FREE;
    }
    uint8_t *arp = d + ETH_LEN;
    if (rd16(arp) != 1 || rd16(arp + 2) != 0x0800 || arp[4] != 6 || arp[5] != 4) {
        a->bad++;
        return ACT_FREE;
    }
    a->arp++;
    uint16_t op = rd16(arp + 6);
    uint32_t spa, tpa;
    memcpy(&spa, arp + 14, 4);
    memcpy(&tpa, arp + 24, 4);
    const uint32_t me = w->port->ip;
    pk_dpdk_port *port = w->port;
    if (op == 2 && __atomic_load_n(&port->arp_ip, __ATOMIC_ACQUIRE) == spa && spa != 0) {
        /* any worker of the port may see the reply: the first one publishes it */
        if (__atomic_exchange_n(&port->arp_claim, 1, __ATOMIC_ACQ_REL) == 0) {
            memcpy(port->arp_mac, arp + 8, 6);
            __atomic_store_n(&port->arp_done, 1, __ATOMIC_RELEASE);
        }
        return ACT_FREE;
    }
    if (op != 1 || me == 0 || tpa != me)
        return ACT_FREE;
    /* reply in place: tha = sha, tpa = spa, sha = us, spa = our address */
    wr16(arp + 6, 2);
    memcpy(arp + 18, arp + 8, 6);
    memcpy(arp + 24, &spa, 4);
    memcpy(arp + 8, w->port->mac, 6);
    memcpy(arp + 14, &me, 4);
    memcpy(d, arp + 18, 6);
    memcpy(d + 6, w->port->mac, 6);
    return ACT_REPLY;
}

static int handle_frame(worker *w, struct rte_mbuf *m, uint64_t now_ns, rx_acc *a)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);   /* headers must lie in the first segment */
    const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
    if (len < ETH_LEN) {
        a->bad++;
        return ACT_FREE;
    }
    uint16_t type = rd16(d + 12);
    if (type == 0x0806)
        return handle_arp(w, d, len, a);
    if (type != 0x0800) {
        a->other++;
        return ACT_FREE;
    }
    /* IPv4: version, IHL, total length, checksum, fragments */
    if (len < ETH_LEN + IP_LEN) {
        a->bad++;
        return ACT_FREE;
    }
    uint8_t *ip = d + ETH_LEN;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    uint32_t tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || ETH_LEN + ihl > len || tot < ihl || ETH_LEN + tot > pkt_len) {
        a->bad++;
        return ACT_FREE;
    }
    if (fold(sum16(ip, ihl, 0)) != 0xffff) {
        a->bad++;
        return ACT_FREE;
    }
    if ((rd16(ip + 6) & 0x3fff) != 0) {  /* MF or an offset: fragments are not reassembled */
        a->bad++;
        return ACT_FREE;
    }
    uint8_t proto = ip[9];
    uint8_t *l4 = ip + ihl;
    uint32_t l4len = tot - ihl;
    uint32_t l4room = len - ETH_LEN - ihl;  /* bytes of L4 in the first segment */
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
    const uint32_t me = w->port->ip;
    if (proto == 17) {
        if (l4len < UDP_LEN || l4room < UDP_LEN) {
            a->bad++;
            return ACT_FREE;
        }
        uint32_t ulen = rd16(l4 + 4);
        if (ulen < UDP_LEN || ulen > l4len) {
            a->bad++;
            return ACT_FREE;
        }
        if (w->cfg.role == PK_DPDK_RXONLY && w->cfg.drop_every && ++w->drop_ctr % w->cfg.drop_every == 0)
            return -1;  /* the test hook's lossy link: never seen */
        a->udp++;
        uint32_t plen = ulen - UDP_LEN;
        if (plen > l4room - UDP_LEN)
            plen = l4room - UDP_LEN;
        if (w->flows)
            track_payload(w, l4 + UDP_LEN, plen, now_ns, a);
        if (w->cfg.role == PK_DPDK_REVERSE && me != 0 &&
            rte_be_to_cpu_32(dst) - rte_be_to_cpu_32(me) < (w->cfg.dst_ips ? w->cfg.dst_ips : 1u)) {
            uint8_t t6[6];
            uint8_t t4[4];
            uint8_t t2[2];
            memcpy(t6, d, 6); memcpy(d, d + 6, 6); memcpy(d + 6, t6, 6);
            memcpy(t4, ip + 12, 4); memcpy(ip + 12, ip + 16, 4); memcpy(ip + 16, t4, 4);
            memcpy(t2, l4, 2); memcpy(l4, l4 + 2, 2); memcpy(l4 + 2, t2, 2);
            /* swaps keep both checksums: the sums are the same */
            if (w->port->kernel && ulen <= l4room)
                l4_csum_finish(ip, l4, ulen, 17);
            return ACT_REFLECT;
        }
        return ACT_FREE;
    }
    if (proto == 6) {
        a->tcp++;
        return ACT_FREE;
    }
    if (proto == 1) {
        if (l4len < 8 || l4room < 8) {
            a->bad++;
            return ACT_FREE;
        }
        a->icmp++;
        if (l4[0] != 8 || l4[1] != 0 || me == 0 || dst != me || m->nb_segs != 1 || l4len > l4room)
            return ACT_FREE;
        if (fold(sum16(l4, l4len, 0)) != 0xffff) {
            a->icmp--;
            a->bad++;
            return ACT_FREE;
        }
        /* echo reply: swap addresses, type 0, checksum +0x0800, drop any padding */
        uint8_t t6[6];
        uint8_t t4[4];
        memcpy(t6, d, 6); memcpy(d, d + 6, 6); memcpy(d + 6, t6, 6);
        memcpy(t4, ip + 12, 4); memcpy(ip + 12, ip + 16, 4); memcpy(ip + 16, t4, 4);
        memcpy(d + 6, w->port->mac, 6);
        ip[8] = 64;
        ip[10] = ip[11] = 0;
        uint16_t c = (uint16_t)~fold(sum16(ip, ihl, 0));
        memcpy(ip + 10, &c, 2);
        l4[0] = 0;
        uint32_t ck = (uint32_t)rd16(l4 + 2) + 0x0800;
        ck = (ck & 0xffff) + (ck >> 16);
        wr16(l4 + 2, (uint16_t)ck);
        m->data_len = (uint16_t)(ETH_LEN + tot);
        m->pkt_len = ETH_LEN + tot;
        return ACT_REPLY;
    }
    a->other++;
    return ACT_FREE;
}

/* One rx burst: count, parse, answer, reflect. Returns frames received. */
static uint32_t rx_service(worker *w)
{
    struct rte_mbuf *rx[PK_DPDK_MAX_BURST], *refl[PK_DPDK_MAX_BURST], *rep[PK_DPDK_MAX_BURST];
    if (!ports_ready(w))
        return 0;
    uint16_t n = rte_eth_rx_burst(w->pid, w->queue, rx, (uint16_t)w->cfg.burst);
    if (n == 0)
        return 0;
    /* timestamps: CLOCK_MONOTONIC itself, once per burst (vDSO: the kernel's own TSC
     * scaling, the same in every process, so one-way latency holds across processes) */
    uint64_t now_ns = pk_now_ns();
    rx_acc a;
    memset(&a, 0, sizeof(a));
    uint32_t nrefl = 0, nrep = 0, dropped = 0;
    uint32_t refl_len[PK_DPDK_MAX_BURST];
    for (uint16_t i = 0; i < n; i++) {
        struct rte_mbuf *m = rx[i];
        if (i + 1 < n)
            rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void *));
        int act = handle_frame(w, m, now_ns, &a);
        if (act < 0) {
            dropped++;
            rte_pktmbuf_free(m);
            continue;
        }
        a.pkts++;
        a.bytes += rte_pktmbuf_pkt_len(m) + FCS_LEN;
        if (act == ACT_REFLECT) {
            refl_len[nrefl] = rte_pktmbuf_pkt_len(m) + FCS_LEN;
            refl[nrefl++] = m;
        } else if (act == ACT_REPLY) {
            rep[nrep++] = m;
        } else {
            rte_pktmbuf_free(m);
        }
    }
    if (nrefl) {
        /* the lengths were taken before: once sent, a frame belongs to the receiver */
        uint16_t k = rte_eth_tx_burst(w->pid, w->queue, refl, (uint16_t)nrefl);
        free_frames(refl + k, nrefl - k);
        uint64_t b = 0;
        for (uint16_t i = 0; i < k; i++)
            b += refl_len[i];
        pk_add(&w->c, PK_pkts_tx, k);
        pk_add(&w->c, PK_bytes_tx, b);
        if (k < nrefl)
            pk_add(&w->c, PK_drop_tx, nrefl - k);
    }
    if (nrep) {
        uint16_t k = rte_eth_tx_burst(w->pid, w->queue, rep, (uint16_t)nrep);
        free_frames(rep + k, nrep - k);
    }
    pk_add(&w->c, PK_pkts_rx, a.pkts);
    pk_add(&w->c, PK_bytes_rx, a.bytes);
    if (a.udp) pk_add(&w->c, PK_udp_rx, a.udp);
    if (a.tcp) pk_add(&w->c, PK_tcp_rx, a.tcp);
    if (a.arp) pk_add(&w->c, PK_arp_rx, a.arp);
    if (a.icmp) pk_add(&w->c, PK_icmp_rx, a.icmp);
    if (a.other) pk_add(&w->c, PK_other_rx, a.other);
    if (a.bad) pk_add(&w->c, PK_bad_rx, a.bad);
    if (a.lost) pk_add(&w->c, PK_seq_lost, a.lost);
    if (a.dup) pk_add(&w->c, PK_seq_dup, a.dup);
    if (a.reorder) pk_add(&w->c, PK_seq_reorder, a.reorder);
    return n - dropped;
}

/* ------------------------------------------------------------- generator */

/* The frame every generated one starts from: Ethernet, IPv4 and UDP headers
 * with every per-frame field zero (lengths, addresses, ports, checksums), then
 * a zero filler; and the checksum words that never change. */
static void gen_template(worker *w)
{
    uint8_t *d = w->tmpl;
    memset(d, 0, (w->frame_len + 63u) & ~63u);   /* the whole allocation: gen_build copies 64 at least */
    memcpy(d, w->dst_mac, 6);
    memcpy(d + 6, w->port->mac, 6);
    wr16(d + 12, 0x0800);
    uint8_t *ip = d + ETH_LEN;
    ip[0] = 0x45;
    wr16(ip + 6, 0x4000);                    /* DF */
    ip[8] = 64;
    ip[9] = 17;
    w->ip_base = sum16(ip, IP_LEN, 0);
    const uint8_t proto[2] = { 0, 17 };      /* the pseudo header's protocol word */
    w->udp_base = sum16(proto, 2, 0);
}

static inline uint64_t bswap_word(uint16_t v) { return (uint16_t)((v >> 8) | (v << 8)); }

/* next_flow's tuple from scratch (at a start or a wrap). */
static void gen_flow_set(worker *w, uint32_t f)
{
    w->next_flow = f;   /* a flow id: flow_first .. flow_first + flows - 1 */
    w->dsp = f % w->nsp;
    f /= w->nsp;
    w->ddp = f % w->ndp;
    f /= w->ndp;
    w->dsi = f % w->nsi;
    w->ddi = f / w->nsi;
}

/* The next flow's tuple: an odometer, source port fastest (no division per frame). */
static inline void gen_flow_next(worker *w)
{
    if (++w->next_flow == w->cfg.flow_first + w->cfg.flows) {
        /* one flow wraps every frame: no division here */
        w->next_flow = w->cfg.flow_first;
        w->dsp = w->wrap[0];
        w->ddp = w->wrap[1];
        w->dsi = w->wrap[2];
        w->ddi = w->wrap[3];
        return;
    }
    if (++w->dsp < w->nsp)
        return;
    w->dsp = 0;
    if (++w->ddp < w->ndp)
        return;
    w->ddp = 0;
    if (++w->dsi < w->nsi)
        return;
    w->dsi = 0;
    w->ddi++;
}

/* Build n frames at the end of the pending list; returns how many (0 when the
 * pool is empty for now). Every header field that varies is written and summed
 * from registers (memory order = host order here), never read back. */
static uint32_t gen_build(worker *w, uint32_t n, uint64_t now_ns)
{
    struct rte_mbuf **slot = w->pend + w->npend;
    /* rte_pktmbuf_alloc_bulk, with the cache found once per run and the reset
     * done in the loop that writes the frame (one pass over each mbuf) */
    if (rte_mempool_generic_get(w->gpool, (void **)slot, n, w->gcache) != 0)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        struct rte_mbuf *m = slot[i];
        rte_pktmbuf_reset(m);
        uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
        const uint32_t len = w->pattern[w->next_size];
        w->next_size = w->next_size + 1 == w->npattern ? 0 : w->next_size + 1;
        /* short frames: one fixed 64-byte copy (no length branches); the mbuf's
         * room is far larger and the template is padded to 64 bytes */
        if (len <= 64)
            memcpy(d, w->tmpl, 64);
        else
            rte_memcpy(d, w->tmpl, len);
        m->data_len = (uint16_t)len;
        m->pkt_len = len;
        w->pend_len[w->npend + i] = len + FCS_LEN;
        const uint32_t f = w->next_flow;
        const uint32_t src = rte_cpu_to_be_32(w->src_h + w->dsi), dst = rte_cpu_to_be_32(w->dst_h + w->ddi);
        const uint16_t sp = (uint16_t)(w->cfg.sport + w->dsp), dp = (uint16_t)(w->cfg.dport + w->ddp);
        gen_flow_next(w);
        uint64_t *fs = &w->flow_seq[f - w->cfg.flow_first];
        uint64_t seq = *fs;
        __atomic_store_n(fs, seq + 1, __ATOMIC_RELAXED);
        uint8_t *ip = d + ETH_LEN, *udp = ip + IP_LEN, *pl = d + HDRS_LEN;
        const uint16_t ip_len = (uint16_t)(len - ETH_LEN), udp_len = (uint16_t)(ip_len - IP_LEN);
        wr16(ip + 2, ip_len);
        memcpy(ip + 12, &src, 4);
        memcpy(ip + 16, &dst, 4);
        const uint64_t addrs = words32(src) + words32(dst);
        uint16_t c = (uint16_t)~fold(w->ip_base + bswap_word(ip_len) + addrs);
        memcpy(ip + 10, &c, 2);
        wr16(udp, sp);
        wr16(udp + 2, dp);
        wr16(udp + 4, udp_len);
        uint64_t sum = w->udp_base + addrs + 2 * bswap_word(udp_len) + bswap_word(sp) + bswap_word(dp);
        if ((uint32_t)udp_len >= UDP_LEN + PK_WIRE_HDR_LEN) {
            const pk_wire_hdr h = { PK_WIRE_MAGIC, f, seq, now_ns };
            memcpy(pl, &h, sizeof(h));
            sum += words32(PK_WIRE_MAGIC) + words32(f) + words64(seq) + words64(now_ns);
        } else {
            const pk_wire_short h = { PK_WIRE_SHORT_MAGIC, f, (uint32_t)seq, (uint32_t)now_ns };
            memcpy(pl, &h, sizeof(h));
            sum += words32(PK_WIRE_SHORT_MAGIC) + words32(f) + words32((uint32_t)seq) + words32((uint32_t)now_ns);
        }
        c = (uint16_t)~fold(sum);
        if (c == 0)
            c = 0xffff;
        memcpy(udp + 6, &c, 2);
    }
    w->npend += n;
    return n;
}

/* One latency probe at the end of the pending list: the first flow's tuple,
 * probe_size bytes, pk_wire_hdr with the probe magic and the probe sequence. */
static void gen_build_probe(worker *w, uint64_t now_ns)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(w->gpool);
    if (!m)
        return;
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = w->cfg.probe_size - FCS_LEN;
    rte_memcpy(d, w->tmpl, len);
    m->data_len = (uint16_t)len;
    m->pkt_len = len;
    const uint32_t src = w->port->ip, dst = w->cfg.dst_ip;
    uint8_t *ip = d + ETH_LEN, *udp = ip + IP_LEN;
    const uint16_t ip_len = (uint16_t)(len - ETH_LEN), udp_len = (uint16_t)(ip_len - IP_LEN);
    wr16(ip + 2, ip_len);
    memcpy(ip + 12, &src, 4);
    memcpy(ip + 16, &dst, 4);
    ip[10] = ip[11] = 0;
    uint16_t c = (uint16_t)~fold(sum16(ip, IP_LEN, 0));
    memcpy(ip + 10, &c, 2);
    wr16(udp, w->cfg.sport);
    wr16(udp + 2, w->cfg.dport);
    wr16(udp + 4, udp_len);
    const pk_wire_hdr h = { PK_WIRE_PROBE_MAGIC, w->queue, w->probe_seq++, now_ns };
    memcpy(d + HDRS_LEN, &h, sizeof(h));
    const uint8_t proto[2] = { 0, 17 };
    uint64_t sum = sum16(ip + 12, 8, sum16(proto, 2, 0));
    sum = sum16(udp + 4, 2, sum);
    sum = sum16(udp, UDP_LEN, sum);              /* the checksum field is 0 here */
    sum = sum16(d + HDRS_LEN, sizeof(h), sum);   /* the filler is 0 */
    c = (uint16_t)~fold(sum);
    memcpy(udp + 6, c ? &c : &(uint16_t){ 0xffff }, 2);
    w->pend[w->npend] = m;
    w->pend_len[w->npend] = (len + FCS_LEN) | PROBE_FLAG;
    w->npend++;
}

/* Frames built but never taken by the port: give their sequence numbers back
 * (they are the newest of their flows), so sent is exactly what left. */
static void gen_unbuild(worker *w)
{
    for (uint32_t i = 0; i < w->npend; i++) {
        const uint8_t *d = rte_pktmbuf_mtod(w->pend[i], const uint8_t *);
        uint32_t f;
        memcpy(&f, d + HDRS_LEN + 4, 4);   /* both wire headers: magic, then the flow */
        f -= w->cfg.flow_first;
        if (w->pend_len[i] & PROBE_FLAG)
            w->probe_seq--;
        else if (f < w->cfg.flows)
            __atomic_store_n(&w->flow_seq[f], w->flow_seq[f] - 1, __ATOMIC_RELAXED);
        rte_pktmbuf_free(w->pend[i]);
    }
    if (w->npend)
        pk_add(&w->c, PK_drop_tx, w->npend);
    w->npend = 0;
}

static void send_arp_request(worker *w)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(pkd_pool);
    if (!m)
        return;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, 60);
    if (!d) {
        rte_pktmbuf_free(m);
        return;
    }
    memset(d, 0, 60);
    memset(d, 0xff, 6);
    memcpy(d + 6, w->port->mac, 6);
    wr16(d + 12, 0x0806);
    uint8_t *arp = d + ETH_LEN;
    wr16(arp, 1);
    wr16(arp + 2, 0x0800);
    arp[4] = 6;
    arp[5] = 4;
    wr16(arp + 6, 1);
    memcpy(arp + 8, w->port->mac, 6);
    memcpy(arp + 14, &w->port->ip, 4);
    memcpy(arp + 24, &w->cfg.dst_ip, 4);
    if (!ports_ready(w) || rte_eth_tx_burst(w->pid, w->queue, &m, 1) == 0)
        rte_pktmbuf_free(m);
}

/* The destination MAC: given, the peer port's, or asked by ARP for up to
 * PK_DPDK_ARP_NS; nobody answering means broadcast. */
static void gen_resolve(worker *w)
{
    const timebase *tb = &w->engine->tb;
    if (w->cfg.dst_mac_set) {
        memcpy(w->dst_mac, w->cfg.dst_mac, 6);
        w->resolved = 1;
        return;
    }
    if (w->cfg.peer >= 0) {
        memcpy(w->dst_mac, w->engine->w[w->cfg.peer].port->mac, 6);
        w->resolved = 1;
        return;
    }
    pk_dpdk_port *port = w->port;
    __atomic_store_n(&port->arp_ip, w->cfg.dst_ip, __ATOMIC_RELEASE);  /* reset at start */
    uint64_t start = rte_rdtsc(), end = start + tb_cycles(tb, PK_DPDK_ARP_NS), next = start;
    while (!w->resolved && !stopping(w)) {
        uint64_t now = rte_rdtsc();
        if (now >= end)
            break;
        if (now >= next) {
            send_arp_request(w);
            next = now + tb_cycles(tb, ARP_RETRY_NS);
        }
        rx_service(w);
        if (__atomic_load_n(&port->arp_done, __ATOMIC_ACQUIRE)) {
            memcpy(w->dst_mac, port->arp_mac, 6);
            w->resolved = 1;
        }
    }
    if (!w->resolved) {
        memset(w->dst_mac, 0xff, 6);
        w->dst_broadcast = 1;
    }
}

/* A generator whose frames come back: receive until they have all had time to
 * return. With the reflector in this engine: until it has finished and our rx
 * has then been quiet; else quiet QUIET_NS after done_at. Bounded by the hard end. */
static void receive_until_quiet(worker *w, uint64_t done_at)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const worker *peer = w->cfg.peer >= 0 ? &w->engine->w[w->cfg.peer] : NULL;
    uint64_t last = done_at, peer_done_at = peer ? 0 : done_at;
    uint32_t idle = 0;
    for (;;) {
        uint64_t now = rte_rdtsc();
        if (rx_service(w)) {
            last = now;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (now >= hard)
            break;
        if (!peer_done_at) {
            int busy = 0;
            for (int j = 0; j < w->engine->n && !busy; j++)
                busy = w->engine->w[j].port == peer->port &&
                       __atomic_load_n(&w->engine->w[j].running, __ATOMIC_ACQUIRE);
            if (busy)
                continue;
            peer_done_at = rte_rdtsc();  /* everything it sent is on its way to us now */
            continue;
        }
        uint64_t since = last > peer_done_at ? last : peer_done_at;
        if (now > since && now - since >= quiet)
            break;
    }
}

/* A generator that also receives the other side's flows (bidirectional): receive
 * until the generators feeding its port are done and its rx has been quiet. */
static void receive_until_fed(worker *w, uint64_t done_at)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    uint64_t last = done_at, fed_at = 0;
    uint32_t idle = 0;
    for (;;) {
        uint64_t now = rte_rdtsc();
        if (rx_service(w)) {
            last = now;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (now >= hard)
            break;
        int any;
        if (!feeders_done(w, &any))
            continue;
        if (!fed_at)
            fed_at = now;
        uint64_t since = last > fed_at ? last : fed_at;
        if (now > since && now - since >= quiet)
            break;
    }
}

/* TSC pacing: frames due by t cycles after the start (the first at once). A
 * constant rate r (per cycle): r t. A ramp from r0 to r1 over T: the integral
 * r0 t + (r1 - r0) t^2 / 2T up to T, then r1 on. */
typedef struct pace {
    int paced;
    double r0, r1, T;
} pace;

static pace pace_make(const worker *w, const timebase *tb)
{
    pace p = { w->cfg.rate > 0, w->cfg.rate / (double)tb->hz, 0, 0 };
    if (p.paced && w->cfg.ramp_ns && w->cfg.rate_end > 0) {
        p.r1 = w->cfg.rate_end / (double)tb->hz;
        p.T = (double)tb_cycles(tb, w->cfg.ramp_ns);
    }
    return p;
}

static inline uint64_t pace_due(const pace *p, uint64_t dt)
{
    double t = (double)dt;
    if (p->T <= 0)
        return (uint64_t)(t * p->r0) + 1;
    if (t <= p->T)
        return (uint64_t)(p->r0 * t + (p->r1 - p->r0) * t * t / (2 * p->T)) + 1;
    return (uint64_t)(p->r0 * p->T + (p->r1 - p->r0) * p->T / 2 + p->r1 * (t - p->T)) + 1;
}

static void run_gen(worker *w)
{
    const timebase *tb = &w->engine->tb;
    gen_resolve(w);
    memcpy(w->tmpl, w->dst_mac, 6);
    w->gcache = rte_mempool_default_cache(w->gpool, rte_lcore_id());
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const pace p = pace_make(w, tb);
    const uint32_t burst = w->cfg.burst;
    const uint64_t start = rte_rdtsc(), end = start + tb_cycles(tb, w->cfg.duration_ns);
    const uint64_t rx_every = w->cfg.track ? 0 : tb_cycles(tb, GEN_RX_EVERY_NS);
    uint64_t built = 0, last_rx_poll = 0;
    uint32_t idle = 0;
    w->wall0 = start;
    w->busy = 0;
    w->last_flush = start;
    w->probe_every = w->cfg.probe_rate > 0 ? (uint64_t)((double)tb->hz / w->cfg.probe_rate) : 0;
    w->next_probe = start;
    /* paced: every frame due before the end leaves, even when the thread was
     * descheduled near it (a short catch-up), so a run sends rate x duration */
    const uint64_t target = p.paced ? pace_due(&p, end - 1 - start) : 0;
    const uint64_t catchup_end = end + tb_cycles(tb, CATCHUP_NS);
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        if (stopping(w))
            break;
        if (t0 >= end && (!p.paced || (built >= target && w->npend == 0) || t0 >= catchup_end))
            break;
        const uint64_t tp = t0 < end ? t0 : end - 1;
        uint32_t moved = 0;
        /* frames coming back are measured at once; otherwise rx is only for ARP and ping */
        if (t0 - last_rx_poll >= rx_every) {
            moved = rx_service(w);
            last_rx_poll = t0;
        }
        if (w->probe_every && t0 >= w->next_probe && t0 < end && w->npend <= burst) {
            gen_build_probe(w, pk_now_ns());
            /* late (descheduled): the next one an interval from now, not a burst */
            w->next_probe = t0 - w->next_probe > w->probe_every ? t0 + w->probe_every
                                                                 : w->next_probe + w->probe_every;
        }
        uint32_t room = w->npend < burst ? burst - w->npend : 0;
        if (room) {
            uint64_t k = room;
            if (p.paced) {
                uint64_t allowed = pace_due(&p, tp - start);
                k = allowed > built ? allowed - built : 0;
                if (k > room)
                    k = room;
            }
            if (k)
                built += gen_build(w, (uint32_t)k, pk_now_ns());
        }
        if (w->npend && ports_ready(w)) {
            uint16_t sent = rte_eth_tx_burst(w->pid, w->queue, w->pend, (uint16_t)w->npend);
            if (sent) {
                uint64_t b = 0, probes = 0;
                for (uint16_t i = 0; i < sent; i++) {
                    b += w->pend_len[i] & ~PROBE_FLAG;
                    probes += w->pend_len[i] >> 31;
                }
                pk_add(&w->c, PK_pkts_tx, sent);
                pk_add(&w->c, PK_bytes_tx, b);
                if (probes)
                    pk_add(&w->c, PK_probe_tx, probes);
                w->npend -= sent;
                if (w->npend) {
                    memmove(w->pend, w->pend + sent, w->npend * sizeof(w->pend[0]));
                    memmove(w->pend_len, w->pend_len + sent, w->npend * sizeof(w->pend_len[0]));
                }
                moved += sent;
            }
        }
        uint64_t t1 = rte_rdtsc();
        if (moved) {
            w->busy += t1 - t0;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            /* nothing moves (a full queue, or the next frame is not due): let a
             * partner polling on this CPU run, rather than spin out our time slice */
            idle = 0;
            sched_yield();
        }
        housekeeping(w, t1, flush_c, nic_c);
    }
    uint64_t done = rte_rdtsc();
    flush_cpu(w, done);
    w->cpu_frozen = 1;    /* the CPU counters cover the sending time */
    gen_unbuild(w);
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    if (w->cfg.track == 1)
        receive_until_quiet(w, done);
    else if (w->cfg.track == 2)
        receive_until_fed(w, done);
}

/* ----------------------------------------------------- receive roles */

static void run_rx(worker *w)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const uint64_t start = rte_rdtsc(), own_end = start + tb_cycles(tb, w->cfg.duration_ns);
    uint64_t last_rx = 0, done_at = 0;
    uint32_t idle = 0;
    int paused = 0;
    w->wall0 = start;
    w->last_flush = start;
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        uint32_t moved = rx_service(w);
        uint64_t t1 = rte_rdtsc();
        if (moved) {
            w->busy += t1 - t0;
            last_rx = t1;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (moved && w->cfg.pause_ns && !paused) {   /* the test hook: fall behind once */
            paused = 1;
            const uint64_t until = t1 + tb_cycles(tb, w->cfg.pause_ns);
            while (rte_rdtsc() < until && rte_rdtsc() < hard && !stopping(w))
                usleep(1000);
        }
        housekeeping(w, t1, flush_c, nic_c);
        if (t1 >= hard)
            break;
        int any;
        int fed_done = feeders_done(w, &any);
        if (!any) {
            if (stopping(w) || t1 >= own_end)
                break;
            continue;
        }
        if (!fed_done)
            continue;
        if (done_at == 0)
            done_at = t1;
        uint64_t since = last_rx > done_at ? last_rx : done_at;
        if (t1 - since >= quiet)
            break;
    }
}

/* ------------------------------------------------------------- forward */

/* One rx burst of (port, queue) out of (out, queue), as testpmd's io forward (or its
 * mac forward with dst_mac_set). What the out queue does not take is freed and
 * counted in drop_tx. Returns frames received. */
static uint32_t fwd_service(worker *w)
{
    struct rte_mbuf *m[PK_DPDK_MAX_BURST];
    if (!ports_ready(w))
        return 0;
    const uint16_t n = rte_eth_rx_burst(w->pid, w->queue, m, (uint16_t)w->cfg.burst);
    if (n == 0)
        return 0;
    uint64_t rx_bytes = 0, dropped_bytes = 0;
    uint32_t k = n, bad = 0;
    if (w->port->kernel)   /* frames of a Linux stack: offloaded checksums finished */
        for (uint16_t i = 0; i < n; i++)
            fwd_csum_finish(m[i]);
    if (!w->cfg.dst_mac_set) {   /* io: one pass over the lengths, nothing else touched */
        for (uint16_t i = 0; i < n; i++)
            rx_bytes += rte_pktmbuf_pkt_len(m[i]);
        rx_bytes += (uint64_t)n * FCS_LEN;
    } else {
        k = 0;
        for (uint16_t i = 0; i < n; i++) {
            struct rte_mbuf *x = m[i];
            rx_bytes += rte_pktmbuf_pkt_len(x) + FCS_LEN;
            if (rte_pktmbuf_data_len(x) < ETH_LEN) {   /* no Ethernet header to rewrite */
                bad++;
                dropped_bytes += rte_pktmbuf_pkt_len(x) + FCS_LEN;
                rte_pktmbuf_free(x);
                continue;
            }
            uint8_t *d = rte_pktmbuf_mtod(x, uint8_t *);
            memcpy(d, w->cfg.dst_mac, 6);
            memcpy(d + 6, w->out->mac, 6);
            m[k++] = x;
        }
    }
    /* what is sent belongs to the next hop: the unsent ones' lengths are taken off first */
    const uint16_t sent = k ? rte_eth_tx_burst(w->out_pid, w->queue, m, (uint16_t)k) : 0;
    if (sent < k) {
        for (uint32_t i = sent; i < k; i++)
            dropped_bytes += rte_pktmbuf_pkt_len(m[i]) + FCS_LEN;
        free_frames(m + sent, k - sent);
        pk_add(&w->c, PK_drop_tx, k - sent);
    }
    pk_add(&w->c, PK_pkts_rx, n);
    pk_add(&w->c, PK_bytes_rx, rx_bytes);
    pk_add(&w->c, PK_pkts_tx, sent);
    pk_add(&w->c, PK_bytes_tx, rx_bytes - dropped_bytes);
    if (bad)
        pk_add(&w->c, PK_bad_rx, bad);
    return n;
}

/* A forwarder runs until stopped or its duration is over; with a guest (the other
 * direction) it polls both ports in turn, each direction counting in its own block. */
static void run_fwd(worker *w)
{
    worker *g = w->guest;
    const timebase *tb = &w->engine->tb;
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint64_t hard = w->engine->hard_end;
    const uint64_t start = rte_rdtsc(), own_end = start + tb_cycles(tb, w->cfg.duration_ns);
    uint32_t idle = 0;
    w->wall0 = start;
    w->last_flush = start;
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        uint32_t moved = fwd_service(w);
        if (g)
            moved += fwd_service(g);
        uint64_t t1 = rte_rdtsc();
        if (moved) {
            w->busy += t1 - t0;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        housekeeping(w, t1, flush_c, nic_c);
        if (g && t1 - g->last_nic >= nic_c)
            pkd_read_nic(g, t1, 0);
        if (t1 >= hard || t1 >= own_end || stopping(w))
            break;
    }
}

/* The ports a worker's thread polls (its own, a forwarder's out port, its guest's): begun
 * before the thread starts, ended after its last burst. */
static void worker_polls(worker *w, int begin)
{
    pk_dpdk_port *ps[4] = { w->port, w->out, w->guest ? w->guest->port : NULL, w->guest ? w->guest->out : NULL };
    for (int k = 0; k < 4; k++) {
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= ps[j] == ps[k];
        if (ps[k] && !dup) {
            if (begin)
                pk_dpdk_port_poll_begin(ps[k]);
            else
                pk_dpdk_port_poll_end(ps[k]);
        }
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    int i = (int)(w - w->engine->w);
    if (w->cfg.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cfg.cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    char name[16];
    snprintf(name, sizeof(name), "pk-dpdk-%d", i);
    pthread_setname_np(pthread_self(), name);
    /* an lcore id for this thread: mempool caches; released at the end */
    if (rte_thread_register() != 0) {
        snprintf(w->err, sizeof(w->err), "worker %d: rte_thread_register: %s", i, rte_strerror(rte_errno));
        goto out;
    }
    uint64_t now = rte_rdtsc();
    w->wall0 = now;
    w->last_flush = now;
    w->last_nic = now;   /* the NIC base was read at start, before any worker ran */
    if (w->cfg.role == PK_DPDK_GEN)
        run_gen(w);
    else if (w->cfg.role == PK_DPDK_FORWARD)
        run_fwd(w);
    else
        run_rx(w);
    now = rte_rdtsc();
    pkd_read_nic(w, now, 0);
    if (w->guest)
        pkd_read_nic(w->guest, now, 0);
    flush_cpu(w, now);
    struct rte_mempool *pools[2] = { pkd_pool, pkd_jumbo_pool };
    for (int k = 0; k < 2; k++) {
        struct rte_mempool_cache *cache = pools[k] ? rte_mempool_default_cache(pools[k], rte_lcore_id()) : NULL;
        if (cache)
            rte_mempool_cache_flush(cache, pools[k]);
    }
    rte_thread_unregister();
out:
    worker_polls(w, 0);
    if (w->guest) {
        __atomic_store_n(&w->guest->done_sending, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&w->guest->running, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&w->running, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

static int check_worker(pk_dpdk_engine *e, pk_dpdk_port *const *ports, int nports, int i,
                        char *err, size_t errlen)
{
    worker *w = &e->w[i];
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role < 0 || c->role >= PK_DPDK_NROLES) {
        pkd_set_err(err, errlen, "worker %d: unknown role %d", i, c->role);
        return -1;
    }
    if (c->port < 0 || c->port >= nports || !ports[c->port]) {
        pkd_set_err(err, errlen, "worker %d: port %d out of range", i, c->port);
        return -1;
    }
    for (int j = 0; j < i; j++)
        if (e->w[j].cfg.port == c->port && e->w[j].cfg.queue == c->queue) {
            pkd_set_err(err, errlen, "workers %d and %d: one queue of a port, one worker", j, i);
            return -1;
        }
    w->port = ports[c->port];
    w->pid = w->port->pid;
    w->queue = c->queue;
    if (c->queue >= w->port->nq) {
        pkd_set_err(err, errlen, "worker %d: queue %u, port %s has %u", i, c->queue, w->port->name, w->port->nq);
        return -1;
    }
    if (pk_dpdk_port_busy(w->port)) {
        pkd_set_err(err, errlen, "port %s is in use by another engine", w->port->name);
        return -1;
    }
    if (c->burst == 0 || c->burst > PK_DPDK_MAX_BURST) {
        pkd_set_err(err, errlen, "worker %d: burst %u out of range 1..%d", i, c->burst, PK_DPDK_MAX_BURST);
        return -1;
    }
    if (c->duration_ns == 0) {
        pkd_set_err(err, errlen, "worker %d: duration must be above 0", i);
        return -1;
    }
    if (c->role == PK_DPDK_GEN) {
        if (c->nsizes > PK_DPDK_MAX_PATTERN) {
            pkd_set_err(err, errlen, "worker %d: %u frame sizes: at most %d", i, c->nsizes, PK_DPDK_MAX_PATTERN);
            return -1;
        }
        for (uint32_t k = 0; k < c->nsizes; k++)
            if (c->sizes[k] < PK_DPDK_MIN_SIZE || c->sizes[k] > PK_DPDK_MAX_JUMBO) {
                pkd_set_err(err, errlen, "worker %d: frame size %u out of range %d..%d", i, c->sizes[k],
                        PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
                return -1;
            }
        if (c->ramp_ns && (!(c->rate > 0) || !(c->rate_end > 0) || c->rate_end > 1e10)) {
            pkd_set_err(err, errlen, "worker %d: a ramp needs a start rate and an end rate above 0", i);
            return -1;
        }
        if (c->probe_rate < 0 || c->probe_rate > 1e6 ||
            (c->probe_rate > 0 && (c->probe_size < PK_DPDK_MIN_SIZE + 6 || c->probe_size > PK_DPDK_MAX_JUMBO))) {
            pkd_set_err(err, errlen, "worker %d: probes: rate 0..1e6/s, size 70..%d", i, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->nsizes == 0 && (c->size < PK_DPDK_MIN_SIZE || c->size > PK_DPDK_MAX_JUMBO)) {
            pkd_set_err(err, errlen, "worker %d: size %u out of range %d..%d", i, c->size,
                    PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS || c->flow_first > PK_DPDK_MAX_FLOWS - c->flows) {
            pkd_set_err(err, errlen, "worker %d: flows %u from %u out of range 1..%d", i, c->flows, c->flow_first,
                    PK_DPDK_MAX_FLOWS);
            return -1;
        }
        const uint64_t nsp = c->sports ? c->sports : (uint64_t)c->flow_first + c->flows, ndp = c->dports ? c->dports : 1,
                       nsi = c->src_ips ? c->src_ips : 1, ndi = c->dst_ips ? c->dst_ips : 1;
        if (c->sport + nsp > 65536 || c->dport + ndp > 65536 || nsi > 1u << 17 || ndi > 1u << 17) {
            pkd_set_err(err, errlen, "worker %d: a port range passes 65535 or an address range is above 131072", i);
            return -1;
        }
        if (nsp * ndp * nsi * ndi < (uint64_t)c->flow_first + c->flows) {
            pkd_set_err(err, errlen, "worker %d: %u flows need as many tuples: sports x dports x src_ips x dst_ips "
                    "is only %llu", i, c->flow_first + c->flows, (unsigned long long)(nsp * ndp * nsi * ndi));
            return -1;
        }
        if (!(c->rate >= 0) || c->rate > 1e10) {
            pkd_set_err(err, errlen, "worker %d: rate %g out of range", i, c->rate);
            return -1;
        }
        if (c->track > 2) {
            pkd_set_err(err, errlen, "worker %d: track %d: 0 (send only), 1 (frames come back), 2 (bidirectional)",
                    i, c->track);
            return -1;
        }
        if (c->peer >= 0 && (c->peer >= e->n || c->peer == i ||
                             (e->w[c->peer].cfg.role == PK_DPDK_GEN && e->w[c->peer].cfg.track != 2))) {
            pkd_set_err(err, errlen, "worker %d: peer %d must be a receiving worker of this engine (or a "
                    "bidirectional generator)", i, c->peer);
            return -1;
        }
        if (w->port->ip == 0) {
            pkd_set_err(err, errlen, "worker %d: port %s has no IPv4 address to send from", i, w->port->name);
            return -1;
        }
    } else if (c->role == PK_DPDK_FORWARD) {
        if (c->out_port < 0 || c->out_port >= nports || !ports[c->out_port] || c->out_port == c->port ||
            ports[c->out_port] == w->port) {
            pkd_set_err(err, errlen, "worker %d: forward: out port %d must be another port of this engine", i,
                    c->out_port);
            return -1;
        }
        w->out = ports[c->out_port];
        w->out_pid = w->out->pid;
        if (c->queue >= w->out->nq) {
            pkd_set_err(err, errlen, "worker %d: queue %u, out port %s has %u", i, c->queue, w->out->name,
                    w->out->nq);
            return -1;
        }
        if (pk_dpdk_port_busy(w->out)) {
            pkd_set_err(err, errlen, "port %s is in use by another engine", w->out->name);
            return -1;
        }
        /* one sender per tx queue: only forwarders (which send elsewhere) may poll (out, queue) */
        for (int j = 0; j < i; j++) {
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if ((o->port == c->out_port && o->queue == c->queue && o->role != PK_DPDK_FORWARD) ||
                (o->role == PK_DPDK_FORWARD && o->out_port == c->out_port && o->queue == c->queue)) {
                pkd_set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->out->name);
                return -1;
            }
        }
        if (c->with_worker >= 0) {
            if (c->with_worker >= e->n || c->with_worker == i || e->w[c->with_worker].cfg.role != PK_DPDK_FORWARD ||
                e->w[c->with_worker].cfg.with_worker >= 0) {
                pkd_set_err(err, errlen, "worker %d: with_worker %d must be another forwarder of this engine "
                        "without a guest of its own", i, c->with_worker);
                return -1;
            }
            for (int j = 0; j < e->n; j++)
                if (j != i && e->w[j].cfg.role == PK_DPDK_FORWARD && e->w[j].cfg.with_worker == c->with_worker) {
                    pkd_set_err(err, errlen, "workers %d and %d both run worker %d", j, i, c->with_worker);
                    return -1;
                }
        }
    } else if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS) {
        pkd_set_err(err, errlen, "worker %d: flows %u out of range 1..%d", i, c->flows, PK_DPDK_MAX_FLOWS);
        return -1;
    }
    if (c->role != PK_DPDK_FORWARD)
        for (int j = 0; j < i; j++) {   /* a forwarder checked before this one sends on (port, queue)? */
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if (o->role == PK_DPDK_FORWARD && o->out_port == c->port && o->queue == c->queue) {
                pkd_set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->port->name);
                return -1;
            }
        }
    return 0;
}

/* Zeroed and touched now (calloc may map lazily): no page faults in the loop. */
static void *zalloc(size_t size)
{
    size = (size + 63u) & ~(size_t)63u;
    void *p = aligned_alloc(64, size ? size : 64);
    if (p)
        memset(p, 0, size);
    return p;
}

static int alloc_worker(worker *w)
{
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role == PK_DPDK_GEN) {
        w->npattern = c->nsizes ? c->nsizes : 1;
        w->pattern = zalloc(sizeof(uint16_t) * w->npattern);
        if (!w->pattern)
            return -1;
        w->frame_len = 0;
        for (uint32_t k = 0; k < w->npattern; k++) {
            w->pattern[k] = (uint16_t)((c->nsizes ? c->sizes[k] : c->size) - FCS_LEN);
            if (w->pattern[k] > w->frame_len)
                w->frame_len = w->pattern[k];
        }
        if (c->probe_rate > 0 && c->probe_size - FCS_LEN > w->frame_len)
            w->frame_len = c->probe_size - FCS_LEN;   /* the template is all zeros past the headers */
        w->tmpl = aligned_alloc(64, (w->frame_len + 63u) & ~63u);
        w->flow_seq = zalloc(sizeof(uint64_t) * c->flows);
        if (!w->tmpl || !w->flow_seq)
            return -1;
        w->nsp = c->sports ? c->sports : c->flow_first + c->flows;
        w->ndp = c->dports ? c->dports : 1;
        w->nsi = c->src_ips ? c->src_ips : 1;
        w->ndi = c->dst_ips ? c->dst_ips : 1;
        w->src_h = rte_be_to_cpu_32(w->port->ip);
        w->dst_h = rte_be_to_cpu_32(c->dst_ip);
        gen_flow_set(w, c->flow_first);
        w->wrap[0] = w->dsp;
        w->wrap[1] = w->ddp;
        w->wrap[2] = w->dsi;
        w->wrap[3] = w->ddi;
        gen_template(w);
    }
    return 0;
}

static int tracks(const pk_dpdk_worker_cfg *c)
{
    return c->role == PK_DPDK_RXONLY || (c->role == PK_DPDK_GEN && c->track);
}

/* One flow table per port, shared by the port's receiving workers: a flow comes
 * in on one queue (RSS hashes its tuple; a ring or memif queue carries one
 * generator's flows), so every entry has one writer. */
static int alloc_flow_tables(pk_dpdk_engine *e)
{
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (!tracks(&w->cfg) || w->flows)
            continue;
        uint32_t n = 0;
        for (int j = i; j < e->n; j++)
            if (tracks(&e->w[j].cfg) && e->w[j].port == w->port) {
                const pk_dpdk_worker_cfg *c = &e->w[j].cfg;
                uint32_t top = c->role != PK_DPDK_GEN ? c->flows : c->track == 1 ? c->flow_first + c->flows : 0;
                n = top > n ? top : n;
            }
        for (int j = 0; j < e->n; j++) {   /* generators sending into this port */
            const pk_dpdk_worker_cfg *c = &e->w[j].cfg;
            if (c->role == PK_DPDK_GEN && c->peer >= 0 && e->w[c->peer].port == w->port &&
                c->flow_first + c->flows > n)
                n = c->flow_first + c->flows;
        }
        flow_state *t = zalloc(sizeof(flow_state) * ((size_t)n + PK_DPDK_MAX_QUEUES));
        if (!t)
            return -1;
        w->owns_flows = 1;
        for (int j = i; j < e->n; j++)
            if (tracks(&e->w[j].cfg) && e->w[j].port == w->port) {
                e->w[j].flows = t;
                e->w[j].nflows = n;
            }
    }
    return 0;
}

pk_dpdk_engine *pk_dpdk_create(pk_dpdk_port *const *ports, int nports,
                               const pk_dpdk_worker_cfg *cfgs, int n, char *err, size_t errlen)
{
    if (pkd_need_pool(err, errlen) != 0)
        return NULL;
    if (n <= 0 || n > PK_DPDK_MAX_WORKERS) {
        pkd_set_err(err, errlen, "between 1 and %d workers, not %d", PK_DPDK_MAX_WORKERS, n);
        return NULL;
    }
    pk_dpdk_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    e->w = aligned_alloc(64, sizeof(worker) * (size_t)n);
    if (!e->w) {
        free(e);
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(e->w, 0, sizeof(worker) * (size_t)n);
    e->n = n;
    for (int i = 0; i < n; i++) {
        e->w[i].cfg = cfgs[i];
        e->w[i].engine = e;
    }
    for (int i = 0; i < n; i++) {
        if (check_worker(e, ports, nports, i, err, errlen) != 0) {
            e->n = 0;  /* no port is marked busy yet */
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i <= n; i++) {
        if (i < n ? alloc_worker(&e->w[i]) != 0 : alloc_flow_tables(e) != 0) {
            pkd_set_err(err, errlen, "worker %d: out of memory", i);
            for (int j = 0; j < n; j++)
                e->w[j].port = e->w[j].out = NULL;
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {   /* frames longer than a standard mbuf: one jumbo mbuf each */
        worker *w = &e->w[i];
        w->gpool = pkd_pool;
        if (w->cfg.role == PK_DPDK_GEN && w->frame_len > RTE_MBUF_DEFAULT_DATAROOM) {
            if (pkd_need_jumbo_pool(err, errlen) != 0) {
                for (int j = 0; j < n; j++)
                    e->w[j].port = e->w[j].out = NULL;
                pk_dpdk_destroy(e);
                return NULL;
            }
            w->gpool = pkd_jumbo_pool;
        }
    }
    for (int i = 0; i < n; i++) {
        e->w[i].nic_owner = 1;
        for (int j = 0; j < i; j++)
            if (e->w[j].port == e->w[i].port)
                e->w[i].nic_owner = 0;
    }
    for (int i = 0; i < n; i++)
        if (e->w[i].cfg.role == PK_DPDK_FORWARD && e->w[i].cfg.with_worker >= 0) {
            e->w[i].guest = &e->w[e->w[i].cfg.with_worker];
            e->w[i].guest->hosted = 1;
        }
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&e->w[i].port->busy, 1, __ATOMIC_RELEASE);
        if (e->w[i].out)
            __atomic_store_n(&e->w[i].out->busy, 1, __ATOMIC_RELEASE);
    }
    return e;
}

int pk_dpdk_start(pk_dpdk_engine *e, char *err, size_t errlen)
{
    for (int i = 0; i < e->n; i++)
        if (e->w[i].started || e->w[i].running || e->settled) {
            pkd_set_err(err, errlen, "this engine has already run; make a new one");
            return -1;
        }
    pkd_timebase_now(&e->tb);
    for (int i = 0; i < e->n; i++) {   /* no ARP answer from an earlier run counts */
        pk_dpdk_port *p = e->w[i].port;
        p->arp_ip = 0;
        p->arp_claim = p->arp_done = 0;
    }
    uint64_t longest = 0, arp = 0;
    for (int i = 0; i < e->n; i++) {
        const pk_dpdk_worker_cfg *c = &e->w[i].cfg;
        if (c->duration_ns > longest)
            longest = c->duration_ns;
        if (c->role == PK_DPDK_GEN && !c->dst_mac_set && c->peer < 0)
            arp = PK_DPDK_ARP_NS;
    }
    e->hard_end = rte_rdtsc() + tb_cycles(&e->tb, longest + arp + PK_DPDK_DRAIN_NS);
    for (int i = 0; i < e->n; i++)   /* run by another worker's thread: running until it ends */
        if (e->w[i].hosted)
            e->w[i].running = 1;
    /* the port-wide NIC counters' base, before any worker sends: a thread that starts late
     * must not miss what another queue's worker already made the PMD count */
    for (int i = 0; i < e->n; i++)
        pkd_read_nic(&e->w[i], rte_rdtsc(), 1);
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->hosted)
            continue;
        w->running = 1;
        worker_polls(w, 1);
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            worker_polls(w, 0);
            w->running = 0;
            for (int j = 0; j < e->n; j++)   /* guests of threads that never started */
                if (e->w[j].guest && !e->w[j].started)
                    e->w[j].guest->running = 0;
            pkd_set_err(err, errlen, "worker %d: pthread_create: %s", i, strerror(rc));
            pk_dpdk_stop(e);
            pk_dpdk_join(e);
            return -1;
        }
        w->started = 1;
    }
    return 0;
}

void pk_dpdk_stop(pk_dpdk_engine *e)
{
    __atomic_store_n(&e->stop, 1, __ATOMIC_RELAXED);
}

int pk_dpdk_running(const pk_dpdk_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += __atomic_load_n(&e->w[i].running, __ATOMIC_ACQUIRE);
    return n;
}

/* What was sent per flow id into the table of port p: generators whose peer is
 * on p, or that track their own frames coming back to p. NULL: no sender here. */
static uint64_t *sent_into(const pk_dpdk_engine *e, const pk_dpdk_port *p, uint32_t nflows)
{
    uint64_t *sent = NULL;
    for (int j = 0; j < e->n; j++) {
        const worker *g = &e->w[j];
        const pk_dpdk_worker_cfg *c = &g->cfg;
        if (c->role != PK_DPDK_GEN || !g->flow_seq)
            continue;
        int into = c->track == 1 ? g->port == p : (c->peer >= 0 && e->w[c->peer].port == p);
        if (!into)
            continue;
        if (!sent && !(sent = calloc((size_t)nflows + PK_DPDK_MAX_QUEUES, sizeof(uint64_t))))
            return NULL;
        for (uint32_t f = 0; f < c->flows && c->flow_first + f < nflows; f++)
            sent[c->flow_first + f] += g->flow_seq[f];
        sent[nflows + g->queue] += g->probe_seq;
    }
    return sent;
}

void pk_dpdk_join(pk_dpdk_engine *e)
{
    int joined = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->w[i].started) {
            pthread_join(e->w[i].thread, NULL);
            e->w[i].started = 0;
            joined = 1;
        }
    }
    if (e->settled || !joined)
        return;
    /* the port-wide NIC counters once more, now that every queue's worker has stopped */
    for (int i = 0; i < e->n; i++)
        if (e->w[i].nic_owner && !e->w[i].err[0])
            pkd_read_nic(&e->w[i], rte_rdtsc(), 0);
    /* settle loss once: what the sender sent and never arrived, per flow */
    e->settled = 1;
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (!w->owns_flows)
            continue;
        uint64_t *sent = sent_into(e, w->port, w->nflows);
        uint64_t lost = 0;
        for (uint32_t f = 0; f < w->nflows + PK_DPDK_MAX_QUEUES; f++)
            lost += pk_seq_settle(&w->flows[f], sent ? sent[f] : 0);
        free(sent);
        if (lost)
            pk_add(&w->c, PK_seq_lost, lost);   /* on the table's first worker */
    }
}

void pk_dpdk_snapshot(const pk_dpdk_engine *e, int i, uint64_t *counters, uint64_t *hist)
{
    if (i < 0 || i >= e->n)
        return;
    const worker *w = &e->w[i];
    for (int k = 0; k < PK_NCOUNTERS; k++)
        counters[k] = pk_read(&w->c, (enum pk_counter_id)k);
    if (hist)
        for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
            hist[k] = __atomic_load_n(&w->hist.b[k], __ATOMIC_RELAXED);
}

int pk_dpdk_flow_sent(const pk_dpdk_engine *e, int i, uint64_t *out, uint32_t n)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_GEN || !e->w[i].flow_seq)
        return 0;
    const worker *w = &e->w[i];
    uint32_t k = n < w->cfg.flows ? n : w->cfg.flows;
    for (uint32_t f = 0; f < k; f++)
        out[f] = __atomic_load_n(&w->flow_seq[f], __ATOMIC_RELAXED);
    return (int)k;
}

int pk_dpdk_dst_mac(const pk_dpdk_engine *e, int i, uint8_t mac[6])
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_GEN)
        return -1;
    memcpy(mac, e->w[i].dst_mac, 6);
    return e->w[i].dst_broadcast;
}

int pk_dpdk_settle_remote(pk_dpdk_engine *e, int i, const uint64_t *sent, uint32_t n)
{
    if (i < 0 || i >= e->n || !e->settled || !e->w[i].owns_flows)
        return -1;
    worker *w = &e->w[i];
    uint64_t lost = 0;
    for (uint32_t f = 0; f < n && f < w->nflows; f++)
        if (sent[f] > w->flows[f].next) {   /* the window's gaps were settled at join */
            lost += sent[f] - w->flows[f].next;
            w->flows[f].next = sent[f];
        }
    if (lost)
        pk_add(&w->c, PK_seq_lost, lost);
    return 0;
}

void pk_dpdk_probe_hist(const pk_dpdk_engine *e, int i, uint64_t *hist)
{
    if (i < 0 || i >= e->n)
        return;
    for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
        hist[k] = __atomic_load_n(&e->w[i].probe_hist.b[k], __ATOMIC_RELAXED);
}

const char *pk_dpdk_error(const pk_dpdk_engine *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->w[i].err[0])
            return e->w[i].err;
    return NULL;
}

void pk_dpdk_destroy(pk_dpdk_engine *e)
{
    if (!e)
        return;
    pk_dpdk_stop(e);
    pk_dpdk_join(e);
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->port)
            __atomic_store_n(&w->port->busy, 0, __ATOMIC_RELEASE);
        if (w->out)
            __atomic_store_n(&w->out->busy, 0, __ATOMIC_RELEASE);
        free_frames(w->pend, w->npend);
        free(w->tmpl);
        free(w->pattern);
        free(w->flow_seq);
        if (w->owns_flows)
            free(w->flows);
    }
    free(e->w);
    free(e);
}
