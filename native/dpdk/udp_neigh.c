/* perfkit's DPDK engine: ARP, answered for the port's address and asked for a generator's
 * destination (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#define ARP_RETRY_NS    200000000ull /* a generator re-sends its ARP request this often */

/* ARP: answer requests for the port's address; a resolving generator takes the
 * reply for its destination. */
int pkd_handle_arp(worker *w, uint8_t *d, uint32_t len, rx_acc *a)
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
void pkd_gen_resolve(worker *w)
{
    const timebase *tb = &w->engine->tb;
    if (w->cfg.dst_mac_set) {
        memcpy(w->dst_mac, w->cfg.dst_mac, 6);
        w->resolved = 1;
        return;
    }
    if (w->cfg.peer >= 0 && !w->cfg.peer_back) {
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
        pkd_rx_service(w);
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
