/* perfkit's DPDK engine: ports from vdev strings and ring pairs, opened in a network
 * namespace when asked, closed with their frames drained (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ring.h>

#define RING_SIZE       1024         /* each ring of a ring:NAME pair */
#define NB_DESC         1024
#define MAX_PAIRS       32
#define DRAIN_ROUNDS    4096

static pthread_mutex_t ports_lock = PTHREAD_MUTEX_INITIALIZER;
static int nports_open;

typedef int (*from_rings_fn)(const char *name, struct rte_ring *const rx[], const unsigned nrx,
                             struct rte_ring *const tx[], const unsigned ntx, const unsigned numa);
static from_rings_fn from_rings;

typedef struct ring_pair {
    char name[20];
    struct rte_ring *r[2][PK_DPDK_MAX_QUEUES];  /* r[e][q] is what end e receives on queue q */
    uint16_t nq;                 /* queues: set by the first end opened */
    int open[2];
} ring_pair;

static ring_pair pairs[MAX_PAIRS];

static void drain_ring(struct rte_ring *r)
{
    void *objs[64];
    for (int round = 0; round < DRAIN_ROUNDS; round++) {
        unsigned n = rte_ring_dequeue_burst(r, objs, 64, NULL);
        if (n == 0)
            break;
        free_frames((struct rte_mbuf **)objs, n);
    }
}

static void drain_rx(uint16_t pid, uint16_t nq)
{
    struct rte_mbuf *m[64];
    for (uint16_t q = 0; q < nq; q++)
        for (int round = 0; round < DRAIN_ROUNDS; round++) {
            uint16_t n = rte_eth_rx_burst(pid, q, m, 64);
            if (n == 0)
                break;
            free_frames(m, n);
        }
}

static void free_pair_rings(ring_pair *p)
{
    for (int e = 0; e < 2; e++)
        for (int q = 0; q < PK_DPDK_MAX_QUEUES; q++) {
            if (!p->r[e][q])
                continue;
            drain_ring(p->r[e][q]);
            rte_ring_free(p->r[e][q]);
            p->r[e][q] = NULL;
        }
    p->name[0] = 0;
    p->nq = 0;
}

static int find_pair(const char *name, uint16_t nq, int create)
{
    int free_slot = -1;
    for (int i = 0; i < MAX_PAIRS; i++) {
        if (pairs[i].r[0][0] && strcmp(pairs[i].name, name) == 0)
            return i;
        if (!pairs[i].r[0][0] && free_slot < 0)
            free_slot = i;
    }
    if (!create || free_slot < 0)
        return -1;
    ring_pair *p = &pairs[free_slot];
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->nq = nq;
    for (int e = 0; e < 2; e++)
        for (uint16_t q = 0; q < nq; q++) {
            char rn[RTE_RING_NAMESIZE];
            snprintf(rn, sizeof(rn), "pkr_%s_%d_%u", name, e, q);
            p->r[e][q] = rte_ring_create(rn, RING_SIZE, (int)pkd_main_socket(), RING_F_SP_ENQ | RING_F_SC_DEQ);
            if (!p->r[e][q]) {
                free_pair_rings(p);
                return -2;
            }
        }
    p->open[0] = p->open[1] = 0;
    return free_slot;
}

static void release_pair(int i)
{
    ring_pair *p = &pairs[i];
    if (p->open[0] || p->open[1])
        return;
    free_pair_rings(p);
}

static int lookup_from_rings(char *err, size_t errlen)
{
    if (from_rings)
        return 0;
    /* net_ring is autoloaded from the PMD directory: find that copy by its soname,
     * so the driver is never registered twice */
    void *h = dlopen("librte_net_ring.so.23", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("librte_net_ring.so.23", RTLD_NOW);
    if (!h) {
        pkd_set_err(err, errlen, "ring pairs need DPDK's net_ring PMD (librte_net_ring): %s", dlerror());
        return -1;
    }
    from_rings = (from_rings_fn)dlsym(h, "rte_eth_from_rings");
    if (!from_rings) {
        pkd_set_err(err, errlen, "librte_net_ring has no rte_eth_from_rings");
        return -1;
    }
    return 0;
}

/* "ring:NAME:0|1" */
static int parse_ring(const char *dev, char *name, size_t namelen, int *end)
{
    if (strncmp(dev, "ring:", 5) != 0)
        return 0;
    const char *s = dev + 5, *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= namelen || (size_t)(colon - s) > 16)
        return -1;
    if (strcmp(colon + 1, "0") != 0 && strcmp(colon + 1, "1") != 0)
        return -1;
    for (const char *c = s; c < colon; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
            return -1;
    memcpy(name, s, (size_t)(colon - s));
    name[colon - s] = 0;
    *end = colon[1] - '0';
    return 1;
}

/* Run a port's control calls inside its network namespace: af_packet and tap
 * make their sockets and ioctls (flags, MTU) in the calling thread's namespace. */
static int netns_enter(const char *netns, int *home, const char *dev, char *err, size_t errlen)
{
    *home = -1;
    if (!netns || !netns[0])
        return 0;
    int target = open(netns, O_RDONLY | O_CLOEXEC);
    *home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (target < 0 || *home < 0 || setns(target, CLONE_NEWNET) != 0) {
        pkd_set_err(err, errlen, "port %s: enter network namespace %s: %s", dev, netns, strerror(errno));
        if (target >= 0)
            close(target);
        if (*home >= 0)
            close(*home);
        *home = -1;
        return -1;
    }
    close(target);
    return 0;
}

static void netns_leave(int home)
{
    if (home < 0)
        return;
    if (setns(home, CLONE_NEWNET) != 0) /* cannot happen with our own fd */
        abort();                        /* never leave the caller's thread in a lab */
    close(home);
}

static int probe(const char *dev, char *err, size_t errlen)
{
    int rc = rte_dev_probe(dev);
    if (rc < 0) {
        pkd_set_err(err, errlen, "port %s: rte_dev_probe failed: %s (the DPDK log on stderr says more)",
                    dev, rte_strerror(-rc));
        return -1;
    }
    return 0;
}

#define RX_CSUM (RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM)
#define TX_CSUM (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM | \
                 RTE_ETH_TX_OFFLOAD_TCP_TSO)
#define ETH_OVERHEAD (RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)

static uint16_t desc_fit(uint16_t n, const struct rte_eth_desc_lim *lim);

/* n descriptors within a device's limits: clamped to nb_min..nb_max, a multiple of nb_align. */
uint16_t pk_dpdk_desc_fit(uint16_t n, uint16_t nb_min, uint16_t nb_max, uint16_t nb_align)
{
    const struct rte_eth_desc_lim lim = { .nb_min = nb_min, .nb_max = nb_max, .nb_align = nb_align };
    return desc_fit(n, &lim);
}

static uint16_t desc_fit(uint16_t n, const struct rte_eth_desc_lim *lim)
{
    uint16_t lo = lim->nb_min, hi = lim->nb_max ? lim->nb_max : UINT16_MAX, al = lim->nb_align ? lim->nb_align : 1;
    if (n > hi)
        n = hi;
    if (n < lo)
        n = lo;
    n = (uint16_t)(n - n % al);
    if (n < lo)   /* aligned down below the minimum: the next multiple up */
        n = (uint16_t)(n + al);
    return n ? n : al;
}

static void setup_from_info(pk_dpdk_port_setup *s, const struct rte_eth_dev_info *info)
{
    snprintf(s->driver, sizeof(s->driver), "%s", info->driver_name ? info->driver_name : "?");
    s->max_rx_queues = info->max_rx_queues;
    s->max_tx_queues = info->max_tx_queues;
    s->hash_key_size = info->hash_key_size;
    s->flow_type_rss_offloads = info->flow_type_rss_offloads;
    s->rx_offload_capa = info->rx_offload_capa;
    s->tx_offload_capa = info->tx_offload_capa;
    s->min_mtu = info->min_mtu;
    s->max_mtu = info->max_mtu;
    s->max_rx_pktlen = info->max_rx_pktlen;
    s->rx_desc_min = info->rx_desc_lim.nb_min;
    s->rx_desc_max = info->rx_desc_lim.nb_max;
    s->rx_desc_align = info->rx_desc_lim.nb_align;
    s->tx_desc_min = info->tx_desc_lim.nb_min;
    s->tx_desc_max = info->tx_desc_lim.nb_max;
    s->tx_desc_align = info->tx_desc_lim.nb_align;
}

/* The port set up from what the device reports (rte_eth_dev_info), each choice kept in p->setup:
 * RSS with a symmetric key over several queues, checksum and TSO offloads where offered, the
 * MTU asked within the device's limits, descriptors within its limits. */
static int setup_queues(pk_dpdk_port *p, const char *dev, int mtu, char *err, size_t errlen)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    struct rte_eth_dev_info info;
    memset(&info, 0, sizeof(info));
    pk_dpdk_port_setup *s = &p->setup;
    memset(s, 0, sizeof(*s));
    int rc = rte_eth_dev_info_get(p->pid, &info);
    if (rc == 0)
        setup_from_info(s, &info);
    s->queues = p->nq;
    if (rc == 0 && (p->nq > info.max_rx_queues || p->nq > info.max_tx_queues)) {
        pkd_set_err(err, errlen, "port %s: %u queues asked, the %s PMD takes at most %u rx and %u tx queues",
                    dev, p->nq, info.driver_name ? info.driver_name : "?", info.max_rx_queues, info.max_tx_queues);
        return -1;
    }
    /* RSS spreads flows over the rx queues where the PMD has it (a NIC, tap); net_ring and
     * memif queues are fixed paths: tx queue q reaches rx queue q. The key repeats 0x6d5a so
     * a flow's two directions hash alike (one queue sees both). */
    static uint8_t sym_key[255];
    uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
    if (rc == 0 && p->nq > 1 && rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
        if (info.hash_key_size) {
            for (unsigned i = 0; i < info.hash_key_size; i++)
                sym_key[i] = i % 2 ? 0x5a : 0x6d;
            conf.rx_adv_conf.rss_conf.rss_key = sym_key;
            conf.rx_adv_conf.rss_conf.rss_key_len = info.hash_key_size;
            s->rss_key = 1;
        } else {
            s->rss_key = 2;   /* the PMD takes no key of ours */
        }
        p->rss = 1;
        s->rss = 1;
        s->rss_hf = rss;
    }
    /* checksums and TSO where the device does them: a frame asks for them by its mbuf flags
     * (pkd_tx_csum), frames without them go as they are */
    conf.rxmode.offloads = info.rx_offload_capa & RX_CSUM;
    conf.txmode.offloads = info.tx_offload_capa & TX_CSUM;
    struct rte_mempool *rx_pool = pkd_pool;
    s->mtu_asked = mtu > 0 ? (uint32_t)mtu : 0;
    if (rc == 0 && mtu > 0) {
        uint32_t m = (uint32_t)mtu;
        if (info.max_rx_pktlen > ETH_OVERHEAD && m > info.max_rx_pktlen - ETH_OVERHEAD)
            m = info.max_rx_pktlen - ETH_OVERHEAD;
        if (info.max_mtu && m > info.max_mtu)
            m = info.max_mtu;
        if (m < info.min_mtu)
            m = info.min_mtu;
        conf.rxmode.mtu = m;
        uint32_t room = rte_pktmbuf_data_room_size(pkd_pool) - RTE_PKTMBUF_HEADROOM;
        if (m + ETH_OVERHEAD > room) {   /* a jumbo frame spans mbufs, or takes a jumbo one */
            if (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) {
                conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
            } else {
                if (pkd_need_jumbo_pool(err, errlen) != 0)
                    return -1;
                rx_pool = pkd_jumbo_pool;
                s->rx_pool_jumbo = 1;
            }
        }
    }
    if (rc == 0)
        rc = rte_eth_dev_configure(p->pid, p->nq, p->nq, &conf);
    if (rc == 0 && conf.rxmode.mtu) {
        int mrc = rte_eth_dev_set_mtu(p->pid, (uint16_t)conf.rxmode.mtu);   /* tap: the kernel side too */
        if (mrc != 0 && mrc != -ENOTSUP)
            rc = mrc;
    }
    s->rx_offloads = conf.rxmode.offloads;
    s->tx_offloads = conf.txmode.offloads;
    uint16_t nrx = desc_fit(NB_DESC, &info.rx_desc_lim), ntx = desc_fit(NB_DESC, &info.tx_desc_lim);
    if (rc == 0)
        rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->pid, &nrx, &ntx);
    s->nb_rxd = nrx;
    s->nb_txd = ntx;
    for (uint16_t q = 0; rc == 0 && q < p->nq; q++) {
        rc = rte_eth_rx_queue_setup(p->pid, q, nrx, pkd_main_socket(), NULL, rx_pool);
        if (rc == 0)
            rc = rte_eth_tx_queue_setup(p->pid, q, ntx, pkd_main_socket(), NULL);
    }
    if (rc == 0)
        rc = rte_eth_dev_start(p->pid);
    if (rc == 0)
        p->started = 1;
    if (rc != 0) {
        pkd_set_err(err, errlen, "port %s: configure/start failed: %s%s", dev, rte_strerror(rc < 0 ? -rc : rc),
                    strncmp(dev, "net_memif", 9) == 0 && strstr(dev, "role=client")
                        ? " (a memif client connects at start: is the role=server side running on the same socket?)"
                        : "");
        return -1;
    }
    uint16_t now_mtu = 0;
    if (rte_eth_dev_get_mtu(p->pid, &now_mtu) == 0)
        s->mtu = now_mtu;
    /* virtio with an rx L4 checksum offload may hand over a partial sum (the peer left it to
     * an offload): the engines finish or accept it, as on a port fed by a Linux stack */
    if ((s->rx_offloads & (RTE_ETH_RX_OFFLOAD_UDP_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM)) &&
        strncmp(s->driver, "net_virtio", 10) == 0)
        p->kernel = 1;
    rte_eth_stats_reset(p->pid);
    struct rte_ether_addr a;
    memset(&a, 0, sizeof(a));
    rte_eth_macaddr_get(p->pid, &a);
    memcpy(p->mac, a.addr_bytes, 6);
    static const uint8_t zero[6];
    if (memcmp(p->mac, zero, 6) == 0) {
        /* rings have no address: a locally administered one, unique per port id */
        const uint8_t mac[6] = { 0x02, 0x70, 0x6b, 0x00, (uint8_t)(p->pid >> 8), (uint8_t)p->pid };
        memcpy(p->mac, mac, 6);
    }
    return 0;
}

/* A PCI address (0000:01:00.0, what perfkit.spec passes on): EAL probed the NIC at start (-a). */
static int is_pci(const char *name)
{
    unsigned dom, bus, dev, fn;
    char end;
    return sscanf(name, "%4x:%2x:%2x.%1u%c", &dom, &bus, &dev, &fn, &end) == 4;
}

static uint8_t pci_held[RTE_MAX_ETHPORTS];   /* a perfkit port has this NIC's ethdev open */

static void unplug(pk_dpdk_port *p)
{
    int home = -1;
    if (p->memif) {                 /* no memif control handling during the teardown */
        pkd_memif_remove(p);
        pkd_ctl_quiet_begin();
    }
    netns_enter(p->netns, &home, p->name, NULL, 0);
    if (p->started) {
        drain_rx(p->pid, p->nq);
        rte_eth_dev_stop(p->pid);
        p->started = 0;
    }
    rte_eth_dev_close(p->pid);
    if (p->pci)   /* detached: a later open probes it again */
        pci_held[p->pid] = 0;
    rte_eal_hotplug_remove(p->pci ? "pci" : "vdev", p->name);
    netns_leave(home);
    p->nkfd = 0;   /* the PMD closed its sockets */
    if (p->memif)
        pkd_ctl_quiet_end();
}

pk_dpdk_port *pk_dpdk_port_open(const char *dev, const char *netns, char *err, size_t errlen)
{
    return pk_dpdk_port_open_q(dev, netns, 1, err, errlen);
}

pk_dpdk_port *pk_dpdk_port_open_q(const char *dev, const char *netns, int nq, char *err, size_t errlen)
{
    return pk_dpdk_port_open_cfg(dev, netns, nq, 0, err, errlen);
}

pk_dpdk_port *pk_dpdk_port_open_cfg(const char *dev, const char *netns, int nq, int mtu, char *err, size_t errlen)
{
    if (pkd_need_pool(err, errlen) != 0)
        return NULL;
    if (nq < 1 || nq > PK_DPDK_MAX_QUEUES) {
        pkd_set_err(err, errlen, "port %s: queues %d out of range 1..%d", dev, nq, PK_DPDK_MAX_QUEUES);
        return NULL;
    }
    if (mtu < 0 || mtu > PK_DPDK_MAX_JUMBO) {
        pkd_set_err(err, errlen, "port %s: mtu %d out of range 0..%d", dev, mtu, PK_DPDK_MAX_JUMBO);
        return NULL;
    }
    pk_dpdk_port *p = calloc(1, sizeof(*p));
    if (!p) {
        pkd_set_err(err, errlen, "out of memory");
        return NULL;
    }
    p->pair = -1;
    p->nq = (uint16_t)nq;
    char rname[20];
    int end = 0;
    static uint8_t socks_before[MAX_FDS_SEEN / 8];   /* under ports_lock */
    int ring = parse_ring(dev, rname, sizeof(rname), &end);
    pthread_mutex_lock(&ports_lock);
    if (ring < 0) {
        pkd_set_err(err, errlen, "port %s: a ring pair end is ring:NAME:0 or ring:NAME:1 "
                    "(NAME: 1-16 of a-z 0-9 _)", dev);
        goto fail;
    }
    if (ring > 0) {
        if (lookup_from_rings(err, errlen) != 0)
            goto fail;
        int i = find_pair(rname, (uint16_t)nq, 1);
        if (i == -2) {
            pkd_set_err(err, errlen, "port %s: cannot make its rings: %s", dev, rte_strerror(rte_errno));
            goto fail;
        }
        if (i < 0) {
            pkd_set_err(err, errlen, "port %s: at most %d ring pairs at once", dev, MAX_PAIRS);
            goto fail;
        }
        if (pairs[i].open[end]) {
            pkd_set_err(err, errlen, "port %s is already open", dev);
            goto fail;
        }
        if (pairs[i].nq != nq) {
            pkd_set_err(err, errlen, "port %s: the other end of the pair has %u queues, not %d (open both "
                        "ends with as many)", dev, pairs[i].nq, nq);
            goto fail;
        }
        char ename[32];
        snprintf(ename, sizeof(ename), "pk%s_%d", rname, end);
        snprintf(p->name, sizeof(p->name), "net_ring_%s", ename);
        int pid = from_rings(ename, pairs[i].r[end], nq, pairs[i].r[1 - end], nq, pkd_main_socket());
        if (pid < 0) {
            release_pair(i);
            pkd_set_err(err, errlen, "port %s: rte_eth_from_rings failed: %s", dev, rte_strerror(rte_errno));
            goto fail;
        }
        p->pid = (uint16_t)pid;
        p->pair = i;
        p->end = end;
        pairs[i].open[end] = 1;
        for (int q = 0; q < nq; q++)
            drain_ring(pairs[i].r[end][q]); /* nothing stale from an earlier life of this end */
    } else {
        size_t n = strcspn(dev, ",");
        if (n == 0 || n >= sizeof(p->name)) {
            pkd_set_err(err, errlen, "port %s: no device name before the first comma", dev);
            goto fail;
        }
        memcpy(p->name, dev, n);
        p->name[n] = 0;
        p->memif = strncmp(p->name, "net_memif", 9) == 0;
        p->kernel = strncmp(p->name, "net_af_packet", 13) == 0 || strncmp(p->name, "net_af_xdp", 10) == 0 ||
                    strncmp(p->name, "net_tap", 7) == 0;
        p->pci = is_pci(p->name);
        uint16_t pid;
        int probed = rte_eth_dev_get_port_by_name(p->name, &pid) == 0;
        if (probed && !(p->pci && !pci_held[pid])) {   /* a NIC EAL probed at start is free to take */
            pkd_set_err(err, errlen, "port %s is already open", p->name);
            goto fail;
        }
        if (netns && netns[0]) {
            if (strlen(netns) >= sizeof(p->netns)) {
                pkd_set_err(err, errlen, "port %s: netns path too long", dev);
                goto fail;
            }
            snprintf(p->netns, sizeof(p->netns), "%s", netns);
        }
        int home;
        if (netns_enter(p->netns, &home, dev, err, errlen) != 0)
            goto fail;
        pkd_sockets_now(socks_before);
        int rc = probed ? 0 : probe(dev, err, errlen);
        netns_leave(home);
        if (rc != 0)
            goto fail;
        if (rte_eth_dev_get_port_by_name(p->name, &pid) != 0) {
            rte_eal_hotplug_remove(p->pci ? "pci" : "vdev", p->name);
            pkd_set_err(err, errlen, "port %s: probed, but it made no ethdev called %s "
                        "(only Ethernet vdevs are ports)", dev, p->name);
            goto fail;
        }
        p->pid = pid;
        if (p->pci)
            pci_held[pid] = 1;
    }
    int home, rc;
    if (netns_enter(p->netns, &home, dev, err, errlen) != 0) {
        rc = -1;
    } else {
        rc = setup_queues(p, dev, mtu, err, errlen);
        if (rc == 0 && p->pair < 0)
            pkd_find_kernel_sockets(p, dev, socks_before);
        netns_leave(home);
    }
    if (rc != 0) {
        unplug(p);
        if (p->pair >= 0) {
            pairs[p->pair].open[p->end] = 0;
            release_pair(p->pair);
        }
        goto fail;
    }
    nports_open++;
    pthread_mutex_unlock(&ports_lock);
    if (p->memif)
        pkd_memif_add(p);
    return p;
fail:
    pthread_mutex_unlock(&ports_lock);
    free(p);
    return NULL;
}

void pk_dpdk_port_close(pk_dpdk_port *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&ports_lock);
    unplug(p);
    if (p->pair >= 0) {
        pairs[p->pair].open[p->end] = 0;
        release_pair(p->pair);
    }
    nports_open--;
    pthread_mutex_unlock(&ports_lock);
    free(p);
}

int pk_dpdk_port_id(const pk_dpdk_port *p) { return p->pid; }
int pk_dpdk_port_queues(const pk_dpdk_port *p) { return p->nq; }

int pk_dpdk_port_link(const pk_dpdk_port *p)
{
    struct rte_eth_link link;
    memset(&link, 0, sizeof(link));
    if (rte_eth_link_get_nowait(p->pid, &link) != 0)
        return -1;
    return link.link_status == RTE_ETH_LINK_UP;
}
int pk_dpdk_port_rss(const pk_dpdk_port *p) { return p->rss; }
void pk_dpdk_port_get_setup(const pk_dpdk_port *p, pk_dpdk_port_setup *out) { *out = p->setup; }
void pk_dpdk_port_tx_offloads_unused(pk_dpdk_port *p) { p->setup.tx_offloads = 0; }

int pk_dpdk_port_dev_info(const pk_dpdk_port *p, pk_dpdk_port_setup *out)
{
    struct rte_eth_dev_info info;
    memset(&info, 0, sizeof(info));
    memset(out, 0, sizeof(*out));
    if (rte_eth_dev_info_get(p->pid, &info) != 0)
        return -1;
    setup_from_info(out, &info);
    return 0;
}

/* A memif client whose link is still down: stop the port (memif_disconnect drops its control
 * connection) and start it (memif_connect_client opens a new one), with the interrupt thread
 * held so that no memif handler runs on the channel being dropped. A handshake that stalled
 * (the server saw a connection and never finished it) starts over instead of waiting forever. */
int pk_dpdk_port_reconnect(pk_dpdk_port *p, char *err, size_t errlen)
{
    if (!p->memif || pk_dpdk_port_busy(p)) {
        pkd_set_err(err, errlen, "port %s: only an idle memif port reconnects", p->name);
        return -1;
    }
    pthread_mutex_lock(&ports_lock);
    pkd_ctl_quiet_begin();
    int home, rc = -1;
    if (netns_enter(p->netns, &home, p->name, err, errlen) == 0) {
        if (p->started)
            rte_eth_dev_stop(p->pid);
        rc = rte_eth_dev_start(p->pid);
        p->started = rc == 0;
        netns_leave(home);
        if (rc != 0)
            pkd_set_err(err, errlen, "port %s: start failed on reconnect: %s (a memif client connects at start: "
                    "is the role=server side running on the same socket?)", p->name, rte_strerror(rc < 0 ? -rc : rc));
    }
    pkd_ctl_quiet_end();
    pthread_mutex_unlock(&ports_lock);
    return rc == 0 ? 0 : -1;
}
const char *pk_dpdk_port_name(const pk_dpdk_port *p) { return p->name; }
void pk_dpdk_port_mac(const pk_dpdk_port *p, uint8_t mac[6]) { memcpy(mac, p->mac, 6); }
void pk_dpdk_port_set_ip(pk_dpdk_port *p, uint32_t ip) { p->ip = ip; }
int pk_dpdk_port_busy(const pk_dpdk_port *p) { return __atomic_load_n(&p->busy, __ATOMIC_ACQUIRE); }

int pk_dpdk_port_stats(const pk_dpdk_port *p, uint64_t out[5])
{
    struct rte_eth_stats st;
    memset(&st, 0, sizeof(st));
    if (rte_eth_stats_get(p->pid, &st) != 0)
        return -1;
    out[0] = st.ipackets;
    out[1] = st.opackets;
    out[2] = st.ierrors;
    out[3] = st.oerrors;
    out[4] = st.imissed;
    return 0;
}

int pkd_tx_csum(const pk_dpdk_port *p, struct rte_mbuf *m, uint32_t l2)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (l2 < ETH_LEN || len < l2 + IP_LEN || rd16(d + l2 - 2) != 0x0800 || (d[l2] >> 4) != 4)
        return -1;
    uint8_t *ip = d + l2;
    const uint32_t ihl = (uint32_t)(ip[0] & 15) * 4, tot = rd16(ip + 2);
    if (ihl < IP_LEN || tot < ihl || l2 + tot > len)
        return -1;
    const uint64_t tx = p->setup.tx_offloads;
    uint8_t *l4 = ip + ihl;
    const uint32_t l4len = tot - ihl;
    const uint8_t proto = ip[9];
    const int frag = (rd16(ip + 6) & 0x3fff) != 0;
    uint8_t *field = NULL;
    uint64_t l4flag = 0;
    if (!frag && proto == 17 && l4len >= UDP_LEN) {
        field = l4 + 6;
        l4flag = tx & RTE_ETH_TX_OFFLOAD_UDP_CKSUM ? RTE_MBUF_F_TX_UDP_CKSUM : 0;
    } else if (!frag && proto == 6 && l4len >= 20) {
        field = l4 + 16;
        l4flag = tx & RTE_ETH_TX_OFFLOAD_TCP_CKSUM ? RTE_MBUF_F_TX_TCP_CKSUM : 0;
    }
    memset(ip + 10, 0, 2);
    m->l2_len = l2;
    m->l3_len = ihl;
    if (tx & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) {
        m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
    } else {
        uint16_t c = (uint16_t)~fold(sum16(ip, ihl, 0));
        memcpy(ip + 10, &c, 2);
    }
    if (!field)
        return 0;
    memset(field, 0, 2);
    const uint8_t head[4] = { 0, proto, (uint8_t)(l4len >> 8), (uint8_t)l4len };
    const uint64_t pseudo = sum16(ip + 12, 8, sum16(head, 4, 0));
    if (l4flag) {   /* the device sums the segment over the pseudo header's sum */
        m->ol_flags |= RTE_MBUF_F_TX_IPV4 | l4flag;
        uint16_t c = (uint16_t)fold(pseudo);
        memcpy(field, &c, 2);
        return 0;
    }
    uint16_t c = (uint16_t)~fold(sum16(l4, l4len, pseudo));
    if (proto == 17 && c == 0)
        c = 0xffff;
    memcpy(field, &c, 2);
    return 0;
}

int pk_dpdk_port_send(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n)
{
    return pk_dpdk_port_send_csum(p, buf, lens, n, 0);
}

int pk_dpdk_port_send_csum(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n, int csum)
{
    if (pk_dpdk_port_busy(p) || n < 0)
        return -1;
    if (!pk_dpdk_port_burst_ok(p))
        return 0;
    struct rte_mbuf *m[64];
    int sent = 0;
    size_t off = 0;
    while (sent < n) {
        int k = 0;
        for (; k < 64 && sent + k < n; k++) {
            uint32_t len = lens[sent + k];
            m[k] = rte_pktmbuf_alloc(pkd_pool);
            if (!m[k])
                break;
            char *d = rte_pktmbuf_append(m[k], (uint16_t)(len > 0xffff ? 0xffff : len));
            if (!d) {  /* longer than one buffer */
                rte_pktmbuf_free(m[k]);
                break;
            }
            memcpy(d, buf + off, len);
            off += len;
            if (csum)
                pkd_tx_csum(p, m[k], ETH_LEN);
        }
        if (k == 0)
            break;
        uint16_t done = rte_eth_tx_burst(p->pid, 0, m, (uint16_t)k);
        free_frames(m + done, (unsigned)(k - done));
        sent += done;
        if (done < k)
            break;
    }
    return sent;
}

/* A received IPv4 UDP/TCP frame whose L4 sum the device left partial: the whole sum. */
static void rx_csum_finish(struct rte_mbuf *m)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (len < ETH_LEN + IP_LEN || rd16(d + 12) != 0x0800 || (d[ETH_LEN] >> 4) != 4)
        return;
    uint8_t *ip = d + ETH_LEN;
    const uint32_t ihl = (uint32_t)(ip[0] & 15) * 4, tot = rd16(ip + 2);
    if (ihl < IP_LEN || tot < ihl || ETH_LEN + tot > len || (rd16(ip + 6) & 0x3fff) != 0)
        return;
    const uint32_t l4len = tot - ihl;
    if (ip[9] == 17 && l4len >= UDP_LEN && rd16(ip + ihl + 4) >= UDP_LEN && rd16(ip + ihl + 4) <= l4len)
        pkd_l4_csum_finish(ip, ip + ihl, rd16(ip + ihl + 4), 17);
    else if (ip[9] == 6 && l4len >= 20)
        pkd_l4_csum_finish(ip, ip + ihl, l4len, 6);
}

int pk_dpdk_port_recv(pk_dpdk_port *p, uint8_t *buf, size_t cap, uint32_t *lens, int max)
{
    if (pk_dpdk_port_busy(p) || max <= 0)
        return -1;
    if (!pk_dpdk_port_burst_ok(p))
        return 0;
    struct rte_mbuf *m[64];
    uint16_t n = rte_eth_rx_burst(p->pid, 0, m, (uint16_t)(max < 64 ? max : 64));
    size_t off = 0;
    for (uint16_t i = 0; i < n; i++) {
        uint32_t len = rte_pktmbuf_pkt_len(m[i]);
        if ((m[i]->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_NONE)
            rx_csum_finish(m[i]);   /* the device left the sum partial: the frame as a wire carries it */
        if (len > cap - off)
            len = (uint32_t)(cap - off);
        const void *d = rte_pktmbuf_read(m[i], 0, len, buf + off);
        if (d && d != buf + off)
            memcpy(buf + off, d, len);
        lens[i] = len;
        off += len;
        rte_pktmbuf_free(m[i]);
    }
    return n;
}

int pk_dpdk_ports_open(void) { return __atomic_load_n(&nports_open, __ATOMIC_RELAXED); }

/* ------------------------------------------ hooks for other engines (tcp_engine.c) */

uint32_t pk_dpdk_port_ip(const pk_dpdk_port *p) { return p->ip; }

int pk_dpdk_port_claim(pk_dpdk_port *p)
{
    int idle = 0;
    return __atomic_compare_exchange_n(&p->busy, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 0 : -1;
}

void pk_dpdk_port_release(pk_dpdk_port *p) { __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE); }
