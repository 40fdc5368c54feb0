/* perfkit's DPDK engine: the UDP generator: template frames, flows over tuple ranges, TSC
 * pacing and ramps, latency probes, frames coming back (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <rte_lcore.h>
#include <rte_memcpy.h>

#define GEN_RX_EVERY_NS 20000ull     /* a generator that expects nothing back polls rx this often */
#define CATCHUP_NS      250000000ull /* a paced generator may finish this late */

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

/* Which sums the device fills in: what the port enabled and left in use (setup.tx_offloads),
 * decided once here so that gen_build looks up nothing per frame. */
static void gen_offloads(worker *w)
{
    const uint64_t tx = w->port->setup.tx_offloads;
    w->ol_ip = (tx & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) != 0;
    w->ol_udp = (tx & RTE_ETH_TX_OFFLOAD_UDP_CKSUM) != 0;
    w->ol_flags = (w->ol_ip || w->ol_udp ? RTE_MBUF_F_TX_IPV4 : 0) | (w->ol_ip ? RTE_MBUF_F_TX_IP_CKSUM : 0) |
                  (w->ol_udp ? RTE_MBUF_F_TX_UDP_CKSUM : 0);
}

/* A built frame's sums handed to the device: its mbuf flagged, l2/l3 lengths set (the IPv4 header
 * field is 0 and the UDP one holds the pseudo header's sum, as DPDK asks). */
static inline void gen_offload_mark(const worker *w, struct rte_mbuf *m)
{
    m->ol_flags |= w->ol_flags;
    m->l2_len = ETH_LEN;
    m->l3_len = IP_LEN;
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
    if (++w->next_flow == w->flow_end) {
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
 * from registers (memory order = host order here), never read back. Inlined in
 * run_gen's loop, and the rare probe kept out of it: GCC's called-once heuristic
 * may pick either. */
static inline __attribute__((always_inline)) uint32_t gen_build(worker *w, uint32_t n, uint64_t now_ns)
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
        uint16_t c = w->ol_ip ? 0 : (uint16_t)~fold(w->ip_base + bswap_word(ip_len) + addrs);
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
        if (w->ol_udp)   /* the device's: the pseudo header alone (protocol, addresses, length) */
            c = fold(w->udp_base + addrs + bswap_word(udp_len));
        memcpy(udp + 6, &c, 2);
        if (w->ol_flags)
            gen_offload_mark(w, m);
    }
    w->npend += n;
    return n;
}

/* One latency probe at the end of the pending list: the first flow's tuple,
 * probe_size bytes, pk_wire_hdr with the probe magic and the probe sequence. */
static __attribute__((noinline)) void gen_build_probe(worker *w, uint64_t now_ns)
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

/* Is a worker on port p still running? */
static inline int port_running(const pk_dpdk_engine *e, const pk_dpdk_port *p)
{
    for (int j = 0; j < e->n; j++)
        if (e->w[j].port == p && pk_engine_worker_running(&e->core, j))
            return 1;
    return 0;
}

/* A generator that receives after it has sent, until its rx has been quiet QUIET_NS after the
 * other side is done (bounded by the hard end). Its frames come back (track 1): the other side
 * is the reflector in this engine, done when every worker on its port has finished; with the
 * reflector elsewhere, quiet after done_at. Bidirectional (track 2): the generators feeding
 * its port, done when they have all stopped sending. */
static void receive_until_quiet(worker *w, uint64_t done_at)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const int back = w->cfg.track == 1;
    const worker *peer = back && w->cfg.peer >= 0 ? &w->engine->w[w->cfg.peer] : NULL;
    uint64_t last = done_at, others_at = back && !peer ? done_at : 0;
    uint32_t idle = 0;
    for (;;) {
        uint64_t now = rte_rdtsc();
        if (pkd_rx_service(w)) {
            last = now;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (now >= hard)
            break;
        if (!others_at) {
            int any;
            if (back ? port_running(w->engine, peer->port) : !feeders_done(w, &any))
                continue;
            others_at = rte_rdtsc();  /* everything they sent is on its way to us now */
            continue;
        }
        uint64_t since = last > others_at ? last : others_at;
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
    uint64_t start;   /* TSC the schedule counts from: the run's start, or the last set_rate */
    uint64_t base;    /* frames built before start */
} pace;

static pace pace_make(const worker *w, const timebase *tb, uint64_t start)
{
    pace p = { w->cfg.rate > 0, w->cfg.rate / (double)tb->hz, 0, 0, start, 0 };
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

/* The pacer's target now, in whole frames/s (the ramp's rate at t), for the rate_target gauge;
 * rounded: per cycle and back is not exact in floating point. */
static uint64_t pace_rate_now(const pace *p, uint64_t t, const timebase *tb)
{
    if (!p->paced)
        return 0;
    double dt = (double)(t - p->start), r = p->r0;
    if (p->T > 0)
        r = dt >= p->T ? p->r1 : p->r0 + (p->r1 - p->r0) * dt / p->T;
    return (uint64_t)(r * (double)tb->hz + 0.5);
}

/* A new rate from the control slot (pk_dpdk_set_rate): the schedule starts again at now, from
 * the frames built so far, so frames not sent at the old rate are not sent in a burst. */
static void pace_rebase(worker *w, pace *p, uint64_t now, uint64_t built, const timebase *tb)
{
    double r;
    __atomic_load(&w->ctl_rate, &r, __ATOMIC_RELAXED);
    p->paced = r > 0;
    p->r0 = r / (double)tb->hz;
    p->r1 = p->T = 0;
    p->start = now;
    p->base = built;
}

/* Frames due by the end of the run under the pacer's schedule now. */
static inline uint64_t pace_target(const pace *p, uint64_t end)
{
    return p->paced ? p->base + pace_due(p, end - 1 - p->start) : 0;
}

/* flows_start + flow_rate x elapsed, up to flows: the flows it sends now (flow_end moves). */
static void gen_grow_flows(worker *w, uint64_t elapsed, const timebase *tb)
{
    const uint32_t start = w->cfg.flows_start ? w->cfg.flows_start : w->cfg.flows;
    double n = start + w->cfg.flow_rate * (double)elapsed / (double)tb->hz;
    uint32_t active = n >= w->cfg.flows ? w->cfg.flows : (uint32_t)n;
    w->flow_end = w->cfg.flow_first + active;
    pk_set(&w->c, PK_flows_active, active);
}

void pkd_run_gen(worker *w)
{
    const timebase *tb = &w->engine->tb;
    pkd_gen_resolve(w);
    memcpy(w->tmpl, w->dst_mac, 6);
    w->gcache = rte_mempool_default_cache(w->gpool, rte_lcore_id());
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint32_t burst = w->cfg.burst;
    const uint64_t start = rte_rdtsc(), end = start + tb_cycles(tb, w->cfg.duration_ns);
    pace p = pace_make(w, tb, start);
    uint32_t ctl_seen = 0;   /* a set_rate made before this thread ran is taken at its first burst */
    const int growing = w->cfg.flow_rate > 0 && w->flow_end < w->cfg.flow_first + w->cfg.flows;
    uint64_t last_gauge = start;
    pk_set(&w->c, PK_rate_target, pace_rate_now(&p, start, tb));
    pk_set(&w->c, PK_flows_active, w->flow_end - w->cfg.flow_first);
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
    uint64_t target = pace_target(&p, end);
    const uint64_t catchup_end = end + tb_cycles(tb, CATCHUP_NS);
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        if (stopping(w))
            break;
        /* one load per burst: a new rate from the control slot, taken while sending */
        const uint32_t g = __atomic_load_n(&w->ctl_gen, __ATOMIC_ACQUIRE);
        if (__builtin_expect(g != ctl_seen, 0) && t0 < end) {
            ctl_seen = g;
            pace_rebase(w, &p, t0, built, tb);
            target = pace_target(&p, end);
            pk_set(&w->c, PK_rate_target, pace_rate_now(&p, t0, tb));
        }
        if (t0 >= end && (!p.paced || (built >= target && w->npend == 0) || t0 >= catchup_end))
            break;
        if (w->cfg.count && built >= w->cfg.count && w->npend == 0)   /* the counted burst is out */
            break;
        const uint64_t tp = t0 < end ? t0 : end - 1;
        uint32_t moved = 0;
        /* frames coming back are measured at once; otherwise rx is only for ARP and ping */
        if (t0 - last_rx_poll >= rx_every) {
            moved = pkd_rx_service(w);
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
                uint64_t allowed = p.base + pace_due(&p, tp - p.start);
                k = allowed > built ? allowed - built : 0;
                if (k > room)
                    k = room;
            }
            if (w->cfg.count && k > w->cfg.count - built)   /* built never passes count */
                k = w->cfg.count - built;
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
        round_done(w, moved, t0, t1, &idle);   /* nothing moves: a full queue, or the next frame is not due */
        if (t1 - last_gauge >= flush_c) {      /* a ramp's rate and growing flows, every ms */
            last_gauge = t1;
            if (p.T > 0)
                pk_set(&w->c, PK_rate_target, pace_rate_now(&p, t1 < end ? t1 : end - 1, tb));
            if (growing)
                gen_grow_flows(w, t1 - start, tb);
        }
        housekeeping(w, t1, flush_c, nic_c);
    }
    uint64_t done = rte_rdtsc();
    flush_cpu(w, done);
    w->cpu_frozen = 1;    /* the CPU counters cover the sending time */
    gen_unbuild(w);
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    if (w->cfg.track == 1 || w->cfg.track == 2)
        receive_until_quiet(w, done);
}

/* A generator's frame sizes, template, flow counters and tuple odometer (other roles: nothing). */
int pkd_gen_alloc(worker *w)
{
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role == PK_DPDK_GEN) {
        w->npattern = c->nsizes ? c->nsizes : 1;
        w->pattern = pkd_zalloc(sizeof(uint16_t) * w->npattern);
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
        w->flow_seq = pkd_zalloc(sizeof(uint64_t) * c->flows);
        if (!w->tmpl || !w->flow_seq)
            return -1;
        w->nsp = c->sports ? c->sports : c->flow_first + c->flows;
        w->ndp = c->dports ? c->dports : 1;
        w->nsi = c->src_ips ? c->src_ips : 1;
        w->ndi = c->dst_ips ? c->dst_ips : 1;
        w->src_h = rte_be_to_cpu_32(w->port->ip);
        w->dst_h = rte_be_to_cpu_32(c->dst_ip);
        w->flow_end = c->flow_first + (c->flows_start ? c->flows_start : c->flows);
        gen_flow_set(w, c->flow_first);
        w->wrap[0] = w->dsp;
        w->wrap[1] = w->ddp;
        w->wrap[2] = w->dsi;
        w->wrap[3] = w->ddi;
        gen_template(w);
        gen_offloads(w);
    }
    return 0;
}
