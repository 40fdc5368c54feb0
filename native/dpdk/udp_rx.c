/* perfkit's DPDK engine: the receive path (parse, count, per-flow sequence and latency,
 * answer, reflect) and the receiving roles: rxonly and reverse (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <unistd.h>

/* ------------------------------------------------------------ accounting */

static inline void record_latency(worker *w, uint64_t lat, uint64_t *last_lat)
{
    pk_record_latency(&w->c, &w->hist, &w->lat_min, lat, last_lat);
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
        if (now_ns >= h.tx_ns)
            pk_lat_sample(&w->c, &w->probe_hist, &w->probe_min, now_ns - h.tx_ns, PK_LAT_PROBE);
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
void pkd_l4_csum_finish(const uint8_t *ip, uint8_t *l4, uint32_t len, uint8_t proto)
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
        return pkd_handle_arp(w, d, len, a);
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
            uint8_t t2[2];
            swap_eth_ip4(d, ip);
            memcpy(t2, l4, 2); memcpy(l4, l4 + 2, 2); memcpy(l4 + 2, t2, 2);
            /* swaps keep both checksums: the sums are the same */
            if (w->port->kernel && ulen <= l4room)
                pkd_l4_csum_finish(ip, l4, ulen, 17);
            return ACT_REFLECT;
        }
        return ACT_FREE;
    }
    if (proto == 6) {
        a->tcp++;
        return ACT_FREE;
    }
    if (proto == 1)
        return pkd_handle_icmp(w, m, ip, ihl, tot, l4room, a);
    a->other++;
    return ACT_FREE;
}

/* One rx burst: count, parse, answer, reflect. Returns frames received. */
uint32_t pkd_rx_service(worker *w)
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
        /* a tx port of its own (BiTester's -t): its MAC as source, the next hop's as destination */
        if (w->out)
            for (uint32_t i = 0; i < nrefl; i++) {
                uint8_t *d = rte_pktmbuf_mtod(refl[i], uint8_t *);
                memcpy(d + 6, w->out->mac, 6);
                if (w->cfg.dst_mac_set)
                    memcpy(d, w->cfg.dst_mac, 6);
            }
        /* the lengths were taken before: once sent, a frame belongs to the receiver */
        uint16_t k = rte_eth_tx_burst(w->out ? w->out_pid : w->pid, w->queue, refl, (uint16_t)nrefl);
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

/* ----------------------------------------------------- receive roles */

void pkd_run_rx(worker *w)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const uint64_t start = rte_rdtsc(), own_end = start + tb_cycles(tb, w->cfg.duration_ns);
    uint64_t last_rx = 0, done_at = 0;
    uint32_t idle = 0;
    int paused = 0;
    double cap = w->cfg.rx_cap;        /* the rx_cap test hook: frames/s from cap_t0 on */
    uint64_t cap_t0 = start, cap_rx0 = 0;
    uint32_t cap_seen = 0;
    w->wall0 = start;
    w->last_flush = start;
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        uint32_t moved = pkd_rx_service(w);
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
        /* the test hook: a receiver of known capacity waits while it is ahead of rx_cap */
        if (__builtin_expect(__atomic_load_n(&w->ctl_gen, __ATOMIC_ACQUIRE) != cap_seen, 0)) {
            cap_seen = __atomic_load_n(&w->ctl_gen, __ATOMIC_ACQUIRE);
            __atomic_load(&w->ctl_rate, &cap, __ATOMIC_RELAXED);   /* counted from now */
            cap_t0 = t1;
            cap_rx0 = pk_read(&w->c, PK_pkts_rx);
        }
        if (cap > 0) {
            const double ahead = (double)(pk_read(&w->c, PK_pkts_rx) - cap_rx0) -
                                 cap * (double)(t1 - cap_t0) / (double)tb->hz;
            if (ahead < -(256 + cap / 50)) {   /* at most 20 ms of capacity saved up while frames came slower */
                cap_t0 = t1;
                cap_rx0 = pk_read(&w->c, PK_pkts_rx);
            }
        }
        while (moved && cap > 0 && !stopping(w) && rte_rdtsc() < hard &&
               (double)(pk_read(&w->c, PK_pkts_rx) - cap_rx0) > cap * (double)(rte_rdtsc() - cap_t0) / (double)tb->hz)
            usleep(200);
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
