/* perfkit's DPDK engine: see dpdk_engine.h; its units: dpdk_internal.h. Here the engine
 * itself: workers checked and allocated, their threads, join, results. */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include <rte_errno.h>
#include <rte_lcore.h>

/* The port's NIC counters into w's block, as deltas from a base (base: take it now). A PMD that
 * starts its counts over (memif frees its queues' counts when the link goes down) adds what it had
 * counted to nic_gone first: a counter never runs backwards. */
void pkd_read_nic(worker *w, uint64_t now, int base)
{
    uint64_t nic[PK_NIC_N];
    w->last_nic = now;
    if (!w->nic_owner)   /* port-wide counters: one worker per port reports them */
        return;
    if (pk_dpdk_port_nic(w->port, nic) != 0)
        return;
    if (base) {
        memcpy(w->nic_base, nic, sizeof(nic));
        memcpy(w->nic_raw, nic, sizeof(nic));
        memset(w->nic_gone, 0, sizeof(w->nic_gone));
        return;
    }
    for (int k = 0; k < PK_NIC_N; k++) {
        if (nic[k] < w->nic_raw[k])
            w->nic_gone[k] += w->nic_raw[k];
        w->nic_raw[k] = nic[k];
        nic[k] += w->nic_gone[k];
    }
    pk_set(&w->c, PK_nic_ierrors, nic[0] - w->nic_base[0]);
    pk_set(&w->c, PK_nic_oerrors, nic[1] - w->nic_base[1]);
    pk_set(&w->c, PK_nic_imissed, nic[2] - w->nic_base[2]);
    pk_set(&w->c, PK_nic_ipackets, nic[3] - w->nic_base[3]);
    pk_set(&w->c, PK_nic_opackets, nic[4] - w->nic_base[4]);
}

/* The ports a worker's thread polls (its own, a forwarder's out port, its guest's): begun
 * before the thread starts, ended after its last burst. */
static void worker_polls(worker *w, int begin)
{
    pk_dpdk_port *ps[4] = { w->port, w->out, w->guest ? w->guest->port : NULL, w->guest ? w->guest->out : NULL };
    for (int k = 0; k < 4; k++) {
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= ps[j] == ps[k];
        if (ps[k] && !dup) {
            if (begin)
                pk_dpdk_port_poll_begin(ps[k]);
            else
                pk_dpdk_port_poll_end(ps[k]);
        }
    }
}

/* In the worker's thread, before it runs: an lcore id for mempool caches (released at its end) */
static int worker_init(pk_engine *core, int i)
{
    worker *w = &((pk_dpdk_engine *)core->owner)->w[i];
    if (rte_thread_register() != 0) {
        snprintf(w->err, sizeof(w->err), "worker %d: rte_thread_register: %s", i, rte_strerror(rte_errno));
        return -1;
    }
    return 0;
}

static void worker_run(pk_engine *core, int i)
{
    worker *w = &((pk_dpdk_engine *)core->owner)->w[i];
    uint64_t now = rte_rdtsc();
    w->wall0 = now;
    w->last_flush = now;
    w->last_nic = now;   /* the NIC base was read at start, before any worker ran */
    if (w->cfg.role == PK_DPDK_GEN)
        pkd_run_gen(w);
    else if (w->cfg.role == PK_DPDK_FORWARD)
        pkd_run_fwd(w);
    else
        pkd_run_rx(w);
    now = rte_rdtsc();
    pkd_read_nic(w, now, 0);
    if (w->guest)
        pkd_read_nic(w->guest, now, 0);
    flush_cpu(w, now);
}

static void worker_exit(pk_engine *core, int i, int ran)
{
    pk_dpdk_engine *e = core->owner;
    worker *w = &e->w[i];
    if (ran) {
        struct rte_mempool *pools[2] = { pkd_pool, pkd_jumbo_pool };
        for (int k = 0; k < 2; k++) {
            struct rte_mempool_cache *cache = pools[k] ? rte_mempool_default_cache(pools[k], rte_lcore_id()) : NULL;
            if (cache)
                rte_mempool_cache_flush(cache, pools[k]);
        }
        rte_thread_unregister();
    }
    worker_polls(w, 0);
    if (w->guest) {
        __atomic_store_n(&w->guest->done_sending, 1, __ATOMIC_RELEASE);
        pk_engine_done(core, (int)(w->guest - e->w));
    }
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
}

static void worker_poll(pk_engine *core, int i, int begin)
{
    worker_polls(&((pk_dpdk_engine *)core->owner)->w[i], begin);
}

static const pk_engine_ops DPDK_OPS = {
    .thread_init = worker_init, .run = worker_run, .thread_exit = worker_exit, .poll = worker_poll,
};

/* ------------------------------------------------------------ lifecycle */

static int check_worker(pk_dpdk_engine *e, pk_dpdk_port *const *ports, int nports, int i,
                        char *err, size_t errlen)
{
    worker *w = &e->w[i];
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role < 0 || c->role >= PK_DPDK_NROLES) {
        pkd_set_err(err, errlen, "worker %d: unknown role %d", i, c->role);
        return -1;
    }
    if (c->port < 0 || c->port >= nports || !ports[c->port]) {
        pkd_set_err(err, errlen, "worker %d: port %d out of range", i, c->port);
        return -1;
    }
    for (int j = 0; j < i; j++)
        if (e->w[j].cfg.port == c->port && e->w[j].cfg.queue == c->queue) {
            pkd_set_err(err, errlen, "workers %d and %d: one queue of a port, one worker", j, i);
            return -1;
        }
    w->port = ports[c->port];
    w->pid = w->port->pid;
    w->queue = c->queue;
    if (c->queue >= w->port->nq) {
        pkd_set_err(err, errlen, "worker %d: queue %u, port %s has %u", i, c->queue, w->port->name, w->port->nq);
        return -1;
    }
    if (pk_dpdk_port_busy(w->port)) {
        pkd_set_err(err, errlen, "port %s is in use by another engine", w->port->name);
        return -1;
    }
    if (c->burst == 0 || c->burst > PK_DPDK_MAX_BURST) {
        pkd_set_err(err, errlen, "worker %d: burst %u out of range 1..%d", i, c->burst, PK_DPDK_MAX_BURST);
        return -1;
    }
    if (c->duration_ns == 0) {
        pkd_set_err(err, errlen, "worker %d: duration must be above 0", i);
        return -1;
    }
    if (c->role == PK_DPDK_GEN) {
        if (c->nsizes > PK_DPDK_MAX_PATTERN) {
            pkd_set_err(err, errlen, "worker %d: %u frame sizes: at most %d", i, c->nsizes, PK_DPDK_MAX_PATTERN);
            return -1;
        }
        for (uint32_t k = 0; k < c->nsizes; k++)
            if (c->sizes[k] < PK_DPDK_MIN_SIZE || c->sizes[k] > PK_DPDK_MAX_JUMBO) {
                pkd_set_err(err, errlen, "worker %d: frame size %u out of range %d..%d", i, c->sizes[k],
                        PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
                return -1;
            }
        if (c->ramp_ns && (!(c->rate > 0) || !(c->rate_end > 0) || c->rate_end > 1e10)) {
            pkd_set_err(err, errlen, "worker %d: a ramp needs a start rate and an end rate above 0", i);
            return -1;
        }
        if (c->probe_rate < 0 || c->probe_rate > 1e6 ||
            (c->probe_rate > 0 && (c->probe_size < PK_DPDK_MIN_SIZE + 6 || c->probe_size > PK_DPDK_MAX_JUMBO))) {
            pkd_set_err(err, errlen, "worker %d: probes: rate 0..1e6/s, size 70..%d", i, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->nsizes == 0 && (c->size < PK_DPDK_MIN_SIZE || c->size > PK_DPDK_MAX_JUMBO)) {
            pkd_set_err(err, errlen, "worker %d: size %u out of range %d..%d", i, c->size,
                    PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS || c->flow_first > PK_DPDK_MAX_FLOWS - c->flows) {
            pkd_set_err(err, errlen, "worker %d: flows %u from %u out of range 1..%d", i, c->flows, c->flow_first,
                    PK_DPDK_MAX_FLOWS);
            return -1;
        }
        const uint64_t nsp = c->sports ? c->sports : (uint64_t)c->flow_first + c->flows, ndp = c->dports ? c->dports : 1,
                       nsi = c->src_ips ? c->src_ips : 1, ndi = c->dst_ips ? c->dst_ips : 1;
        if (c->sport + nsp > 65536 || c->dport + ndp > 65536 || nsi > 1u << 17 || ndi > 1u << 17) {
            pkd_set_err(err, errlen, "worker %d: a port range passes 65535 or an address range is above 131072", i);
            return -1;
        }
        if (nsp * ndp * nsi * ndi < (uint64_t)c->flow_first + c->flows) {
            pkd_set_err(err, errlen, "worker %d: %u flows need as many tuples: sports x dports x src_ips x dst_ips "
                    "is only %llu", i, c->flow_first + c->flows, (unsigned long long)(nsp * ndp * nsi * ndi));
            return -1;
        }
        if (c->flows_start > c->flows || !(c->flow_rate >= 0) || c->flow_rate > 1e9) {
            pkd_set_err(err, errlen, "worker %d: flows_start %u of %u flows, flow_rate %g: 0..flows, 0..1e9/s", i,
                    c->flows_start, c->flows, c->flow_rate);
            return -1;
        }
        if (!(c->rate >= 0) || c->rate > 1e10) {
            pkd_set_err(err, errlen, "worker %d: rate %g out of range", i, c->rate);
            return -1;
        }
        if (c->track > 2) {
            pkd_set_err(err, errlen, "worker %d: track %d: 0 (send only), 1 (frames come back), 2 (bidirectional)",
                    i, c->track);
            return -1;
        }
        if (c->peer >= 0 && (c->peer >= e->n || c->peer == i ||
                             (e->w[c->peer].cfg.role == PK_DPDK_GEN && e->w[c->peer].cfg.track != 2))) {
            pkd_set_err(err, errlen, "worker %d: peer %d must be a receiving worker of this engine (or a "
                    "bidirectional generator)", i, c->peer);
            return -1;
        }
        if (w->port->ip == 0) {
            pkd_set_err(err, errlen, "worker %d: port %s has no IPv4 address to send from", i, w->port->name);
            return -1;
        }
    } else if (c->role == PK_DPDK_FORWARD) {
        if (c->out_port < 0 || c->out_port >= nports || !ports[c->out_port] || c->out_port == c->port ||
            ports[c->out_port] == w->port) {
            pkd_set_err(err, errlen, "worker %d: forward: out port %d must be another port of this engine", i,
                    c->out_port);
            return -1;
        }
        w->out = ports[c->out_port];
        w->out_pid = w->out->pid;
        if (c->queue >= w->out->nq) {
            pkd_set_err(err, errlen, "worker %d: queue %u, out port %s has %u", i, c->queue, w->out->name,
                    w->out->nq);
            return -1;
        }
        if (pk_dpdk_port_busy(w->out)) {
            pkd_set_err(err, errlen, "port %s is in use by another engine", w->out->name);
            return -1;
        }
        /* one sender per tx queue: only forwarders (which send elsewhere) may poll (out, queue) */
        for (int j = 0; j < i; j++) {
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if ((o->port == c->out_port && o->queue == c->queue && o->role != PK_DPDK_FORWARD) ||
                (o->role == PK_DPDK_FORWARD && o->out_port == c->out_port && o->queue == c->queue)) {
                pkd_set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->out->name);
                return -1;
            }
        }
        if (c->with_worker >= 0) {
            if (c->with_worker >= e->n || c->with_worker == i || e->w[c->with_worker].cfg.role != PK_DPDK_FORWARD ||
                e->w[c->with_worker].cfg.with_worker >= 0) {
                pkd_set_err(err, errlen, "worker %d: with_worker %d must be another forwarder of this engine "
                        "without a guest of its own", i, c->with_worker);
                return -1;
            }
            for (int j = 0; j < e->n; j++)
                if (j != i && e->w[j].cfg.role == PK_DPDK_FORWARD && e->w[j].cfg.with_worker == c->with_worker) {
                    pkd_set_err(err, errlen, "workers %d and %d both run worker %d", j, i, c->with_worker);
                    return -1;
                }
        }
    } else if (c->role == PK_DPDK_REVERSE && c->out_port >= 0) {
        if (c->out_port >= nports || !ports[c->out_port] || c->out_port == c->port || ports[c->out_port] == w->port) {
            pkd_set_err(err, errlen, "worker %d: reverse: tx port %d must be another port of this engine", i,
                    c->out_port);
            return -1;
        }
        w->out = ports[c->out_port];
        w->out_pid = w->out->pid;
        if (c->queue >= w->out->nq || pk_dpdk_port_busy(w->out)) {
            pkd_set_err(err, errlen, "worker %d: tx port %s: queue %u of %u, or in use by another engine", i,
                    w->out->name, c->queue, w->out->nq);
            return -1;
        }
        for (int j = 0; j < i; j++) {   /* one sender per tx queue */
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if ((o->port == c->out_port || o->out_port == c->out_port) && o->queue == c->queue) {
                pkd_set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->out->name);
                return -1;
            }
        }
    } else if (!(c->rx_cap >= 0) || c->rx_cap > 1e10) {
        pkd_set_err(err, errlen, "worker %d: rx_cap %g out of range 0..1e10", i, c->rx_cap);
        return -1;
    } else if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS) {
        pkd_set_err(err, errlen, "worker %d: flows %u out of range 1..%d", i, c->flows, PK_DPDK_MAX_FLOWS);
        return -1;
    }
    if (c->role != PK_DPDK_FORWARD)
        for (int j = 0; j < i; j++) {   /* a forwarder checked before this one sends on (port, queue)? */
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if (o->role == PK_DPDK_FORWARD && o->out_port == c->port && o->queue == c->queue) {
                pkd_set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->port->name);
                return -1;
            }
        }
    return 0;
}

/* Zeroed and touched now (calloc may map lazily): no page faults in the loop. */
void *pkd_zalloc(size_t size)
{
    size = (size + 63u) & ~(size_t)63u;
    void *p = aligned_alloc(64, size ? size : 64);
    if (p)
        memset(p, 0, size);
    return p;
}

static int tracks(const pk_dpdk_worker_cfg *c)
{
    return c->role == PK_DPDK_RXONLY || (c->role == PK_DPDK_GEN && c->track);
}

/* One flow table per port, shared by the port's receiving workers: a flow comes
 * in on one queue (RSS hashes its tuple; a ring or memif queue carries one
 * generator's flows), so every entry has one writer. */
static int alloc_flow_tables(pk_dpdk_engine *e)
{
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (!tracks(&w->cfg) || w->flows)
            continue;
        uint32_t n = 0;
        for (int j = i; j < e->n; j++)
            if (tracks(&e->w[j].cfg) && e->w[j].port == w->port) {
                const pk_dpdk_worker_cfg *c = &e->w[j].cfg;
                uint32_t top = c->role != PK_DPDK_GEN ? c->flows : c->track == 1 ? c->flow_first + c->flows : 0;
                n = top > n ? top : n;
            }
        for (int j = 0; j < e->n; j++) {   /* generators sending into this port */
            const pk_dpdk_worker_cfg *c = &e->w[j].cfg;
            if (c->role == PK_DPDK_GEN && c->peer >= 0 && e->w[c->peer].port == w->port &&
                c->flow_first + c->flows > n)
                n = c->flow_first + c->flows;
        }
        flow_state *t = pkd_zalloc(sizeof(flow_state) * ((size_t)n + PK_DPDK_MAX_QUEUES));
        if (!t)
            return -1;
        w->owns_flows = 1;
        for (int j = i; j < e->n; j++)
            if (tracks(&e->w[j].cfg) && e->w[j].port == w->port) {
                e->w[j].flows = t;
                e->w[j].nflows = n;
            }
    }
    return 0;
}

pk_dpdk_engine *pk_dpdk_create(pk_dpdk_port *const *ports, int nports,
                               const pk_dpdk_worker_cfg *cfgs, int n, char *err, size_t errlen)
{
    if (pkd_need_pool(err, errlen) != 0)
        return NULL;
    if (n <= 0 || n > PK_DPDK_MAX_WORKERS) {
        pkd_set_err(err, errlen, "between 1 and %d workers, not %d", PK_DPDK_MAX_WORKERS, n);
        return NULL;
    }
    pk_dpdk_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    e->w = aligned_alloc(64, sizeof(worker) * (size_t)n);
    if (!e->w) {
        free(e);
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(e->w, 0, sizeof(worker) * (size_t)n);
    if (pk_engine_init(&e->core, &DPDK_OPS, e, "pk-dpdk-%d", n) != 0) {
        free(e->w);
        free(e);
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    e->n = n;
    for (int i = 0; i < n; i++) {
        e->w[i].cfg = cfgs[i];
        e->w[i].engine = e;
        pk_engine_worker_init(&e->core, i, &e->w[i].c, &e->w[i].hist, e->w[i].err, cfgs[i].cpu);
    }
    for (int i = 0; i < n; i++) {
        if (check_worker(e, ports, nports, i, err, errlen) != 0) {
            e->n = 0;  /* no port is marked busy yet */
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i <= n; i++) {
        if (i < n ? pkd_gen_alloc(&e->w[i]) != 0 : alloc_flow_tables(e) != 0) {
            pkd_set_err(err, errlen, "worker %d: out of memory", i);
            for (int j = 0; j < n; j++)
                e->w[j].port = e->w[j].out = NULL;
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {   /* frames longer than a standard mbuf: one jumbo mbuf each */
        worker *w = &e->w[i];
        w->gpool = pkd_pool;
        if (w->cfg.role == PK_DPDK_GEN && w->frame_len > RTE_MBUF_DEFAULT_DATAROOM) {
            if (pkd_need_jumbo_pool(err, errlen) != 0) {
                for (int j = 0; j < n; j++)
                    e->w[j].port = e->w[j].out = NULL;
                pk_dpdk_destroy(e);
                return NULL;
            }
            w->gpool = pkd_jumbo_pool;
        }
    }
    for (int i = 0; i < n; i++) {
        e->w[i].nic_owner = 1;
        for (int j = 0; j < i; j++)
            if (e->w[j].port == e->w[i].port)
                e->w[i].nic_owner = 0;
    }
    for (int i = 0; i < n; i++)
        if (e->w[i].cfg.role == PK_DPDK_FORWARD && e->w[i].cfg.with_worker >= 0) {
            e->w[i].guest = &e->w[e->w[i].cfg.with_worker];
            e->w[i].guest->hosted = 1;
            e->core.w[e->w[i].cfg.with_worker].hosted = 1;
        }
    for (int i = 0; i < n; i++) {
        __atomic_store_n(&e->w[i].port->busy, 1, __ATOMIC_RELEASE);
        if (e->w[i].out)
            __atomic_store_n(&e->w[i].out->busy, 1, __ATOMIC_RELEASE);
    }
    return e;
}

int pk_dpdk_start(pk_dpdk_engine *e, char *err, size_t errlen)
{
    if (pk_engine_started(&e->core) || pk_engine_running(&e->core) || e->settled) {
        pkd_set_err(err, errlen, "this engine has already run; make a new one");
        return -1;
    }
    pkd_timebase_now(&e->tb);
    for (int i = 0; i < e->n; i++) {   /* no ARP answer from an earlier run counts */
        pk_dpdk_port *p = e->w[i].port;
        p->arp_ip = 0;
        p->arp_claim = p->arp_done = 0;
    }
    uint64_t longest = 0, arp = 0;
    for (int i = 0; i < e->n; i++) {
        const pk_dpdk_worker_cfg *c = &e->w[i].cfg;
        if (c->duration_ns > longest)
            longest = c->duration_ns;
        if (c->role == PK_DPDK_GEN && !c->dst_mac_set && (c->peer < 0 || c->peer_back))
            arp = PK_DPDK_ARP_NS;
    }
    e->hard_end = rte_rdtsc() + tb_cycles(&e->tb, longest + arp + PK_DPDK_DRAIN_NS);
    /* the port-wide NIC counters' base, before any worker sends: a thread that starts late
     * must not miss what another queue's worker already made the PMD count */
    for (int i = 0; i < e->n; i++)
        pkd_read_nic(&e->w[i], rte_rdtsc(), 1);
    if (pk_engine_start(&e->core, err, errlen) != 0) {
        pk_dpdk_join(e);
        return -1;
    }
    return 0;
}

void pk_dpdk_stop(pk_dpdk_engine *e) { pk_engine_stop(&e->core); }

int pk_dpdk_running(const pk_dpdk_engine *e) { return pk_engine_running(&e->core); }

/* What was sent per flow id into the table of port p: generators whose peer is
 * on p, or that track their own frames coming back to p. NULL: no sender here. */
static uint64_t *sent_into(const pk_dpdk_engine *e, const pk_dpdk_port *p, uint32_t nflows)
{
    uint64_t *sent = NULL;
    for (int j = 0; j < e->n; j++) {
        const worker *g = &e->w[j];
        const pk_dpdk_worker_cfg *c = &g->cfg;
        if (c->role != PK_DPDK_GEN || !g->flow_seq)
            continue;
        int into = c->track == 1 ? g->port == p : (c->peer >= 0 && e->w[c->peer].port == p);
        if (!into)
            continue;
        if (!sent && !(sent = calloc((size_t)nflows + PK_DPDK_MAX_QUEUES, sizeof(uint64_t))))
            return NULL;
        for (uint32_t f = 0; f < c->flows && c->flow_first + f < nflows; f++)
            sent[c->flow_first + f] += g->flow_seq[f];
        sent[nflows + g->queue] += g->probe_seq;
    }
    return sent;
}

void pk_dpdk_join(pk_dpdk_engine *e)
{
    int joined = pk_engine_join(&e->core);
    if (e->settled || !joined)
        return;
    /* the port-wide NIC counters once more, now that every queue's worker has stopped */
    for (int i = 0; i < e->n; i++)
        if (e->w[i].nic_owner && !e->w[i].err[0])
            pkd_read_nic(&e->w[i], rte_rdtsc(), 0);
    /* settle loss once: what the sender sent and never arrived, per flow */
    e->settled = 1;
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (!w->owns_flows)
            continue;
        for (uint32_t f = 0; f < w->nflows; f++)   /* before settling moves next for frames never seen */
            w->flows_seen += w->flows[f].next > 0;
        uint64_t *sent = sent_into(e, w->port, w->nflows);
        uint64_t lost = 0;
        for (uint32_t f = 0; f < w->nflows + PK_DPDK_MAX_QUEUES; f++)
            lost += pk_seq_settle(&w->flows[f], sent ? sent[f] : 0);
        free(sent);
        if (lost)
            pk_add(&w->c, PK_seq_lost, lost);   /* on the table's first worker */
    }
}

void pk_dpdk_snapshot(const pk_dpdk_engine *e, int i, uint64_t *counters, uint64_t *hist)
{
    pk_engine_snapshot(&e->core, i, counters, hist);
}

int pk_dpdk_set_rate(pk_dpdk_engine *e, int i, double rate)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_GEN || !(rate >= 0) || rate > 1e10)
        return -1;
    worker *w = &e->w[i];
    __atomic_store(&w->ctl_rate, &rate, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->ctl_gen, 1, __ATOMIC_RELEASE);   /* the rate is visible before the new generation */
    return 0;
}

int pk_dpdk_set_rx_cap(pk_dpdk_engine *e, int i, double cap)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_RXONLY || !(cap >= 0) || cap > 1e10)
        return -1;
    worker *w = &e->w[i];
    __atomic_store(&w->ctl_rate, &cap, __ATOMIC_RELAXED);
    __atomic_add_fetch(&w->ctl_gen, 1, __ATOMIC_RELEASE);
    return 0;
}

int pk_dpdk_flow_sent(const pk_dpdk_engine *e, int i, uint64_t *out, uint32_t n)
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_GEN || !e->w[i].flow_seq)
        return 0;
    const worker *w = &e->w[i];
    uint32_t k = n < w->cfg.flows ? n : w->cfg.flows;
    for (uint32_t f = 0; f < k; f++)
        out[f] = __atomic_load_n(&w->flow_seq[f], __ATOMIC_RELAXED);
    return (int)k;
}

int64_t pk_dpdk_flows_seen(const pk_dpdk_engine *e, int i)
{
    if (i < 0 || i >= e->n || !e->settled || !e->w[i].owns_flows)
        return -1;
    return e->w[i].flows_seen;
}

int pk_dpdk_dst_mac(const pk_dpdk_engine *e, int i, uint8_t mac[6])
{
    if (i < 0 || i >= e->n || e->w[i].cfg.role != PK_DPDK_GEN)
        return -1;
    memcpy(mac, e->w[i].dst_mac, 6);
    return e->w[i].dst_broadcast;
}

int pk_dpdk_settle_remote(pk_dpdk_engine *e, int i, const uint64_t *sent, uint32_t n)
{
    if (i < 0 || i >= e->n || !e->settled || !e->w[i].owns_flows)
        return -1;
    worker *w = &e->w[i];
    uint64_t lost = 0;
    for (uint32_t f = 0; f < n && f < w->nflows; f++)
        if (sent[f] > w->flows[f].next) {   /* the window's gaps were settled at join */
            lost += sent[f] - w->flows[f].next;
            w->flows[f].next = sent[f];
        }
    if (lost)
        pk_add(&w->c, PK_seq_lost, lost);
    return 0;
}

void pk_dpdk_probe_hist(const pk_dpdk_engine *e, int i, uint64_t *hist)
{
    if (i < 0 || i >= e->n)
        return;
    for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
        hist[k] = __atomic_load_n(&e->w[i].probe_hist.b[k], __ATOMIC_RELAXED);
}

const char *pk_dpdk_error(const pk_dpdk_engine *e) { return pk_engine_error(&e->core); }

void pk_dpdk_destroy(pk_dpdk_engine *e)
{
    if (!e)
        return;
    pk_dpdk_stop(e);
    pk_dpdk_join(e);
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->port)
            __atomic_store_n(&w->port->busy, 0, __ATOMIC_RELEASE);
        if (w->out)
            __atomic_store_n(&w->out->busy, 0, __ATOMIC_RELEASE);
        free_frames(w->pend, w->npend);
        free(w->tmpl);
        free(w->pattern);
        free(w->flow_seq);
        if (w->owns_flows)
            free(w->flows);
    }
    pk_engine_fini(&e->core);
    free(e->w);
    free(e);
}
