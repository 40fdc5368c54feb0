/* perfkit's DPDK engine: ICMP echo, answered for the port's address (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

/* An IPv4 frame's ICMP (ip: its checked header of ihl bytes, tot bytes in all; l4room: the
 * bytes of ICMP in the first segment): an echo request for the port's address is answered in
 * place (ACT_REPLY). */
int pkd_handle_icmp(worker *w, struct rte_mbuf *m, uint8_t *ip, uint32_t ihl, uint32_t tot,
                    uint32_t l4room, rx_acc *a)
{
    uint8_t *d = ip - ETH_LEN, *l4 = ip + ihl;
    const uint32_t l4len = tot - ihl, me = w->port->ip;
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
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
    swap_eth_ip4(d, ip);
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
