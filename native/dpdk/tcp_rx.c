/* Receive: a burst of frames, Ethernet (802.1Q), IPv4 and IPv6 headers checked, to TCP or ICMP
 * (with vxlan, tcp_vxlan.c takes the outer headers off first). */
#include "tcp_internal.h"
#include "tcp_counts.h"

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

/* A segment whose headers and checksum passed, to the state machine when it is to one of
 * our addresses (mine), else dropped. sa, da: its addresses of alen bytes in the packet. */
static inline void seg_in(pk_tcp_engine *e, int mine, const uint8_t *sa, const uint8_t *da, uint32_t alen,
                          const uint8_t *d, const uint8_t *l4, uint32_t doff, uint32_t len, uint64_t now)
{
    cnt(e, PK_tcp_rx);
    if (!mine) {
        cnt(e, PK_tcp_drop);
        return;
    }
    seg g;
    g.sip = rd32(sa + alen - 4);
    g.dip = rd32(da + alen - 4);
    g.sa = sa;
    g.da = da;
    tcp_in(e, &g, d, l4, doff, len, now);
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
    count_tos(e, ip6_tclass(ip));
    uint8_t nh;
    uint32_t xlen;                  /* extension headers' bytes: the upper layer has plen - xlen */
    int walk = pk_ip6_walk(ip, plen, &nh, &xlen);
    if (walk != PK_IP6_UPPER) {
        cnt(e, walk == PK_IP6_BAD ? PK_bad_rx : PK_other_rx);
        return 0;
    }
    plen -= xlen;
    if (nh == 58)
        return tcp_handle_icmp6(e, m, d, l2, ip, ip + IP6_LEN + xlen, plen);
    if (nh == 17) {
        cnt(e, PK_udp_rx);
        if (e->cfg.udp)
            tcp_udp_in(e, ip + 8, ip + 24, 16, ip + IP6_LEN + xlen, plen, sum16(ip + 8, 32, 0), now);
        else
            cnt(e, PK_udp_drop);    /* no UDP sockets in TCP mode: dropped, as dperf counts it */
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
    seg_in(e, tcp_my_addr6(e, ip + 24), ip + 8, ip + 24, 16, d, l4, doff, plen, now);
    return 0;
}

/* An Ethernet frame (with vxlan: the inner one); 1 when it was turned into a reply (send it),
 * 0 = free it. */
int tcp_handle_l2(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now)
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
        return tcp_handle_arp(e, d, len, l2);
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
    count_tos(e, ip[1]);
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
        if (l4[0] != 8 || l4[1] != 0 || !tcp_my_addr(e, dst))
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
        cnt(e, PK_icmp_tx);
        return 1;
    }
    if (ip[9] == 17) {
        cnt(e, PK_udp_rx);
        if (e->cfg.udp)
            tcp_udp_in(e, ip + 12, ip + 16, 4, l4, l4len, sum16(ip + 12, 8, 0), now);
        else
            cnt(e, PK_udp_drop);
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
    seg_in(e, tcp_my_addr(e, dst), ip + 12, ip + 16, 4, d, l4, doff, l4len, now);
    return 0;
}

/* A frame from the port: 0 = free it, 1 = send the reply it became (with vxlan: encapsulated),
 * 2 = send it as it is (vxlan: an outer ARP or ping reply). */
int tcp_handle_frame(pk_tcp_engine *e, struct rte_mbuf *m, uint64_t now)
{
    return e->cfg.vxlan ? tcp_vxlan_frame(e, m, now) : tcp_handle_l2(e, m, now);
}

/* One receive burst, handled; returns its frames. */
uint16_t tcp_rx_burst(pk_tcp_engine *e, uint64_t now)
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
        int r = tcp_handle_frame(e, m[i], now);
        if (r == 1)
            tx_put(e, m[i]);
        else if (r == 2)
            tx_put_raw(e, m[i]);
        else
            done[nd++] = m[i];
    }
    if (nd)
        rte_pktmbuf_free_bulk(done, nd);
    return n;
}
