/* The DPDK TCP engine's receive path under ASan + UBSan, outside Python (issue 6: every packet
 * bounds-checked, IPv6 and IPv4).
 *
 * Linked with the engine's units (native/dpdk/tcp_*.c), it feeds their real tcp_handle_frame()
 * frames that are each in a heap block of exactly their length (a fake mbuf points at it), so
 * any read past a frame is an ASan report. Four engines (server and client, IPv6 and IPv4) on net_null
 * ports, built by pk_tcp_create as in production but not started: this thread plays the
 * worker. Frames are random but shaped: Ethernet (sometimes 802.1Q), IPv6 or IPv4 with
 * random lengths, TCP with random flags/offsets/options/payload, ICMPv6 echo and Neighbor
 * Discovery with random options; most carry valid checksums (so parsing goes deep), some
 * hit a live socket in sequence (handshakes, HTTP bytes), some are cut anywhere. Timers
 * are run with a clock jumped ahead now and then (retransmissions, give-ups).
 *
 *   tcp_frame_fuzz ITERATIONS SEED
 * With vxlan (two more IPv4 engines) most frames are those in outer VXLAN headers, shaped the same way.
 * prints "frames N bad B tcp T icmp I replies R opened O ..." per engine; exits 3 when the
 * engine's counters do not add up (every frame is counted exactly once as received).
 */
#include "tcp_internal.h"

#include <inttypes.h>
#include <unistd.h>

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}
static int chance(int pct) { return (int)(rnd() % 100) < pct; }

static const uint8_t SRV6[16] = { 0x20, 0x01, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2 };
static const uint8_t CLI6[16] = { 0x20, 0x01, 0, 2, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1 };
#define SRV4 0xc6120002u            /* 198.18.0.2 */
#define CLI4 0xc6120001u

typedef struct fz {
    pk_tcp_engine *e;
    int v6, server;
    int udp;                        /* protocol udp (tcp_udp.c): the layer-4 body is mostly UDP */
    int vx;                         /* vxlan (tcp_vxlan.c): most frames in outer headers, shaped as above */
    uint64_t frames, replies;
    uint64_t ext, ext_deep;         /* IPv6 frames with extension headers; those counted as TCP or ICMPv6 */
    int last_ext;                   /* the frame make_frame() built last has some */
} fz;

/* The address of the side a frame comes from (the peer) or goes to (the engine), with a
 * random neighbour now and then. */
static void addr(const fz *z, int engine_side, uint8_t *out)
{
    int srv_addr = engine_side ? z->server : !z->server;
    if (z->v6) {
        memcpy(out, srv_addr ? SRV6 : CLI6, 16);
        if (chance(10))
            out[15] = (uint8_t)rnd();
        if (chance(3))
            out[rnd() % 16] ^= (uint8_t)(1u << (rnd() % 8));
    } else {
        uint32_t a = srv_addr ? SRV4 : CLI4;
        if (chance(10))
            a = (a & ~0xffu) | (rnd() & 0xff);
        wr32(out, a);
    }
}

static uint32_t put_http(uint8_t *p, uint32_t room, int server)
{
    static const char *const srv_bits[] = { "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "POST /a HTTP/1.1\r\n",
                                            "X: y\r\n", "\r\n", "\r\n\r\n" };
    static const char *const cli_bits[] = { "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                                            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                                            "5\r\nhello\r\n", "0\r\n\r\n", "Content-Length: 99999999999\r\n",
                                            "HTTP/1.0 404 x\r\ncontent-length:0\r\n\r\n", "zz\r\n", "\r\n" };
    uint32_t n = 0;
    int k = 1 + (int)(rnd() % 4);
    for (int i = 0; i < k; i++) {
        const char *b = server ? srv_bits[rnd() % 5] : cli_bits[rnd() % 8];
        uint32_t l = (uint32_t)strlen(b);
        if (n + l > room)
            break;
        memcpy(p + n, b, l);
        n += l;
    }
    return n;
}

/* One frame into f (room 4096); returns its length. */
static uint32_t make_inner(fz *z, uint8_t *f);

#define VTEP_SRV 0xc6120102u        /* 198.18.1.2: the server engine's local VTEP */
#define VTEP_CLI 0xc6120101u
#define FUZZ_VNI 0x123456u

/* A frame; with vxlan, most are the inner frame in outer Ethernet/IPv4/UDP/VXLAN headers,
 * mostly right (to the engine's VTEP, port 4789, its VNI, the I flag, lengths and sums), each
 * field now and then wrong, the whole cut anywhere now and then. */
static uint32_t make_frame(fz *z, uint8_t *f)
{
    if (!z->vx || chance(8))
        return make_inner(z, f);
    const uint32_t H = PK_VXLAN_HDRS;
    uint32_t n = make_inner(z, f + H);
    memcpy(f, z->e->mac, 6);
    for (int i = 6; i < 12; i++)
        f[i] = (uint8_t)rnd();
    wr16(f + 12, chance(97) ? 0x0800 : chance(50) ? 0x0806 : (uint16_t)rnd());
    uint8_t *ip = f + 14, *u = ip + IP_LEN;
    ip[0] = (uint8_t)(chance(97) ? 0x45 : rnd());
    ip[1] = 0;
    wr16(ip + 2, (uint16_t)(chance(95) ? IP_LEN + 16 + n : rnd() % 2048));
    wr16(ip + 4, 0);
    wr16(ip + 6, chance(95) ? 0x4000 : (uint16_t)rnd());
    ip[8] = 64;
    ip[9] = (uint8_t)(chance(95) ? 17 : chance(50) ? 1 : rnd());
    wr32(ip + 12, rnd());
    wr32(ip + 16, chance(95) ? (z->server ? VTEP_SRV : VTEP_CLI) : rnd());
    ip[10] = ip[11] = 0;
    if (chance(97)) {
        uint16_t c = (uint16_t)~fold(sum16(ip, IP_LEN, 0));
        memcpy(ip + 10, &c, 2);
    }
    wr16(u, (uint16_t)rnd());
    wr16(u + 2, chance(95) ? PK_VXLAN_PORT : (uint16_t)rnd());
    uint32_t ulen = chance(95) ? 16 + n : rnd() % 2048;
    wr16(u + 4, (uint16_t)ulen);
    wr16(u + 6, 0);
    u[8] = (uint8_t)(chance(95) ? 0x08 : rnd());
    u[9] = u[10] = u[11] = 0;
    wr32(u + 12, (chance(95) ? FUZZ_VNI : rnd() & 0xffffff) << 8);
    if (chance(10) && ulen <= 16 + n) {   /* a UDP sum, mostly right */
        uint8_t ph[12];
        memcpy(ph, ip + 12, 8);
        ph[8] = 0;
        ph[9] = 17;
        wr16(ph + 10, (uint16_t)ulen);
        uint16_t c = (uint16_t)~fold(sum16(u, ulen, sum16(ph, 12, 0)));
        if (chance(20))
            c ^= (uint16_t)(1 + rnd() % 0xfffe);
        memcpy(u + 6, &c, 2);
    }
    n += H;
    if (chance(5))
        n = rnd() % (n + 1);        /* cut anywhere, the outer headers too */
    return n;
}

static uint32_t make_inner(fz *z, uint8_t *f)
{
    pk_tcp_engine *e = z->e;
    uint32_t n = 0;
    if (chance(90))
        memcpy(f, e->mac, 6);
    else
        for (int i = 0; i < 6; i++)
            f[i] = (uint8_t)rnd();
    for (int i = 6; i < 12; i++)
        f[i] = (uint8_t)rnd();
    n = 12;
    uint16_t et = z->v6 ? 0x86DD : 0x0800;
    if (chance(3))
        et = chance(50) ? 0x0806 : (uint16_t)rnd();
    if (chance(4)) {
        wr16(f + n, 0x8100);
        wr16(f + n + 2, (uint16_t)(rnd() & 0xfff));
        n += 4;
    }
    wr16(f + n, et);
    n += 2;
    uint8_t *ip = f + n;
    uint32_t ipl = z->v6 ? IP6_LEN : IP_LEN;
    uint8_t src[16], dst[16];
    addr(z, 0, src);
    addr(z, 1, dst);
    int alen = z->v6 ? 16 : 4;

    /* IPv6 extension headers now and then (perfkit/ip6ext.h walks them): Hop-by-Hop (first or
     * not), Destination Options with options mostly well formed, Routing with segments left
     * or none, Fragment, an unknown type; chains up to 11 long and past 1024 bytes at times.
     * The last one's Next Header is set once the upper layer is known. */
    uint32_t xlen = 0, xlast = 0;
    uint8_t xfirst = 0;
    uint8_t *x = ip + ipl;
    z->last_ext = z->v6 && chance(20);
    if (z->last_ext) {
        static const uint8_t kinds[] = { 0, 60, 60, 60, 43, 43, 44 };
        int k = 1 + (int)(rnd() % (chance(10) ? 11 : 3));
        for (int i = 0; i < k && xlen < 1100; i++) {
            uint8_t kind = chance(97) ? kinds[rnd() % 7] : (uint8_t)rnd();
            if (i == 0)
                xfirst = kind;
            else
                x[xlast] = kind;
            uint8_t *h = x + xlen;
            uint32_t hl = 8;
            if (kind == 44) {
                wr16(h + 2, (uint16_t)(chance(50) ? rnd() % 2 : rnd()));
                wr32(h + 4, rnd());
            } else if (kind == 43) {
                h[1] = (uint8_t)(chance(80) ? 0 : rnd() % 3);
                hl = 8 + 8u * h[1];
                h[2] = (uint8_t)(rnd() % 5);
                h[3] = (uint8_t)(chance(70) ? 0 : rnd() % 3);
                for (uint32_t j = 4; j < hl; j++)
                    h[j] = (uint8_t)rnd();
            } else {                /* options */
                h[1] = (uint8_t)(chance(95) ? rnd() % 4 : 120 + rnd() % 10);
                hl = 8 + 8u * h[1];
                for (uint32_t j = 2; j < hl;) {
                    uint32_t left = hl - j;
                    int pick = (int)(rnd() % 100);
                    if (pick < 30 || left < 2) {
                        h[j++] = chance(95) ? 0 : (uint8_t)rnd();          /* Pad1 */
                        continue;
                    }
                    uint8_t t = pick < 60 ? 1 : pick < 80 ? 5 : pick < 95 ? (uint8_t)(rnd() & 0x3f) : (uint8_t)rnd();
                    uint8_t ol = (uint8_t)(chance(95) ? rnd() % (left - 1) : rnd());
                    if (ol > left - 2 && chance(90))
                        ol = (uint8_t)(left - 2);
                    h[j] = t;
                    h[j + 1] = ol;
                    for (uint32_t q = j + 2; q < hl && q < j + 2u + ol; q++)
                        h[q] = (uint8_t)rnd();
                    j += 2u + ol;
                }
            }
            xlast = xlen;
            xlen += hl;
        }
    }

    /* the layer-4 body */
    uint8_t *l4 = ip + ipl + xlen;
    uint32_t blen = 0;
    uint8_t proto = 6;
    int r = (int)(rnd() % 100);
    if (z->udp && r < 70) {         /* UDP, to a socket of the table most of the time */
        proto = 17;
        uint32_t idx = rnd() % e->nsock;
        tuple4 t;
        tcp_sock_tuple(e, idx, &t);
        if (chance(70)) {
            if (z->v6) {
                memcpy(z->server ? src : dst, e->cfg.client6_hi, 12);
                wr32((z->server ? src : dst) + 12, t.cip);
                memcpy(z->server ? dst : src, z->server ? e->cfg.ip6 : e->cfg.server_ip6, 16);
            } else {
                wr32(z->server ? src : dst, t.cip);
                memcpy(z->server ? dst : src, z->server ? &e->cfg.ip : &e->cfg.server_ip, 4);
            }
        }
        wr16(l4, z->server ? t.cport : t.sport);
        wr16(l4 + 2, z->server ? t.sport : t.cport);
        blen = 8;
        if (chance(70))
            blen += put_http(l4 + 8, 1200, z->server);
        else
            for (uint32_t k = rnd() % 100; k; k--)
                l4[blen++] = (uint8_t)rnd();
        wr16(l4 + 4, (uint16_t)(chance(90) ? blen : rnd() % (blen + 16)));
        l4[6] = l4[7] = 0;
    } else if (r < 70) {            /* TCP */
        /* a socket of the table: one opened lately (a big server table is mostly closed) */
        static uint32_t hot[16];
        uint32_t idx = chance(60) ? hot[rnd() % 16] % e->nsock : rnd() % e->nsock;
        tsock *s = &e->socks[idx];
        tuple4 t;
        tcp_sock_tuple(e, idx, &t);
        uint16_t lport = z->server ? t.cport : t.sport, rport = z->server ? t.sport : t.cport;
        uint32_t seq = rnd(), ack = rnd();
        uint8_t flags = (uint8_t)(rnd() & 0x3f);
        int live = s->state != S_CLOSED && chance(60);
        if (live) {                 /* in sequence for that socket */
            if (z->v6) {
                memcpy(z->server ? src : dst, e->cfg.client6_hi, 12);
                wr32((z->server ? src : dst) + 12, t.cip);
                memcpy(z->server ? dst : src, z->server ? e->cfg.ip6 : e->cfg.server_ip6, 16);
            } else {
                wr32(z->server ? src : dst, t.cip);
                memcpy(z->server ? dst : src, z->server ? &e->cfg.ip : &e->cfg.server_ip, 4);
            }
            seq = s->rcv_nxt - (chance(10) ? 1 : 0);
            ack = snd_next(s) - (uint32_t)(chance(20) ? rnd() % 3 : 0);
            if (s->state == S_SYN_SENT) {
                seq = rnd();
                ack = s->iss + 1;
                flags = TH_SYN | TH_ACK;
            } else {
                flags = (uint8_t)(TH_ACK | (chance(20) ? TH_FIN : 0) | (chance(5) ? TH_RST : 0) | TH_PSH);
            }
        } else if (chance(30)) {
            flags = TH_SYN;
            hot[rnd() % 16] = idx;
        }
        uint32_t opt = chance(30) ? 4 * (rnd() % 11) : 0;
        uint32_t doff = TCP_LEN + opt;
        wr16(l4, lport);
        wr16(l4 + 2, rport);
        wr32(l4 + 4, seq);
        wr32(l4 + 8, ack);
        l4[12] = (uint8_t)((chance(95) ? doff / 4 : rnd() % 16) << 4);
        l4[13] = flags;
        wr16(l4 + 14, (uint16_t)rnd());
        l4[16] = l4[17] = l4[18] = l4[19] = 0;
        for (uint32_t i = 0; i < opt; i++)
            l4[TCP_LEN + i] = chance(30) ? (uint8_t)(rnd() % 4) : (uint8_t)rnd();
        if (opt >= 4 && chance(50)) {
            l4[20] = 2;
            l4[21] = 4;
            wr16(l4 + 22, (uint16_t)rnd());
        }
        blen = doff;
        if (live || chance(30))
            blen += put_http(l4 + doff, 1200, z->server);
        else if (chance(30))
            for (uint32_t k = rnd() % 300; k; k--)
                l4[blen++] = (uint8_t)rnd();
    } else if (r < 90) {            /* ICMP(v6): echo or Neighbor Discovery */
        proto = z->v6 ? 58 : 1;
        static const uint8_t types6[] = { 128, 129, 133, 134, 135, 135, 135, 136, 136, 136 };
        l4[0] = z->v6 ? (chance(90) ? types6[rnd() % 10] : (uint8_t)rnd()) : (chance(80) ? 8 : (uint8_t)rnd());
        l4[1] = chance(90) ? 0 : (uint8_t)rnd();
        l4[2] = l4[3] = 0;
        wr32(l4 + 4, chance(80) ? 0 : rnd());
        blen = 8;
        if (z->v6 && (l4[0] == 135 || l4[0] == 136)) {
            uint8_t t[16];
            addr(z, 1, t);
            if (chance(30)) {       /* to the solicited-node group */
                static const uint8_t g[13] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff };
                memcpy(dst, g, 13);
                memcpy(dst + 13, t + 13, 3);
            }
            memcpy(l4 + 8, t, 16);
            blen = 24;
            for (int k = (int)(rnd() % 4); k > 0; k--) {   /* options, lengths in 8 bytes */
                uint8_t ol = chance(80) ? 1 : (uint8_t)(rnd() % 4);
                l4[blen] = chance(80) ? (uint8_t)(1 + rnd() % 2) : (uint8_t)rnd();
                l4[blen + 1] = ol;
                for (int i = 2; i < 8; i++)
                    l4[blen + i] = (uint8_t)rnd();
                blen += 8;
                if (ol > 1 && chance(50))
                    for (int i = 0; i < 8 * (ol - 1); i++)
                        l4[blen++] = (uint8_t)rnd();
            }
            if (chance(20))
                blen = rnd() % (blen + 1);
        } else {
            for (uint32_t k = rnd() % 64; k; k--)
                l4[blen++] = (uint8_t)rnd();
        }
    } else {                        /* anything else */
        proto = (uint8_t)(chance(30) ? 17 : chance(30) ? 0 : rnd());
        for (uint32_t k = rnd() % 64; k; k--)
            l4[blen++] = (uint8_t)rnd();
    }

    /* the IP header; lengths mostly right */
    if (xlen)
        x[xlast] = proto;
    uint32_t plen = chance(92) ? xlen + blen : rnd() % 2048;
    if (z->v6) {
        ip[0] = (uint8_t)(chance(97) ? 0x60 : rnd());
        ip[1] = ip[2] = ip[3] = 0;
        wr16(ip + 4, (uint16_t)plen);
        ip[6] = xlen ? xfirst : proto;
        ip[7] = chance(80) ? 255 : (uint8_t)rnd();
    } else {
        ip[0] = (uint8_t)(chance(97) ? 0x45 : rnd());
        ip[1] = 0;
        wr16(ip + 2, (uint16_t)(IP_LEN + plen));
        wr16(ip + 4, 0);
        wr16(ip + 6, chance(95) ? 0x4000 : (uint16_t)rnd());
        ip[8] = 64;
        ip[9] = proto;
        ip[10] = ip[11] = 0;
    }
    memcpy(ip + (z->v6 ? 8 : 12), src, (size_t)alen);
    memcpy(ip + (z->v6 ? 24 : 16), dst, (size_t)alen);
    if (!z->v6) {
        uint16_t c = (uint16_t)~fold(sum16(ip, IP_LEN, 0));
        memcpy(ip + 10, &c, 2);
    }
    /* a valid layer-4 checksum most of the time */
    if (chance(85) && (proto == 6 || proto == 58 || proto == 1 || proto == 17)) {
        uint64_t s = 0;
        if (proto != 1) {
            s = sum16(ip + (z->v6 ? 8 : 12), (size_t)(2 * alen), 0);
            s += z->v6 ? ph6_tail(blen, proto) : sum16((uint8_t[]){ 0, proto, (uint8_t)(blen >> 8), (uint8_t)blen }, 4, 0);
        }
        uint32_t at = proto == 6 ? 16 : proto == 17 ? 6 : 2;
        if (blen >= at + 2) {
            l4[at] = l4[at + 1] = 0;
            uint16_t c = (uint16_t)~fold(sum16(l4, blen, s));
            memcpy(l4 + at, &c, 2);
        }
    }
    n += ipl + xlen + blen;
    if (chance(10))
        n = rnd() % (n + 1);        /* cut anywhere */
    return n;
}

static int fuzz(fz *z, uint64_t iters)
{
    pk_tcp_engine *e = z->e;
    static uint8_t f[8192];
    uint64_t now = rte_rdtsc(), t0 = now;
    for (uint64_t i = 0; i < iters; i++) {
        if (!z->server && i % 16 == 0) {        /* the client opens connections as it runs */
            e->launching = 1;
            tcp_launch(e, now, t0);
        }
        uint32_t len = make_frame(z, f);
        uint8_t *heap = malloc(len ? len : 1);  /* exactly the frame: ASan sees any read past it */
        memcpy(heap, f, len);
        struct rte_mbuf mb;
        memset(&mb, 0, sizeof(mb));
        mb.buf_addr = heap;
        mb.data_off = 0;
        mb.data_len = (uint16_t)len;
        mb.pkt_len = len;
        mb.nb_segs = 1;
        pk_add(&e->c, PK_pkts_rx, 1);
        z->frames++;
        uint64_t deep = pk_read(&e->c, PK_tcp_rx) + pk_read(&e->c, PK_icmp_rx);
        int rep = tcp_handle_frame(e, &mb, now);
        if (z->last_ext) {
            z->ext++;
            z->ext_deep += pk_read(&e->c, PK_tcp_rx) + pk_read(&e->c, PK_icmp_rx) != deep;
        }
        if (rep) {
            z->replies++;
            if (mb.data_len > len) {
                fprintf(stderr, "a reply in place grew past its frame\n");
                return 3;
            }
        }
        free(heap);
        if (e->ntx > TXQ / 2)
            tcp_tx_flush_mode(e, 1);
        now += e->hz / 20000;                    /* 50 us a frame */
        if (chance(2))
            now += e->rto_c;                     /* retransmissions, give-ups */
        tcp_run_timers(e, now);
    }
    tcp_tx_flush_mode(e, 1);
    const pk_counter_block *c = &e->c;
    uint64_t seen = pk_read(c, PK_tcp_rx) + pk_read(c, PK_icmp_rx) + pk_read(c, PK_arp_rx) +
                    pk_read(c, PK_udp_rx) + pk_read(c, PK_other_rx) + pk_read(c, PK_bad_rx) +
                    pk_read(c, PK_vxlan_drop);
    printf("%s%s%s frames %" PRIu64 " bad %" PRIu64 " tcp %" PRIu64 " icmp %" PRIu64 " replies %" PRIu64
           " opened %" PRIu64 " requests %" PRIu64 " responses %" PRIu64 " http_err %" PRIu64 " seen %" PRIu64
           " ext %" PRIu64 " ext_deep %" PRIu64 " udp_tx %" PRIu64 " udp_drop %" PRIu64 " udp_rt %" PRIu64
           " vxlan_drop %" PRIu64 " tx %" PRIu64 "\n",
           z->v6 ? "ipv6" : "ipv4", z->vx ? "-vxlan" : z->udp ? "-udp" : "", z->server ? "-server" : "-client", z->frames, pk_read(c, PK_bad_rx),
           pk_read(c, PK_tcp_rx), pk_read(c, PK_icmp_rx), z->replies, pk_read(c, PK_sock_open),
           pk_read(c, PK_http_get) + pk_read(c, PK_http_post), pk_read(c, PK_http_resp), pk_read(c, PK_http_err), seen,
           z->ext, z->ext_deep, pk_read(c, PK_udp_tx), pk_read(c, PK_udp_drop), pk_read(c, PK_udp_rt),
           pk_read(c, PK_vxlan_drop), pk_read(c, PK_pkts_tx));
    /* every frame lands in exactly one class (a TCP frame whose options are bad counts twice:
     * tcp and bad; so seen may pass frames by those, never fall short) */
    if (seen < z->frames || pk_read(c, PK_sock_open) != pk_read(c, PK_sock_close) + pk_read(c, PK_sock_error) +
                                                        pk_read(c, PK_sock_current)) {
        fprintf(stderr, "counters do not add up\n");
        return 3;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s ITERATIONS SEED\n", argv[0]);
        return 2;
    }
    uint64_t iters = strtoull(argv[1], NULL, 10);
    rs ^= strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ull;
    char prefix[64], err[512];
    snprintf(prefix, sizeof(prefix), "--file-prefix=pkfuzz%d", (int)getpid());
    const char *eal[] = { "tcp_frame_fuzz", "--no-huge", "-m", "256", "--no-shconf", "--no-pci",
                          "--no-telemetry", "--log-level=3", prefix };
    if (pk_dpdk_eal_init(9, eal, 8191, err, sizeof(err)) != 0) {
        fprintf(stderr, "EAL: %s\n", err);
        return 4;
    }
    static const uint8_t req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const uint8_t resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n";
    uint8_t body[3100];
    memcpy(body, resp, sizeof(resp) - 1);
    memset(body + sizeof(resp) - 1, 'x', 3000);
    int rc = 0;
    for (int k = 0; k < 10 && rc == 0; k++) {
        /* the four (IPv6, IPv4 x server, client), the same in protocol udp, then IPv4 TCP with vxlan */
        int v6 = k < 8 && k % 4 < 2, server = k % 2 == 0, udp = k >= 4 && k < 8, vx = k >= 8;
        char dev[32];
        snprintf(dev, sizeof(dev), "net_null%d", k);
        pk_dpdk_port *p = pk_dpdk_port_open(dev, NULL, err, sizeof(err));
        if (!p) {
            fprintf(stderr, "port: %s\n", err);
            return 4;
        }
        pk_tcp_cfg cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.role = server ? PK_TCP_SERVER : PK_TCP_CLIENT;
        cfg.ipv6 = v6;
        memcpy(cfg.ip6, server ? SRV6 : CLI6, 16);
        memcpy(cfg.server_ip6, SRV6, 16);
        memcpy(cfg.gateway_ip6, SRV6, 16);
        memcpy(cfg.client6_hi, CLI6, 12);
        uint32_t ip = rte_cpu_to_be_32(server ? SRV4 : CLI4);
        if (!v6) {
            cfg.ip = ip;
            cfg.server_ip = cfg.gateway_ip = rte_cpu_to_be_32(SRV4);
        }
        memset(cfg.gateway_mac, 2, 6);
        cfg.gateway_mac_set = !server;
        cfg.client_first[0] = v6 ? 1 : CLI4;
        cfg.client_num[0] = server ? 3 : 1;
        cfg.nranges = 1;
        cfg.listen = 80;
        cfg.listen_num = 2;
        cfg.lport_lo = 3000;
        cfg.lport_hi = 3003;
        cfg.mss = v6 ? 1440 : 1460;
        cfg.tcp_rst = 1;
        cfg.rto_ns = 20000000;
        cfg.retries = 2;
        cfg.burst = 32;
        cfg.duration_ns = 1000000000;
        cfg.msg = server ? body : req;
        cfg.msg_len = server ? (udp ? 200 : 3000 + (uint32_t)sizeof(resp) - 1) : (uint32_t)sizeof(req) - 1;
        cfg.udp = udp;
        cfg.keepalive = k == 0;
        cfg.cps = 1e6;
        cfg.launch_num = 4;
        cfg.ka_interval_ns = k == 7 ? 0 : 1000000;   /* the last: one request a socket */
        cfg.pipeline = k == 5 ? 4 : 0;                /* the IPv6 UDP client: 4 requests out a socket */
        cfg.cpu = -1;
        if (vx) {
            cfg.vxlan = 1;
            cfg.vni = FUZZ_VNI;
            memset(cfg.inner_smac, 0x0a, 6);
            memset(cfg.inner_dmac, 0x0b, 6);
            cfg.vtep_local = rte_cpu_to_be_32(server ? VTEP_SRV : VTEP_CLI);
            cfg.vtep_remote = rte_cpu_to_be_32(server ? VTEP_CLI : VTEP_SRV);
        }
        pk_tcp_engine *e = pk_tcp_create(p, &cfg, err, sizeof(err));
        if (!e) {
            fprintf(stderr, "engine: %s\n", err);
            return 4;
        }
        fz z = { .e = e, .v6 = v6, .server = server, .udp = udp, .vx = vx };
        rc = fuzz(&z, iters);
        pk_tcp_destroy(e);
        pk_dpdk_port_close(p);
    }
    return rc;
}
