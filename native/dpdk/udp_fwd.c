/* perfkit's DPDK engine: the forwarder between two ports, testpmd's io and mac forward
 * (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

/* pkd_l4_csum_finish (udp_rx.c) for a frame a forwarder passes on from a kernel port: IPv4
 * (no fragment) UDP or TCP, the whole datagram in the first segment; anything else is left
 * as it is. */
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
            pkd_l4_csum_finish(ip, l4, ulen, 17);
    } else if (ip[9] == 6 && l4len >= 20) {
        pkd_l4_csum_finish(ip, l4, l4len, 6);
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
void pkd_run_fwd(worker *w)
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
        round_done(w, moved, t0, t1, &idle);
        housekeeping(w, t1, flush_c, nic_c);
        if (g && t1 - g->last_nic >= nic_c)
            pkd_read_nic(g, t1, 0);
        if (t1 >= hard || t1 >= own_end || stopping(w))
            break;
    }
}
