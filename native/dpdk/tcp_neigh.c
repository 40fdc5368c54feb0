/* Neighbours: ARP (IPv4) and, over IPv6, Neighbor Discovery and ICMPv6 echo. */
#include "tcp_internal.h"

int tcp_my_addr(const pk_tcp_engine *e, uint32_t ip_net)
{
    if (e->cfg.ipv6)
        return 0;                   /* an IPv6 engine has no IPv4 address */
    if (ip_net == e->cfg.ip || (e->cfg.vxlan && ip_net == e->cfg.vtep_local))
        return 1;
    uint32_t h = rte_be_to_cpu_32(ip_net), slot;
    for (int k = 0; k < e->cfg.nown; k++)
        if (h - e->cfg.own_first[k] < e->cfg.own_num[k])
            return 1;
    return e->cfg.role == PK_TCP_CLIENT && tcp_ip_slot(e, rte_be_to_cpu_32(ip_net), &slot) == 0;
}

int tcp_handle_arp(pk_tcp_engine *e, uint8_t *d, uint32_t len, uint32_t l2)
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
    if (e->cfg.role == PK_TCP_SERVER && !e->peer_mac_ok && !e->cfg.vxlan) {   /* vxlan: the outer source's */
        memcpy(e->peer_mac, arp + 8, 6);
        e->peer_mac_ok = 1;
    }
    if (op != 1 || !tcp_my_addr(e, tpa))
        return 0;
    wr16(arp + 6, 2);
    memcpy(arp + 18, arp + 8, 6);
    memcpy(arp + 24, &spa, 4);
    memcpy(arp + 8, e->mac, 6);
    memcpy(arp + 14, &tpa, 4);
    memcpy(d, arp + 18, 6);
    memcpy(d + 6, e->mac, 6);
    cnt(e, PK_arp_tx);
    return 1;
}

void tcp_send_arp_request(pk_tcp_engine *e)
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
    cnt(e, PK_arp_tx);
    tx_put_raw(e, m);               /* the gateway is a neighbour of the port: never encapsulated */
}

int tcp_my_addr6(const pk_tcp_engine *e, const uint8_t *a)
{
    if (memcmp(a, e->cfg.ip6, 16) == 0)
        return 1;
    for (int k = 0; k < e->cfg.nown; k++)
        if (memcmp(a, e->cfg.own6_hi[k], 12) == 0 && rd32(a + 12) - e->cfg.own_first[k] < e->cfg.own_num[k])
            return 1;
    uint32_t slot;
    return e->cfg.role == PK_TCP_CLIENT && memcmp(a, e->cfg.client6_hi, 12) == 0 &&
           tcp_ip_slot(e, rd32(a + 12), &slot) == 0;
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
    cnt(e, PK_icmp_tx);
    tx_put(e, m);
}

/* CLIENT: a Neighbor Solicitation for the gateway, to its solicited-node group. */
void tcp_send_ns(pk_tcp_engine *e)
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
int tcp_handle_icmp6(pk_tcp_engine *e, struct rte_mbuf *m, uint8_t *d, uint32_t l2, uint8_t *ip, uint8_t *ic,
                     uint32_t plen)
{
    if (plen < 8 || fold(sum16(ic, plen, sum16(ip + 8, 32, ph6_tail(plen, 58)))) != 0xffff) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    cnt(e, PK_icmp_rx);
    uint8_t type = ic[0];
    if (type == 128) {              /* echo request */
        if (ic[1] != 0 || !tcp_my_addr6(e, ip + 24))
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
        cnt(e, PK_icmp_tx);
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
    if (!tcp_my_addr6(e, target) || (!to_group && memcmp(dst, target, 16) != 0))
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
