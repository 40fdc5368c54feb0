/* dperf's vxlan (RFC 7348): every frame out in outer Ethernet/IPv4/UDP/VXLAN headers, and
 * only VXLAN frames to this queue's VTEP with its VNI in (their inner frame handled as any
 * other). The port's own neighbours stay outside the tunnel: ARP for the gateway and for the
 * port's addresses, and ping to them, go plain. Outer UDP checksum 0 (legal over IPv4). */
#include "tcp_internal.h"

#define OUT_IP 14                   /* the outer IPv4 header, after the outer Ethernet one */

/* Outer headers before the inner frame m holds; 0 when the mbuf has no headroom for them.
 * The inner Ethernet addresses are the file's (dperf: every inner frame from innerSMAC to
 * innerDMAC), whatever the frame was built or answered with. */
int tcp_vxlan_encap(pk_tcp_engine *e, struct rte_mbuf *m)
{
    static const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    uint32_t inner = rte_pktmbuf_pkt_len(m);
    if (inner + PK_VXLAN_HDRS - OUT_IP > 0xffff)
        return 0;
    uint8_t *o = (uint8_t *)rte_pktmbuf_prepend(m, PK_VXLAN_HDRS);
    if (!o)
        return 0;
    uint8_t *in = o + PK_VXLAN_HDRS;
    memcpy(in, e->cfg.inner_dmac, 6);
    memcpy(in + 6, e->cfg.inner_smac, 6);
    const uint8_t *dst = e->cfg.role == PK_TCP_CLIENT ? e->cfg.gateway_mac : e->peer_mac_ok ? e->peer_mac : bcast;
    memcpy(o, dst, 6);
    memcpy(o + 6, e->mac, 6);
    wr16(o + 12, 0x0800);
    uint8_t *ip = o + OUT_IP;
    ip[0] = 0x45;
    ip[1] = 0;
    wr16(ip + 2, (uint16_t)(PK_VXLAN_HDRS - OUT_IP + inner));
    wr16(ip + 4, 0);
    wr16(ip + 6, 0x4000);           /* DF: a VTEP does not fragment (RFC 7348 4.3) */
    ip[8] = 64;
    ip[9] = 17;
    ip[10] = ip[11] = 0;
    memcpy(ip + 12, &e->cfg.vtep_local, 4);
    memcpy(ip + 16, &e->cfg.vtep_remote, 4);
    uint16_t c = (uint16_t)~fold(sum16(ip, IP_LEN, 0));
    memcpy(ip + 10, &c, 2);
    uint8_t *u = ip + IP_LEN;
    wr16(u, (uint16_t)(PK_VXLAN_SPORT + e->cfg.queue));
    wr16(u + 2, PK_VXLAN_PORT);
    wr16(u + 4, (uint16_t)(16 + inner));
    wr16(u + 6, 0);
    u[8] = 0x08;                    /* I: the VNI is valid */
    u[9] = u[10] = u[11] = 0;
    wr32(u + 12, e->cfg.vni << 8);
    m->ol_flags = 0;
    return 1;
}

/* A frame from the port with vxlan: 0 = free it, 1 = its inner frame became a reply (send it
 * encapsulated), 2 = an outer ARP or ping reply (send it as it is). Every outer byte is
 * checked before it is read; a VXLAN datagram to our VTEP that fails (cut, bad UDP sum,
 * no I flag, another VNI) counts in vxlan_drop, a malformed outer header in bad_rx. */
int tcp_vxlan_frame(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (len < ETH_LEN || m->nb_segs != 1) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint16_t type = rd16(d + 12);
    if (type == 0x0806)             /* the port's neighbours: plain ARP */
        return tcp_handle_l2(e, m, now) ? 2 : 0;
    if (type != 0x0800) {
        cnt(e, PK_other_rx);
        return 0;
    }
    if (len < ETH_LEN + IP_LEN) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint8_t *ip = d + ETH_LEN;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    uint32_t tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || ETH_LEN + ihl > len || tot < ihl || ETH_LEN + tot > len ||
        fold(sum16(ip, ihl, 0)) != 0xffff) {
        cnt(e, PK_bad_rx);
        return 0;
    }
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
    uint8_t *u = ip + ihl;
    uint32_t l4len = tot - ihl;
    int vx = ip[9] == 17 && dst == e->cfg.vtep_local && (rd16(ip + 6) & 0x3fff) == 0 && l4len >= 8 &&
             rd16(u + 2) == PK_VXLAN_PORT;
    if (!vx) {                      /* not the tunnel: ping to the port's addresses, else other */
        if (ip[9] == 1)
            return tcp_handle_l2(e, m, now) ? 2 : 0;
        cnt(e, PK_other_rx);
        return 0;
    }
    uint32_t ulen = rd16(u + 4);
    if (ulen < 8 + 8 + ETH_LEN || ulen > l4len) {
        cnt(e, PK_vxlan_drop);
        return 0;
    }
    if (rd16(u + 6) != 0) {         /* a sum, when the sender gave one (a kernel peer: maybe only its pseudo header's) */
        uint8_t ph[12];
        memcpy(ph, ip + 12, 8);
        ph[8] = 0;
        ph[9] = 17;
        wr16(ph + 10, (uint16_t)ulen);
        uint64_t pseudo = sum16(ph, 12, 0);
        uint16_t field;
        memcpy(&field, u + 6, 2);
        if (fold(sum16(u, ulen, pseudo)) != 0xffff && !(e->kernel && field == fold(pseudo))) {
            cnt(e, PK_vxlan_drop);
            return 0;
        }
    }
    const uint8_t *h = u + 8;
    if (!(h[0] & 0x08) || (rd32(h + 4) >> 8) != e->cfg.vni) {
        cnt(e, PK_vxlan_drop);
        return 0;
    }
    if (e->cfg.role == PK_TCP_SERVER) {   /* answers go back through the neighbour this came from */
        memcpy(e->peer_mac, d + 6, 6);
        e->peer_mac_ok = 1;
    }
    uint32_t off = ETH_LEN + ihl + 16, inner = ulen - 16;
    rte_pktmbuf_adj(m, (uint16_t)off);
    if (rte_pktmbuf_data_len(m) > inner)   /* the outer frame's padding */
        rte_pktmbuf_trim(m, (uint16_t)(rte_pktmbuf_data_len(m) - inner));
    if (!tcp_handle_l2(e, m, now))
        return 0;
    uint8_t *f = rte_pktmbuf_mtod(m, uint8_t *);
    if (rd16(f + 12) == 0x0806)     /* an inner ARP reply: its sender is innerSMAC */
        memcpy(f + ETH_LEN + 8, e->cfg.inner_smac, 6);
    return 1;
}
