/* perfkit's TCP for load testing over DPDK (see tcp_engine.h): the engine's life (create, start,
 * join, snapshot, destroy) and its worker's loop. The rest is cut by concern: tcp_internal.h. */
#include "tcp_internal.h"

static void set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static void read_nic(pk_tcp_engine *e, int base)
{
    uint64_t nic[PK_NIC_N];
    if (e->cfg.queue != 0)
        return;                     /* the port's counters: once, by queue 0's engine */
    if (pk_dpdk_port_nic(e->port, nic) != 0)   /* the dpdk engine's: kernel drops included */
        return;
    if (base) {
        memcpy(e->nic_base, nic, sizeof(nic));
        return;
    }
    pk_set(&e->c, PK_nic_ierrors, nic[0] - e->nic_base[0]);
    pk_set(&e->c, PK_nic_oerrors, nic[1] - e->nic_base[1]);
    pk_set(&e->c, PK_nic_imissed, nic[2] - e->nic_base[2]);
    pk_set(&e->c, PK_nic_ipackets, nic[3] - e->nic_base[3]);
    pk_set(&e->c, PK_nic_opackets, nic[4] - e->nic_base[4]);
}

static inline int stopping(const pk_tcp_engine *e) { return pk_engine_stopping(&e->core); }

static void worker_loop(pk_tcp_engine *e)
{
    const uint64_t hz = e->hz;
    uint64_t t0 = rte_rdtsc(), now = t0;
    uint64_t busy = 0, wall0 = t0, nic_every = (uint64_t)((double)NIC_EVERY_NS * hz / 1e9);
    /* a pass takes microseconds; one over 1 ms lost the CPU (a shared machine) */
    uint64_t stall = 0, stall_c = hz / 1000;
    uint64_t to_c = (uint64_t)((double)e->cfg.duration_ns * hz / 1e9);
    int client = e->cfg.role == PK_TCP_CLIENT;
    uint64_t last_arp = 0, arp_until = t0 + (uint64_t)((double)(ARP_GIVE_UP_NS + e->cfg.wait_ns) * hz / 1e9);
    const uint64_t arp_give_up_c = (uint64_t)((double)ARP_GIVE_UP_NS * hz / 1e9);
    const uint64_t arp_last_c = t0 + (uint64_t)((double)(LINK_GIVE_UP_NS + e->cfg.wait_ns) * hz / 1e9);
    uint32_t arp_asked = 0, arp_link_down = 0;  /* requests sent; of them, with the link down */
    uint64_t ctl_wait = 0;          /* cycles spent stepping out for the memif control */
    uint64_t launch_at = 0, launch_end = 0, drain_end = 0, drain_at = 0;
    double closed = 0;              /* CLIENT: idle keep-alive connections closed by the drain */
    uint64_t arp_c = (uint64_t)((double)ARP_RETRY_NS * hz / 1e9);
    uint64_t drain_c = e->rto_c * (e->cfg.retries + 2) + hz;
    if (!client)
        launch_end = t0 + to_c;
    uint64_t next = t0;             /* the TSC a pass starts at: the last pass's end (one read a pass) */
    for (;;) {
        now = next;
        uint64_t before = pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx);
        /* full bursts: more is waiting; take it before timers and launches add more work
         * (a client launching launch_num a pass, 3 frames back for each, outruns one burst
         * of 32 a pass and overflows its ring) */
        for (int k = 0; k < RX_ROUNDS && tcp_rx_burst(e, now) == e->cfg.burst; k++)
            ;
        tcp_run_timers(e, now);
        if (client) {
            if (!e->cfg.gateway_mac_set) {
                if (now >= arp_until) {
                    char a[INET6_ADDRSTRLEN];
                    const uint8_t *g = (const uint8_t *)&e->cfg.gateway_ip;
                    snprintf(a, sizeof(a), "%u.%u.%u.%u", g[0], g[1], g[2], g[3]);
                    if (e->cfg.ipv6)
                        inet_ntop(AF_INET6, e->cfg.gateway_ip6, a, sizeof(a));
                    snprintf(e->err, sizeof(e->err), "no %s from %s on port %s: is the gateway (or the "
                             "server) up and on this link, with the address in its %s? (%u requests in "
                             "%.1f s, %u of them with the link down; %llu frames received; this worker "
                             "lost its CPU for %.0f ms and stepped out for the memif control for %.0f ms)",
                             e->cfg.ipv6 ? "Neighbor Advertisement (IPv6 ND)" : "ARP reply", a,
                             pk_dpdk_port_name(e->port), e->cfg.ipv6 ? "prefix" : "subnet", arp_asked,
                             (double)(now - t0) / hz, arp_link_down,
                             (unsigned long long)pk_read(&e->c, PK_pkts_rx), (double)stall * 1e3 / hz,
                             (double)ctl_wait * 1e3 / hz);
                    break;
                }
                if (now - last_arp >= arp_c) {
                    /* a link that is down (a memif peer reconnecting) does not use up the time
                     * to answer: the wait starts over while it is, up to LINK_GIVE_UP_NS */
                    if (pk_dpdk_port_link(e->port) == 0) {
                        arp_link_down++;
                        if (now + arp_give_up_c > arp_until)
                            arp_until = now + arp_give_up_c < arp_last_c ? now + arp_give_up_c : arp_last_c;
                    }
                    arp_asked++;
                    if (e->cfg.ipv6)
                        tcp_send_ns(e);
                    else
                        tcp_send_arp_request(e);
                    last_arp = now;
                }
            } else if (!launch_at) {
                launch_at = now + (uint64_t)((double)e->cfg.wait_ns * hz / 1e9);
                launch_end = launch_at + to_c;
            } else if (now >= launch_at && now < launch_end && !stopping(e)) {
                e->launching = 1;
                tcp_launch(e, now, launch_at);
            } else if (now >= launch_end || stopping(e)) {
                if (e->launching || !e->draining) {
                    e->launching = 0;
                    e->draining = 1;
                    drain_at = now;
                    closed = 0;
                    /* time to close the idle keep-alive connections at the connection rate,
                     * four times over: a peer that loses its CPU slows the closing down */
                    drain_end = now + (e->cfg.flood ? drain_c / 8 : drain_c) +
                                (e->cfg.cps > 0 ? (uint64_t)(4.0 * (double)e->current / e->cfg.cps * hz) : 0);
                }
                /* idle keep-alive connections close now, at the rate they were opened (which
                 * the path carried) and as the transmit queue has room: a million FINs at once
                 * would overflow both sides' queues and come back as retransmissions */
                double due = e->cfg.cps > 0 ? e->cfg.cps * (double)(now - drain_at) / hz + DRAIN_BATCH : 1e18;
                for (int k = 0; e->head[TL_KA] && k < DRAIN_BATCH && e->ntx < TXQ / 2 && closed < due; k++, closed++)
                    tcp_on_ka(e, e->head[TL_KA] - 1, now);
                /* a flood keeps no sockets: it stays a moment to answer the last SYN-ACKs */
                if ((e->current == 0 && !e->cfg.flood) || now >= drain_end)
                    break;
            }
        } else if (now >= launch_end || stopping(e)) {
            break;
        }
        if (e->nack)
            tcp_acks_flush(e);
        if (e->ntx)
            tcp_tx_flush(e);
        uint64_t t1 = rte_rdtsc();
        next = t1;
        if (t1 - now > stall_c)
            stall += t1 - now;
        else if (pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx) != before)
            busy += t1 - now;
        if (t1 - e->last_nic >= nic_every) {
            e->last_nic = t1;
            read_nic(e, 0);
            pk_set(&e->c, PK_cpu_busy_ns, (uint64_t)((double)busy * 1e9 / hz));
            pk_set(&e->c, PK_cpu_stall_ns, (uint64_t)((double)stall * 1e9 / hz));
            pk_set(&e->c, PK_cpu_wall_ns, (uint64_t)((double)(t1 - wall0) * 1e9 / hz));
            /* idle: a memif peer's leaving or coming is handled now (dpdk_engine.c) */
            uint64_t idle_at = rte_rdtsc();
            pk_dpdk_port_poll_idle(e->port, e->cfg.queue, pk_read(&e->c, PK_pkts_rx) + pk_read(&e->c, PK_pkts_tx));
            e->port_ok = 0;         /* the memif control may have run: look at the link again */
            next = rte_rdtsc();     /* the NIC read stays out of the next pass */
            ctl_wait += next - idle_at;
        }
    }
    tcp_acks_flush(e);
    tcp_end_flush(e);
    /* what is still open at the end: the client's are errors (they did not finish in the
     * drain time); the server's stay counted as current */
    if (client) {
        for (uint32_t i = 0; i < e->nsock && e->current; i++)
            if (e->socks[i].state != S_CLOSED)
                tcp_sock_abort(e, i, PK_err_timeout);
        tcp_end_flush(e);
    }
    uint64_t t1 = rte_rdtsc();
    read_nic(e, 0);
    pk_set(&e->c, PK_cpu_busy_ns, (uint64_t)((double)busy * 1e9 / hz));
    pk_set(&e->c, PK_cpu_stall_ns, (uint64_t)((double)stall * 1e9 / hz));
    pk_set(&e->c, PK_cpu_wall_ns, (uint64_t)((double)(t1 - wall0) * 1e9 / hz));
}

/* In the worker's thread, before it runs: an lcore id for the mempool cache (released at its end) */
static int worker_init(pk_engine *core, int i)
{
    pk_tcp_engine *e = core->owner;
    (void)i;
    if (rte_thread_register() != 0) {
        snprintf(e->err, sizeof(e->err), "tcp worker: rte_thread_register: %s", rte_strerror(rte_errno));
        return -1;
    }
    return 0;
}

static void worker_run(pk_engine *core, int i)
{
    pk_tcp_engine *e = core->owner;
    (void)i;
    e->last_nic = rte_rdtsc();   /* the NIC base was read by pk_tcp_start */
    e->mcache = rte_mempool_default_cache(e->pool, rte_lcore_id());
    worker_loop(e);
    tcp_mbuf_unstash(e);
}

static void worker_exit(pk_engine *core, int i, int ran)
{
    pk_tcp_engine *e = core->owner;
    (void)i;
    if (ran) {
        struct rte_mempool_cache *cache = rte_mempool_default_cache(e->pool, rte_lcore_id());
        if (cache)
            rte_mempool_cache_flush(cache, e->pool);
        rte_thread_unregister();
    }
    pk_dpdk_port_poll_end(e->port);   /* its last burst is done: memif control may run */
}

/* a connected memif port: its control waits while the worker polls (dpdk_engine.c) */
static void worker_poll(pk_engine *core, int i, int begin)
{
    pk_tcp_engine *e = core->owner;
    (void)i;
    if (begin)
        pk_dpdk_port_poll_begin(e->port);
    else
        pk_dpdk_port_poll_end(e->port);
}

static const pk_engine_ops TCP_OPS = {
    .thread_init = worker_init, .run = worker_run, .thread_exit = worker_exit, .poll = worker_poll,
};

pk_tcp_engine *pk_tcp_create(pk_dpdk_port *port, const pk_tcp_cfg *cfg, char *err, size_t errlen)
{
    struct rte_mempool *pool = pk_dpdk_pool();
    if (!pool) {
        set_err(err, errlen, "DPDK EAL is not initialised (no mbuf pool)");
        return NULL;
    }
    if (cfg->role != PK_TCP_SERVER && cfg->role != PK_TCP_CLIENT) {
        set_err(err, errlen, "role: server or client");
        return NULL;
    }
    if (cfg->nown < 0 || cfg->nown > PK_TCP_MAX_OWN) {
        set_err(err, errlen, "own address ranges: 0..%d", PK_TCP_MAX_OWN);
        return NULL;
    }
    if (cfg->nranges < 1 || cfg->nranges > PK_TCP_MAX_RANGES || (cfg->role == PK_TCP_CLIENT && cfg->nranges != 1)) {
        set_err(err, errlen, "client address ranges: 1..%d (a client: 1)", PK_TCP_MAX_RANGES);
        return NULL;
    }
    if (cfg->listen_num < 1 || (uint32_t)cfg->listen + cfg->listen_num > 65536 || cfg->mss < 64 ||
        cfg->burst < 1 || cfg->burst > 256 || cfg->msg_len == 0 || cfg->msg_len > PK_TCP_MAX_MSG ||
        cfg->vlan > 4094 || (cfg->vxlan && (cfg->vlan || cfg->ipv6 || cfg->vni > 0xffffff)) ||
        (cfg->role == PK_TCP_CLIENT && (cfg->lport_lo < 1 || cfg->lport_lo > cfg->lport_hi ||
                                        cfg->msg_len > cfg->mss || !(cfg->cps > 0) || cfg->launch_num < 1))) {
        set_err(err, errlen, "tcp: a field is out of range (the spec checks them: use perfkit's specs)");
        return NULL;
    }
    if (cfg->udp && cfg->msg_len > PK_TCP_UDP_MAX_MSG(cfg->ipv6)) {
        set_err(err, errlen, "udp: the message is %u bytes: one datagram holds at most %u",
                cfg->msg_len, PK_TCP_UDP_MAX_MSG(cfg->ipv6));
        return NULL;
    }
    if (cfg->pipeline > PK_TCP_MAX_PIPELINE ||
        (cfg->pipeline > 1 && (cfg->role != PK_TCP_CLIENT || !cfg->udp || !(cfg->ka_interval_ns || cfg->flood)))) {
        set_err(err, errlen, "pipeline: %u: 0..%d, a protocol udp client's with keep-alive or flood", cfg->pipeline,
                PK_TCP_MAX_PIPELINE);
        return NULL;
    }
    if (cfg->ndips > PK_TCP_MAX_DIPS || (cfg->ndips && (cfg->role != PK_TCP_CLIENT || !cfg->flood ||
                                                         !(cfg->ipv6 ? (void *)cfg->dips6 : (void *)cfg->dips)))) {
        set_err(err, errlen, "change_dip: %u addresses: 0..%d, a flood client's", cfg->ndips,
                PK_TCP_MAX_DIPS);
        return NULL;
    }
    uint64_t slots = 0;
    for (int r = 0; r < cfg->nranges; r++)
        slots += cfg->client_num[r];
    uint64_t per = cfg->role == PK_TCP_SERVER ? 65536u : (uint64_t)(cfg->lport_hi - cfg->lport_lo + 1);
    uint64_t nsock = slots * per * cfg->listen_num;
    if (nsock == 0 || nsock > PK_TCP_MAX_SOCKETS) {
        set_err(err, errlen, "tcp: %llu sockets: 1..%u", (unsigned long long)nsock, PK_TCP_MAX_SOCKETS);
        return NULL;
    }
    if (cfg->queue >= pk_dpdk_port_queues(port)) {
        set_err(err, errlen, "tcp: queue %u: port %s has %d queues", cfg->queue, pk_dpdk_port_name(port),
                pk_dpdk_port_queues(port));
        return NULL;
    }
    /* several queues: the engines are made together, queue 0 first, and only it claims */
    if (cfg->queue == 0 && pk_dpdk_port_claim(port) != 0) {
        set_err(err, errlen, "port %s is in use by another engine", pk_dpdk_port_name(port));
        return NULL;
    }
    pk_tcp_engine *e = aligned_alloc(64, (sizeof(*e) + 63) & ~(size_t)63);
    if (!e) {
        if (cfg->queue == 0)
            pk_dpdk_port_release(port);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(e, 0, sizeof(*e));
    if (pk_engine_init(&e->core, &TCP_OPS, e, cfg->role == PK_TCP_SERVER ? "pk-tcp-srv" : "pk-tcp-cli", 1) != 0) {
        if (cfg->queue == 0)
            pk_dpdk_port_release(port);
        free(e);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    pk_engine_worker_init(&e->core, 0, &e->c, &e->hist, e->err, cfg->cpu);
    e->cfg = *cfg;
    e->port = port;
    e->kernel = pk_dpdk_port_kernel(port);
    {
        pk_dpdk_port_setup ps;
        pk_dpdk_port_get_setup(port, &ps);
        tcp_offloads_init(e, cfg->vxlan ? 0 : ps.tx_offloads);   /* vxlan: inner sums in software */
    }
    e->pid = (uint16_t)pk_dpdk_port_id(port);
    pk_dpdk_port_mac(port, e->mac);
    e->pool = pool;
    e->l2 = cfg->vlan ? 18 : ETH_LEN;
    if (cfg->ipv6) {                /* the IPv6 header template and its addresses' sum */
        uint8_t *t = e->ip6_tmpl;
        int server = cfg->role == PK_TCP_SERVER;
        t[0] = (uint8_t)(0x60 | (cfg->tos >> 4));   /* traffic class = tos */
        t[1] = (uint8_t)(cfg->tos << 4);
        t[6] = 6;
        t[7] = 64;
        memcpy(t + (server ? 8 : 24), server ? cfg->ip6 : cfg->server_ip6, 16);
        memcpy(t + (server ? 24 : 8), cfg->client6_hi, 12);
        e->ph6_sum = sum16(t + 8, 32, 0);
    }
    e->slots = (uint32_t)slots;
    e->nports_c = cfg->role == PK_TCP_CLIENT ? (uint32_t)per : 0;
    e->div_l = div_magic(cfg->listen_num);
    e->div_p = div_magic(e->nports_c);
    {                               /* the IPv4 header's fixed fields: version, TOS, DF, TTL, TCP */
        uint8_t *t = e->ip4_tmpl;
        t[0] = 0x45;
        t[1] = cfg->tos;
        t[6] = 0x40;
        t[8] = 64;
        t[9] = 6;
        e->ip4_sum = sum16(t, IP_LEN, 0);
    }
    e->data_at = (uint32_t)(sizeof(struct rte_mbuf) + rte_pktmbuf_priv_size(pool) + RTE_PKTMBUF_HEADROOM);
    e->nsock = (uint32_t)nsock;
    e->map_len = (size_t)nsock * sizeof(tsock);
    /* anonymous memory is zero (S_CLOSED) and taken page by page as sockets are used */
    void *map = mmap(NULL, e->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    e->msg = malloc(cfg->msg_len + 1);
    e->psum = malloc(sizeof(uint64_t) * (cfg->msg_len / 2 + 1));
    size_t dip_bytes = (size_t)cfg->ndips * (cfg->ipv6 ? 16 : sizeof(uint32_t));
    void *dips = dip_bytes ? malloc(dip_bytes) : NULL;
    if (map == MAP_FAILED || !e->msg || !e->psum || (dip_bytes && !dips)) {
        if (map != MAP_FAILED)
            munmap(map, e->map_len);
        free(e->msg);
        free(e->psum);
        free(dips);
        if (cfg->queue == 0)
            pk_dpdk_port_release(port);
        pk_engine_fini(&e->core);
        free(e);
        set_err(err, errlen, "tcp: cannot allocate %llu sockets: %s", (unsigned long long)nsock, strerror(errno));
        return NULL;
    }
    e->socks = map;
    /* a table up to PREFAULT_MAX taken now, as dperf preallocates (a worker sweeping a million
     * connections a second otherwise spends its first second in page faults), in 2 MB pages
     * where the kernel has them (512 times fewer TLB entries). A larger one is taken 4 KiB at a
     * time: used sparsely (a server's rows of 65,536 per client address), each 2 MB first touch
     * zeroed and compacted for in the fast path stalled it for up to 1.3 s (issue 31) */
    if (e->map_len <= PREFAULT_MAX) {
        madvise(map, e->map_len, MADV_HUGEPAGE);
        madvise(map, e->map_len, MADV_POPULATE_WRITE);   /* best effort: else page by page */
    }
    memcpy(e->msg, cfg->msg, cfg->msg_len);
    e->msg_len = cfg->msg_len;
    e->cfg.msg = e->msg;
    if (dip_bytes)                  /* one of the two lists, as the family says */
        memcpy(dips, cfg->ipv6 ? (const void *)cfg->dips6 : (const void *)cfg->dips, dip_bytes);
    e->dips = cfg->ipv6 ? NULL : dips;
    e->dips6 = cfg->ipv6 ? dips : NULL;
    e->cfg.dips = e->dips;
    e->cfg.dips6 = e->dips6;
    e->psum[0] = 0;
    for (uint32_t k = 1; k <= cfg->msg_len / 2; k++) {
        uint16_t x;
        memcpy(&x, e->msg + 2 * (k - 1), 2);
        e->psum[k] = e->psum[k - 1] + x;
    }
    e->hz = rte_get_tsc_hz();
    e->rto_c = (uint64_t)((double)cfg->rto_ns * e->hz / 1e9);
    e->ka_c = (uint64_t)((double)cfg->ka_interval_ns * e->hz / 1e9);
    e->iss_seed = (uint32_t)rte_rdtsc() | 1;
    tcp_isn_init(e);
    static const uint8_t none6[16];
    if (cfg->role == PK_TCP_SERVER && (cfg->ipv6 ? memcmp(cfg->ip6, none6, 16) == 0 : cfg->ip == 0)) {
        pk_tcp_destroy(e);
        set_err(err, errlen, "tcp server: no address");
        return NULL;
    }
    return e;
}

int pk_tcp_start(pk_tcp_engine *e, char *err, size_t errlen)
{
    if (e->ran || pk_engine_running(&e->core)) {
        set_err(err, errlen, "this engine has already run; make a new one");
        return -1;
    }
    /* the port-wide NIC counters' base, here before this worker exists: queue 0 starts first,
     * so no queue's worker has sent yet (read in a worker, a late queue 0 thread missed what
     * another queue had already made the PMD count) */
    read_nic(e, 1);
    char why[256];
    if (pk_engine_start(&e->core, why, sizeof(why)) != 0) {
        set_err(err, errlen, "tcp %s", why);
        return -1;
    }
    e->ran = 1;
    return 0;
}

void pk_tcp_stop(pk_tcp_engine *e) { pk_engine_stop(&e->core); }

int pk_tcp_running(const pk_tcp_engine *e) { return pk_engine_running(&e->core); }

void pk_tcp_join(pk_tcp_engine *e)
{
    if (pk_engine_join(&e->core))
        e->ran = -1;
}

void pk_tcp_nic_last(pk_tcp_engine *e)
{
    if (e->ran == -1)   /* joined: no worker writes its counters now */
        read_nic(e, 0);
}

void pk_tcp_snapshot(const pk_tcp_engine *e, uint64_t *counters, uint64_t *hist)
{
    pk_engine_snapshot(&e->core, 0, counters, hist);
}

const char *pk_tcp_error(const pk_tcp_engine *e) { return pk_engine_error(&e->core); }

void pk_tcp_destroy(pk_tcp_engine *e)
{
    if (!e)
        return;
    pk_tcp_stop(e);
    pk_tcp_join(e);
    for (uint32_t i = 0; i < e->ntx; i++)
        rte_pktmbuf_free(e->tx[(e->txh + i) & (TXQ - 1)]);
    if (e->socks)
        munmap(e->socks, e->map_len);
    free(e->msg);
    free(e->psum);
    free(e->dips);
    free(e->dips6);
    if (e->cfg.queue == 0)
        pk_dpdk_port_release(e->port);
    pk_engine_fini(&e->core);
    free(e);
}
