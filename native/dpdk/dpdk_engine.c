/* perfkit's DPDK engine: see dpdk_engine.h. */
#define _GNU_SOURCE
#include "dpdk_engine.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/prctl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_alarm.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_version.h>

#include "perfkit/clock.h"
#include "perfkit/seqwin.h"
#include "perfkit/wire.h"

#define QUIET_NS        50000000ull  /* receivers: quiet this long after their feeders are done */
#define FLUSH_NS        1000000ull   /* refresh the CPU counters this often */
#define NIC_EVERY_NS    100000000ull /* read the PMD's counters this often */
#define ARP_RETRY_NS    200000000ull /* a generator re-sends its ARP request this often */
#define IDLE_YIELD      256          /* idle loops before a worker yields its CPU */
#define GEN_RX_EVERY_NS 20000ull     /* a generator that expects nothing back polls rx this often */
#define CATCHUP_NS      250000000ull /* a paced generator may finish this late */
#define RING_SIZE       1024         /* each ring of a ring:NAME pair */
#define NB_DESC         1024
#define POOL_CACHE      256
#define MAX_PAIRS       32
#define DRAIN_ROUNDS    4096

/* 64-byte frames have 18 bytes of UDP payload: too few for pk_wire_hdr (24).
 * They carry this short form of it instead: the same fields, the sequence and
 * the timestamp cut to their low 32 bits (the receiver restores the sequence
 * from its window, and latencies below 4.29 s from its own clock). Host byte
 * order, as pk_wire_hdr. Frames of 70 bytes and more carry pk_wire_hdr itself,
 * so a socket-engine receiver can read them. */
#define PK_WIRE_SHORT_MAGIC 0x706b7331u /* "pks1" */
typedef struct pk_wire_short {
    uint32_t magic;
    uint32_t flow;
    uint32_t seq_lo;
    uint32_t tx_ns_lo;
} pk_wire_short;
#define PK_WIRE_SHORT_LEN ((uint32_t)sizeof(pk_wire_short))

/* Latency probes carry pk_wire_hdr with this magic; flow = the generator's queue. */
#define PK_WIRE_PROBE_MAGIC 0x706b7031u /* "pkp1" */
#define PROBE_FLAG 0x80000000u          /* in pend_len: this pending frame is a probe */

#define ETH_LEN   14
#define IP_LEN    20
#define UDP_LEN   8
#define HDRS_LEN  (ETH_LEN + IP_LEN + UDP_LEN)
#define FCS_LEN   4

/* ------------------------------------------------------------ time base */

/* TSC -> CLOCK_MONOTONIC nanoseconds, calibrated at each engine start against
 * a TSC/clock pair taken at EAL init (the TSC is invariant on the targets). */
typedef struct timebase {
    uint64_t tsc0, ns0, hz;
    uint64_t mult;               /* ns per cycle, << 32 */
} timebase;

static inline uint64_t tb_cyc_ns(const timebase *tb, uint64_t cycles)
{
    return (uint64_t)(((unsigned __int128)cycles * tb->mult) >> 32);
}

static inline uint64_t tb_ns(const timebase *tb, uint64_t tsc)
{
    if (tsc >= tb->tsc0)
        return tb->ns0 + tb_cyc_ns(tb, tsc - tb->tsc0);
    return tb->ns0 - tb_cyc_ns(tb, tb->tsc0 - tsc);  /* another core, a few cycles behind */
}

static inline uint64_t tb_cycles(const timebase *tb, uint64_t ns)
{
    return (uint64_t)(((unsigned __int128)ns * tb->hz) / 1000000000ull);
}

static void tsc_mono_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    *tsc = rte_rdtsc();
    *ns = pk_now_ns();
    for (int i = 0; i < 7; i++) {
        uint64_t a = pk_now_ns();
        uint64_t t = rte_rdtsc();
        uint64_t b = pk_now_ns();
        if (b - a < best) {
            best = b - a;
            *tsc = t;
            *ns = a + (b - a) / 2;
        }
    }
}

/* ------------------------------------------------------------------ EAL */

static int eal_state;                 /* 0 never, 1 up, -1 failed */
static char eal_fail[256];
static struct rte_mempool *pool;
static struct rte_mempool *jumbo_pool;   /* frames above one standard mbuf: made on first need */
static uint64_t cal_tsc, cal_ns;      /* the TSC/clock pair taken at init */
static pthread_mutex_t ports_lock = PTHREAD_MUTEX_INITIALIZER;
static int nports_open;

typedef int (*from_rings_fn)(const char *name, struct rte_ring *const rx[], const unsigned nrx,
                             struct rte_ring *const tx[], const unsigned ntx, const unsigned numa);
static from_rings_fn from_rings;

static void set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static unsigned main_socket(void)
{
    int s = (int)rte_lcore_to_socket_id(rte_get_main_lcore());
    return s < 0 ? 0u : (unsigned)s;
}

#define JUMBO_MBUFS 2047
#define JUMBO_ROOM  (RTE_PKTMBUF_HEADROOM + PK_DPDK_MAX_JUMBO)

static int need_jumbo_pool(char *err, size_t errlen)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!jumbo_pool)
        jumbo_pool = rte_pktmbuf_pool_create("pk_jumbo", JUMBO_MBUFS, POOL_CACHE, 0, JUMBO_ROOM,
                                             (int)main_socket());
    pthread_mutex_unlock(&lock);
    if (!jumbo_pool) {
        set_err(err, errlen, "DPDK: cannot make the jumbo frame pool (%u mbufs of %u bytes): %s "
                "(give EAL more memory)", JUMBO_MBUFS, JUMBO_ROOM, rte_strerror(rte_errno));
        return -1;
    }
    return 0;
}

static int make_pool(uint32_t nb_mbufs, char *err, size_t errlen)
{
    pool = rte_pktmbuf_pool_create("pk_mbufs", nb_mbufs, POOL_CACHE, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   (int)main_socket());
    if (!pool) {
        /* EAL is up and stays up; a later call can try again with fewer buffers */
        set_err(err, errlen, "DPDK: cannot make a pool of %u mbufs: %s (give EAL more memory, "
                "or use fewer mbufs)", nb_mbufs, rte_strerror(rte_errno));
        return -1;
    }
    return 0;
}

/* A native crash (a PMD under a worker, EAL's interrupt thread) names its thread and stack on
 * stderr, then goes on to the handler that was there before (Python's faulthandler shows only
 * Python threads' stacks) or the default action. */
static struct sigaction crash_prev_segv, crash_prev_bus;

static void crash_report(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char name[17] = "?", line[200];
    prctl(PR_GET_NAME, name, 0, 0, 0);
    int n = snprintf(line, sizeof(line), "perfkit: native crash: signal %d at address %p in thread '%s'; "
                     "its stack:\n", sig, si ? si->si_addr : NULL, name);
    if (n > 0)
        n = (int)write(2, line, (size_t)n);   /* (stderr gone: the stack goes nowhere either) */
    void *frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    sigaction(sig, sig == SIGBUS ? &crash_prev_bus : &crash_prev_segv, NULL);
    raise(sig);   /* pending until this returns, then the previous handler's */
}

static void crash_report_install(void)
{
    void *warm[2];
    backtrace(warm, 2);   /* loads libgcc now, not in the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = crash_report;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &crash_prev_segv);
    sigaction(SIGBUS, &sa, &crash_prev_bus);
}

int pk_dpdk_eal_init(int argc, const char *const *argv, uint32_t nb_mbufs, char *err, size_t errlen)
{
    if (eal_state == 1)
        return pool ? 0 : make_pool(nb_mbufs, err, errlen);
    if (eal_state == -1) {
        set_err(err, errlen, "DPDK EAL failed to initialise earlier in this process (%s); "
                "EAL can be initialised only once per process: restart the kernel/process", eal_fail);
        return -1;
    }
    if (argc < 1 || argc > 64) {
        set_err(err, errlen, "EAL: between 1 and 64 arguments, not %d", argc);
        return -1;
    }
    /* rte_eal_init permutes its argv and keeps pointers into it: a copy that
     * lives as long as the process (once per process) */
    static char *args[65];
    for (int i = 0; i < argc; i++)
        args[i] = strdup(argv[i]);
    args[argc] = NULL;

    /* DPDK logs to stdout by default: keep stdout for results (JSON lines) */
    rte_openlog_stream(stderr);

    /* EAL pins the calling thread to its main lcore's CPU set: put it back */
    cpu_set_t saved;
    CPU_ZERO(&saved);
    int have_aff = pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
    int rc = rte_eal_init(argc, args);
    int init_errno = rte_errno;
    if (have_aff)
        pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    if (rc < 0) {
        eal_state = -1;
        snprintf(eal_fail, sizeof(eal_fail), "rte_eal_init: %s", rte_strerror(init_errno));
        set_err(err, errlen, "DPDK EAL failed to initialise (%s; its log is on stderr). "
                "EAL can be initialised only once per process: fix the options, then restart "
                "the kernel/process", eal_fail);
        return -1;
    }
    eal_state = 1;
    crash_report_install();
    tsc_mono_pair(&cal_tsc, &cal_ns);
    return make_pool(nb_mbufs, err, errlen);
}

static int need_pool(char *err, size_t errlen)
{
    if (eal_state != 1) {
        set_err(err, errlen, "DPDK EAL is not initialised");
        return -1;
    }
    if (!pool) {
        set_err(err, errlen, "DPDK: no mbuf pool (its creation failed at EAL init)");
        return -1;
    }
    return 0;
}

int pk_dpdk_eal_state(void) { return eal_state; }

void pk_dpdk_pool_counts(uint32_t *size, uint32_t *avail)
{
    *size = (pool ? pool->size : 0) + (jumbo_pool ? jumbo_pool->size : 0);
    *avail = (pool ? rte_mempool_avail_count(pool) : 0) + (jumbo_pool ? rte_mempool_avail_count(jumbo_pool) : 0);
}

int pk_dpdk_ports_open(void) { return __atomic_load_n(&nports_open, __ATOMIC_RELAXED); }

int pk_dpdk_ethdev_count(void) { return eal_state == 1 ? (int)rte_eth_dev_count_total() : 0; }

uint64_t pk_dpdk_tsc_hz(void) { return eal_state == 1 ? rte_get_tsc_hz() : 0; }

static void timebase_now(timebase *tb)
{
    uint64_t tsc = 0, ns = 0;
    tsc_mono_pair(&tsc, &ns);
    uint64_t hz = rte_get_tsc_hz();
    if (ns > cal_ns + 200000000ull && tsc > cal_tsc)   /* a long baseline beats EAL's estimate */
        hz = (uint64_t)(((unsigned __int128)(tsc - cal_tsc) * 1000000000ull) / (ns - cal_ns));
    tb->tsc0 = tsc;
    tb->ns0 = ns;
    tb->hz = hz;
    tb->mult = (uint64_t)(((unsigned __int128)1000000000ull << 32) / hz);
}

/* ---------------------------------------------------------------- ports */

typedef struct ring_pair {
    char name[20];
    struct rte_ring *r[2][PK_DPDK_MAX_QUEUES];  /* r[e][q] is what end e receives on queue q */
    uint16_t nq;                 /* queues: set by the first end opened */
    int open[2];
} ring_pair;

static ring_pair pairs[MAX_PAIRS];

struct pk_dpdk_port {
    uint16_t pid;
    char name[RTE_ETH_NAME_MAX_LEN];  /* ethdev (= vdev) name */
    uint8_t mac[6];
    uint32_t ip;                      /* network order; 0 = none */
    int busy;                         /* an engine uses it */
    int started;                      /* rte_eth_dev_start succeeded */
    int pair, end;                    /* ring:NAME:end, else pair = -1 */
    uint16_t nq;                      /* rx and tx queues */
    int rss;                          /* rx queues fed by RSS */
    /* ARP resolution shared by the port's workers: the reply may come in on any queue */
    uint32_t arp_ip;                  /* asked for (network order), 0 = none */
    uint8_t arp_mac[6];
    int arp_claim, arp_done;          /* atomic */
    char netns[128];                  /* where it was probed: its control calls run there too */
    int kernel;                       /* af_packet, af_xdp, tap: frames from a Linux stack */
    /* af_packet and af_xdp: the PMD's own sockets, found when the port opened, for the drops
     * the kernel counts and DPDK 22.11 leaves out of imissed (see kernel_missed) */
    int kfd[PK_DPDK_MAX_QUEUES];
    int nkfd, kfamily;
    uint64_t ktp_drops;               /* af_packet: PACKET_STATISTICS is read-and-clear: the sum */
    uint64_t kxdp_base;               /* af_xdp: rx_ring_full when the port opened */
    int memif;                        /* net_memif: in memif_open[] while open */
    int polling;                      /* workers polling it now (under ctl_lock) */
    uint64_t idle_moved[PK_DPDK_MAX_QUEUES];  /* pk_dpdk_port_poll_idle: frames at its last call */
};

static void free_frames(struct rte_mbuf **m, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        rte_pktmbuf_free(m[i]);
}

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
            p->r[e][q] = rte_ring_create(rn, RING_SIZE, (int)main_socket(), RING_F_SP_ENQ | RING_F_SC_DEQ);
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
        set_err(err, errlen, "ring pairs need DPDK's net_ring PMD (librte_net_ring): %s", dlerror());
        return -1;
    }
    from_rings = (from_rings_fn)dlsym(h, "rte_eth_from_rings");
    if (!from_rings) {
        set_err(err, errlen, "librte_net_ring has no rte_eth_from_rings");
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
        set_err(err, errlen, "port %s: enter network namespace %s: %s", dev, netns, strerror(errno));
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
        set_err(err, errlen, "port %s: rte_dev_probe failed: %s (the DPDK log on stderr says more)",
                dev, rte_strerror(-rc));
        return -1;
    }
    return 0;
}

static int setup_queues(pk_dpdk_port *p, const char *dev, char *err, size_t errlen)
{
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    struct rte_eth_dev_info info;
    memset(&info, 0, sizeof(info));
    int rc = rte_eth_dev_info_get(p->pid, &info);
    if (rc == 0 && (p->nq > info.max_rx_queues || p->nq > info.max_tx_queues)) {
        set_err(err, errlen, "port %s: %u queues asked, the %s PMD takes at most %u rx and %u tx queues",
                dev, p->nq, info.driver_name ? info.driver_name : "?", info.max_rx_queues, info.max_tx_queues);
        return -1;
    }
    /* RSS spreads flows over the rx queues where the PMD has it (a NIC, tap);
     * net_ring and memif queues are fixed paths: tx queue q reaches rx queue q */
    uint64_t rss = (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
    if (rc == 0 && p->nq > 1 && rss) {
        conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
        conf.rx_adv_conf.rss_conf.rss_hf = rss;
        p->rss = 1;
    }
    if (rc == 0)
        rc = rte_eth_dev_configure(p->pid, p->nq, p->nq, &conf);
    uint16_t nrx = NB_DESC, ntx = NB_DESC;
    if (rc == 0)
        rc = rte_eth_dev_adjust_nb_rx_tx_desc(p->pid, &nrx, &ntx);
    for (uint16_t q = 0; rc == 0 && q < p->nq; q++) {
        rc = rte_eth_rx_queue_setup(p->pid, q, nrx, main_socket(), NULL, pool);
        if (rc == 0)
            rc = rte_eth_tx_queue_setup(p->pid, q, ntx, main_socket(), NULL);
    }
    if (rc == 0)
        rc = rte_eth_dev_start(p->pid);
    if (rc == 0)
        p->started = 1;
    if (rc != 0) {
        set_err(err, errlen, "port %s: configure/start failed: %s%s", dev, rte_strerror(rc < 0 ? -rc : rc),
                strncmp(dev, "net_memif", 9) == 0 && strstr(dev, "role=client")
                    ? " (a memif client connects at start: is the role=server side running on the same socket?)"
                    : "");
        return -1;
    }
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

/* ------------------------------------------------ drops only the kernel counts */

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#define PK_XDP_STATISTICS 7
struct pk_xdp_statistics {   /* linux/if_xdp.h's struct xdp_statistics */
    uint64_t rx_dropped, rx_invalid_descs, tx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs,
        tx_ring_empty_descs;
};
#define MAX_FDS_SEEN 4096

/* The sockets this process has open now (fds below MAX_FDS_SEEN), as a bitmap. */
static void sockets_now(uint8_t *bits)
{
    memset(bits, 0, MAX_FDS_SEEN / 8);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        char path[64], link[64];
        if (fd <= 2 || fd >= MAX_FDS_SEEN || fd == dirfd(d))
            continue;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 7 && memcmp(link, "socket:", 7) == 0)
            bits[fd / 8] |= (uint8_t)(1u << (fd % 8));
    }
    closedir(d);
}

static int sock_family(int fd)
{
    int dom = 0;
    socklen_t len = sizeof(dom);
    return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) == 0 ? dom : -1;
}

/* After probe and queue setup (in the port's namespace): the af_packet sockets bound to its
 * interface, or the af_xdp sockets, that appeared since `before`. The PMD keeps them private;
 * they are the only place the kernel's drops of a receiver that fell behind are counted:
 * af_packet's ring full (tp_drops) and af_xdp's rx ring full (rx_ring_full), which DPDK 22.11's
 * af_packet and af_xdp leave out of imissed. */
static void find_kernel_sockets(pk_dpdk_port *p, const char *dev, const uint8_t *before)
{
    int want = strncmp(p->name, "net_af_packet", 13) == 0 ? AF_PACKET
             : strncmp(p->name, "net_af_xdp", 10) == 0   ? AF_XDP : 0;
    if (!want)
        return;
    unsigned ifindex = 0;
    const char *at = strstr(dev, "iface=");
    if (at) {
        char ifname[IF_NAMESIZE] = { 0 };
        size_t n = strcspn(at + 6, ",");
        if (n < sizeof(ifname)) {
            memcpy(ifname, at + 6, n);
            ifindex = if_nametoindex(ifname);
        }
    }
    uint8_t now[MAX_FDS_SEEN / 8];
    sockets_now(now);
    for (int fd = 3; fd < MAX_FDS_SEEN && p->nkfd < PK_DPDK_MAX_QUEUES; fd++) {
        if (!(now[fd / 8] >> (fd % 8) & 1) || (before[fd / 8] >> (fd % 8) & 1) || sock_family(fd) != want)
            continue;
        if (want == AF_PACKET) {   /* bound to this port's interface */
            struct sockaddr_ll sll;
            socklen_t len = sizeof(sll);
            memset(&sll, 0, sizeof(sll));
            if (getsockname(fd, (struct sockaddr *)&sll, &len) != 0 || (unsigned)sll.sll_ifindex != ifindex)
                continue;
        }
        p->kfd[p->nkfd++] = fd;
    }
    p->kfamily = want;
    if (want == AF_PACKET) {   /* read-and-clear: start from zero */
        for (int i = 0; i < p->nkfd; i++) {
            struct tpacket_stats st;
            socklen_t len = sizeof(st);
            getsockopt(p->kfd[i], SOL_PACKET, PACKET_STATISTICS, &st, &len);
        }
    } else {
        for (int i = 0; i < p->nkfd; i++) {
            struct pk_xdp_statistics st;
            socklen_t len = sizeof(st);
            memset(&st, 0, sizeof(st));
            if (getsockopt(p->kfd[i], SOL_XDP, PK_XDP_STATISTICS, &st, &len) == 0)
                p->kxdp_base += st.rx_ring_full;
        }
    }
}

/* Frames the kernel dropped because the port's receiver did not keep up, since the port
 * opened (any thread; af_packet's read-and-clear counts are summed atomically). */
static uint64_t kernel_missed(pk_dpdk_port *p)
{
    uint64_t sum = 0;
    for (int i = 0; i < p->nkfd; i++) {
        if (p->kfamily == AF_PACKET) {
            struct tpacket_stats st;
            socklen_t len = sizeof(st);
            if (getsockopt(p->kfd[i], SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0 && st.tp_drops)
                __atomic_add_fetch(&p->ktp_drops, st.tp_drops, __ATOMIC_RELAXED);
        } else {
            struct pk_xdp_statistics st;
            socklen_t len = sizeof(st);
            memset(&st, 0, sizeof(st));
            if (getsockopt(p->kfd[i], SOL_XDP, PK_XDP_STATISTICS, &st, &len) == 0)
                sum += st.rx_ring_full;
        }
    }
    if (p->kfamily == AF_PACKET)
        return __atomic_load_n(&p->ktp_drops, __ATOMIC_RELAXED);
    return sum >= p->kxdp_base ? sum - p->kxdp_base : 0;
}

uint64_t pk_dpdk_port_kernel_missed(pk_dpdk_port *p) { return p->nkfd ? kernel_missed(p) : 0; }

int pk_dpdk_port_kernel(const pk_dpdk_port *p) { return p->kernel; }

int pk_dpdk_port_nic(pk_dpdk_port *p, uint64_t out[3])
{
    struct rte_eth_stats st;
    memset(&st, 0, sizeof(st));
    if (rte_eth_stats_get(p->pid, &st) != 0)
        return -1;
    out[0] = st.ierrors;
    out[1] = st.oerrors;
    /* imissed: the PMD's, and what only the kernel counted (af_packet, af_xdp: kernel_missed) */
    out[2] = st.imissed + (p->nkfd ? kernel_missed(p) : 0);
    return 0;
}

/* ------------------------------------------------ memif: the peer leaving
 *
 * DPDK 22.11's memif PMD runs its control channel in EAL's interrupt thread. When the peer
 * leaves (its port closes, its process dies), memif_disconnect there clears the link flag and
 * munmaps the shared rings -- while a worker may be inside rx/tx_burst on them: the burst checks
 * the flag once, on entry, and then reads the unmapped ring (SIGSEGV in eth_memif_rx/tx; seen
 * in the server of a client/server pair whose client closed first). Nothing in the PMD orders
 * the two threads, so we do: while a worker polls a connected memif port, the interrupt thread
 * is held in an alarm callback of ours (ctl_alarm_cb), and the PMD's handlers run only when no
 * worker polls: the peer's departure is handled after the run, the rings stay mapped (and
 * readable: what the peer sent before it left is still received) until then. Teardown holds
 * it too (ctl_quiet), so a disconnect from the peer and our own rte_eth_dev_stop never run at
 * once. It is not held while any memif port of this process is down: that port's handshake
 * (an in-process pair, a client connecting) needs the thread. Other PMDs' interrupts (link
 * changes) wait as long; nothing in perfkit's data path uses them. No cost in the hot loop. */
#define MAX_MEMIF   32
#define CTL_PERIOD_US 1000               /* the callback looks for a connected polled port this often */
#define CTL_WAIT_NS 2000000000ull        /* bound on waiting for the thread to be held */
#define CTL_IDLE_WAIT_NS 2000000L        /* an idle worker steps out of its port this long */

static pthread_mutex_t ctl_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctl_cond = PTHREAD_COND_INITIALIZER;
static pk_dpdk_port *memif_open[MAX_MEMIF];  /* under ctl_lock */
static int ctl_parked;                       /* the interrupt thread is in ctl_alarm, held */
static int ctl_pending;                      /* ctl_alarm calls set and not yet run */
static int ctl_quiet;                        /* teardowns in progress */
static void ctl_alarm_cb(void *arg);

static int link_up(uint16_t pid)
{
    struct rte_eth_link link;
    memset(&link, 0, sizeof(link));
    return rte_eth_link_get_nowait(pid, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

/* Under ctl_lock: hold the interrupt thread now? */
static int ctl_hold(void)
{
    if (ctl_quiet)
        return 1;
    int polled = 0;
    for (int i = 0; i < MAX_MEMIF; i++) {
        pk_dpdk_port *p = memif_open[i];
        if (!p)
            continue;
        if (!link_up(p->pid))
            return 0;               /* a handshake may be under way: let it run */
        polled |= p->polling > 0;
    }
    return polled;
}

static int ctl_any_polling(void)
{
    for (int i = 0; i < MAX_MEMIF; i++)
        if (memif_open[i] && memif_open[i]->polling > 0)
            return 1;
    return 0;
}

static void ctl_arm(void)   /* under ctl_lock */
{
    if (ctl_pending == 0 && eal_state == 1 && rte_eal_alarm_set(CTL_PERIOD_US, ctl_alarm_cb, NULL) == 0)
        ctl_pending = 1;
}

/* In EAL's interrupt thread: stay while a worker polls a connected memif port (or a teardown
 * runs); look again every CTL_PERIOD_US while some memif port is polled. */
static void ctl_alarm_cb(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ctl_lock);
    ctl_pending = 0;
    while (ctl_hold()) {
        if (!ctl_parked) {
            ctl_parked = 1;
            pthread_cond_broadcast(&ctl_cond);
        }
        pthread_cond_wait(&ctl_cond, &ctl_lock);
    }
    if (ctl_parked) {
        ctl_parked = 0;
        pthread_cond_broadcast(&ctl_cond);
    }
    if (ctl_any_polling())
        ctl_arm();
    pthread_mutex_unlock(&ctl_lock);
}

/* Under ctl_lock: wait (bounded) until the interrupt thread is held, when it should be. */
static void ctl_wait_parked(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CTL_WAIT_NS / 1000000000ull;
    while (!ctl_parked && ctl_hold()) {
        ctl_arm();
        if (pthread_cond_timedwait(&ctl_cond, &ctl_lock, &until) == ETIMEDOUT)
            break;                  /* the thread is stuck elsewhere: go on unprotected */
    }
}

/* Under ctl_lock: a worker (re)starts polling p. The thread is held first (whatever PMD handler
 * it was in -- a disconnect under way -- is over), and stays held if p is connected. */
static void ctl_poll_more(pk_dpdk_port *p)
{
    ctl_quiet++;
    ctl_wait_parked();
    p->polling++;
    ctl_quiet--;
    pthread_cond_broadcast(&ctl_cond);
}

void pk_dpdk_port_poll_begin(pk_dpdk_port *p)
{
    if (!p->memif)
        return;
    pthread_mutex_lock(&ctl_lock);
    ctl_poll_more(p);
    pthread_mutex_unlock(&ctl_lock);
}

void pk_dpdk_port_poll_end(pk_dpdk_port *p)
{
    if (!p->memif)
        return;
    pthread_mutex_lock(&ctl_lock);
    p->polling--;
    pthread_cond_broadcast(&ctl_cond);   /* the held thread looks again: maybe free now */
    pthread_mutex_unlock(&ctl_lock);
}

/* Every ~100 ms from a worker's loop, outside its bursts, with the frames it has moved so far:
 * a worker that moved none since the last call steps out for a moment, so that the memif control
 * can run (a peer that left is seen down, a new one connects) without a burst under it. Only
 * when all the pollers of connected memif ports step out at once is the thread let go: with
 * several queues that can take a while (a peer's departure may then wait for the run's end). */
void pk_dpdk_port_poll_idle(pk_dpdk_port *p, uint16_t queue, uint64_t moved)
{
    if (!p->memif || queue >= PK_DPDK_MAX_QUEUES)
        return;
    uint64_t before = p->idle_moved[queue];
    p->idle_moved[queue] = moved;
    if (moved != before)
        return;
    pthread_mutex_lock(&ctl_lock);
    if (!ctl_parked) {              /* not held (a port is down): nothing waits */
        pthread_mutex_unlock(&ctl_lock);
        return;
    }
    p->polling--;
    pthread_cond_broadcast(&ctl_cond);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += CTL_IDLE_WAIT_NS;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    while (ctl_parked && pthread_cond_timedwait(&ctl_cond, &ctl_lock, &until) != ETIMEDOUT)
        ;
    int free_now = !ctl_parked;
    pthread_mutex_unlock(&ctl_lock);
    if (free_now) {                 /* the thread handles what is pending meanwhile */
        struct timespec ts = { 0, CTL_IDLE_WAIT_NS };
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&ctl_lock);
    ctl_poll_more(p);
    pthread_mutex_unlock(&ctl_lock);
}

/* A memif port's handshake runs in EAL's interrupt thread, and it is let run while a port is
 * down: it maps the peer's regions, then sets the port connected. A burst takes its ring's
 * address (region address + offset) before it looks at that flag: a burst that started in
 * between read the flag set and a ring at its offset from address 0 (SIGSEGV at 0x4084, queue
 * 1's ring flags, in eth_memif_rx: the two-queue dperf test's server, its two workers and the
 * interrupt thread sharing 2 CPUs). So nothing bursts on a memif port that is down; once it is
 * seen up, its rings are mapped, and they stay so while it is polled (see above). */
int pk_dpdk_port_burst_ok(pk_dpdk_port *p)
{
    return !p->memif || link_up(p->pid);
}

int pk_dpdk_ctl_parked(void)
{
    pthread_mutex_lock(&ctl_lock);
    int v = ctl_parked;
    pthread_mutex_unlock(&ctl_lock);
    return v;
}

static void ctl_quiet_begin(void)
{
    pthread_mutex_lock(&ctl_lock);
    ctl_quiet++;
    ctl_wait_parked();
    pthread_mutex_unlock(&ctl_lock);
}

static void ctl_quiet_end(void)
{
    pthread_mutex_lock(&ctl_lock);
    ctl_quiet--;
    pthread_cond_broadcast(&ctl_cond);
    pthread_mutex_unlock(&ctl_lock);
}

static void memif_add(pk_dpdk_port *p)
{
    pthread_mutex_lock(&ctl_lock);
    for (int i = 0; i < MAX_MEMIF; i++)
        if (!memif_open[i]) {
            memif_open[i] = p;
            break;
        }
    pthread_cond_broadcast(&ctl_cond);   /* a port that is down: its handshake needs the thread */
    pthread_mutex_unlock(&ctl_lock);
}

static void memif_remove(pk_dpdk_port *p)
{
    pthread_mutex_lock(&ctl_lock);
    for (int i = 0; i < MAX_MEMIF; i++)
        if (memif_open[i] == p)
            memif_open[i] = NULL;
    pthread_cond_broadcast(&ctl_cond);
    pthread_mutex_unlock(&ctl_lock);
}

static void unplug(pk_dpdk_port *p)
{
    int home = -1;
    if (p->memif) {                 /* no memif control handling during the teardown */
        memif_remove(p);
        ctl_quiet_begin();
    }
    netns_enter(p->netns, &home, p->name, NULL, 0);
    if (p->started) {
        drain_rx(p->pid, p->nq);
        rte_eth_dev_stop(p->pid);
        p->started = 0;
    }
    rte_eth_dev_close(p->pid);
    rte_eal_hotplug_remove("vdev", p->name);
    netns_leave(home);
    p->nkfd = 0;   /* the PMD closed its sockets */
    if (p->memif)
        ctl_quiet_end();
}

pk_dpdk_port *pk_dpdk_port_open(const char *dev, const char *netns, char *err, size_t errlen)
{
    return pk_dpdk_port_open_q(dev, netns, 1, err, errlen);
}

pk_dpdk_port *pk_dpdk_port_open_q(const char *dev, const char *netns, int nq, char *err, size_t errlen)
{
    if (need_pool(err, errlen) != 0)
        return NULL;
    if (nq < 1 || nq > PK_DPDK_MAX_QUEUES) {
        set_err(err, errlen, "port %s: queues %d out of range 1..%d", dev, nq, PK_DPDK_MAX_QUEUES);
        return NULL;
    }
    pk_dpdk_port *p = calloc(1, sizeof(*p));
    if (!p) {
        set_err(err, errlen, "out of memory");
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
        set_err(err, errlen, "port %s: a ring pair end is ring:NAME:0 or ring:NAME:1 "
                "(NAME: 1-16 of a-z 0-9 _)", dev);
        goto fail;
    }
    if (ring > 0) {
        if (lookup_from_rings(err, errlen) != 0)
            goto fail;
        int i = find_pair(rname, (uint16_t)nq, 1);
        if (i == -2) {
            set_err(err, errlen, "port %s: cannot make its rings: %s", dev, rte_strerror(rte_errno));
            goto fail;
        }
        if (i < 0) {
            set_err(err, errlen, "port %s: at most %d ring pairs at once", dev, MAX_PAIRS);
            goto fail;
        }
        if (pairs[i].open[end]) {
            set_err(err, errlen, "port %s is already open", dev);
            goto fail;
        }
        if (pairs[i].nq != nq) {
            set_err(err, errlen, "port %s: the other end of the pair has %u queues, not %d (open both "
                    "ends with as many)", dev, pairs[i].nq, nq);
            goto fail;
        }
        char ename[32];
        snprintf(ename, sizeof(ename), "pk%s_%d", rname, end);
        snprintf(p->name, sizeof(p->name), "net_ring_%s", ename);
        int pid = from_rings(ename, pairs[i].r[end], nq, pairs[i].r[1 - end], nq, main_socket());
        if (pid < 0) {
            release_pair(i);
            set_err(err, errlen, "port %s: rte_eth_from_rings failed: %s", dev, rte_strerror(rte_errno));
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
            set_err(err, errlen, "port %s: no device name before the first comma", dev);
            goto fail;
        }
        memcpy(p->name, dev, n);
        p->name[n] = 0;
        p->memif = strncmp(p->name, "net_memif", 9) == 0;
        p->kernel = strncmp(p->name, "net_af_packet", 13) == 0 || strncmp(p->name, "net_af_xdp", 10) == 0 ||
                    strncmp(p->name, "net_tap", 7) == 0;
        uint16_t pid;
        if (rte_eth_dev_get_port_by_name(p->name, &pid) == 0) {
            set_err(err, errlen, "port %s is already open", p->name);
            goto fail;
        }
        if (netns && netns[0]) {
            if (strlen(netns) >= sizeof(p->netns)) {
                set_err(err, errlen, "port %s: netns path too long", dev);
                goto fail;
            }
            snprintf(p->netns, sizeof(p->netns), "%s", netns);
        }
        int home;
        if (netns_enter(p->netns, &home, dev, err, errlen) != 0)
            goto fail;
        sockets_now(socks_before);
        int rc = probe(dev, err, errlen);
        netns_leave(home);
        if (rc != 0)
            goto fail;
        if (rte_eth_dev_get_port_by_name(p->name, &pid) != 0) {
            rte_eal_hotplug_remove("vdev", p->name);
            set_err(err, errlen, "port %s: probed, but it made no ethdev called %s "
                    "(only Ethernet vdevs are ports)", dev, p->name);
            goto fail;
        }
        p->pid = pid;
    }
    int home, rc;
    if (netns_enter(p->netns, &home, dev, err, errlen) != 0) {
        rc = -1;
    } else {
        rc = setup_queues(p, dev, err, errlen);
        if (rc == 0 && p->pair < 0)
            find_kernel_sockets(p, dev, socks_before);
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
        memif_add(p);
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

/* A memif client whose link is still down: stop the port (memif_disconnect drops its control
 * connection) and start it (memif_connect_client opens a new one), with the interrupt thread
 * held so that no memif handler runs on the channel being dropped. A handshake that stalled
 * (the server saw a connection and never finished it) starts over instead of waiting forever. */
int pk_dpdk_port_reconnect(pk_dpdk_port *p, char *err, size_t errlen)
{
    if (!p->memif || pk_dpdk_port_busy(p)) {
        set_err(err, errlen, "port %s: only an idle memif port reconnects", p->name);
        return -1;
    }
    pthread_mutex_lock(&ports_lock);
    ctl_quiet_begin();
    int home, rc = -1;
    if (netns_enter(p->netns, &home, p->name, err, errlen) == 0) {
        if (p->started)
            rte_eth_dev_stop(p->pid);
        rc = rte_eth_dev_start(p->pid);
        p->started = rc == 0;
        netns_leave(home);
        if (rc != 0)
            set_err(err, errlen, "port %s: start failed on reconnect: %s (a memif client connects at start: "
                    "is the role=server side running on the same socket?)", p->name, rte_strerror(rc < 0 ? -rc : rc));
    }
    ctl_quiet_end();
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

int pk_dpdk_port_send(pk_dpdk_port *p, const uint8_t *buf, const uint32_t *lens, int n)
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
            m[k] = rte_pktmbuf_alloc(pool);
            if (!m[k])
                break;
            char *d = rte_pktmbuf_append(m[k], (uint16_t)(len > 0xffff ? 0xffff : len));
            if (!d) {  /* longer than one buffer */
                rte_pktmbuf_free(m[k]);
                break;
            }
            memcpy(d, buf + off, len);
            off += len;
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

/* --------------------------------------------------------------- engine */

typedef pk_flow_state flow_state;  /* perfkit/seqwin.h */

typedef struct worker {
    /* the counters first: one cache-line-aligned block, this worker writes it */
    pk_counter_block c;
    pk_hist hist;
    pk_hist probe_hist;

    pk_dpdk_worker_cfg cfg;
    struct pk_dpdk_engine *engine;
    pk_dpdk_port *port;
    uint16_t pid, queue;
    /* FORWARD: where frames leave; the other direction's worker when this thread runs it
     * too (guest), or 1 when another worker's thread runs this one (hosted) */
    pk_dpdk_port *out;
    uint16_t out_pid;
    struct worker *guest;
    int ports_ok;                /* pk_dpdk_port_burst_ok said yes for port and out since the
                                  * last poll_idle */
    int hosted;
    pthread_t thread;
    int started;
    int running;                 /* atomic: 1 while the thread runs */
    int done_sending;            /* atomic: a generator sets it when it stops sending */

    /* GEN */
    uint8_t *tmpl;               /* the longest frame, without the FCS: headers, zero filler */
    uint32_t frame_len;          /* its length */
    uint16_t *pattern;           /* frame lengths without FCS, sent in turn */
    struct rte_mempool *gpool;   /* where its frames come from: the jumbo pool for long ones */
    struct rte_mempool_cache *gcache;  /* this thread's cache of it (no TLS lookup per burst) */
    uint32_t npattern, next_size;
    uint64_t ip_base;            /* IPv4 header words that never change (length, addresses: 0) */
    uint64_t udp_base;           /* UDP words that never change (protocol; the filler is 0) */
    uint64_t *flow_seq;          /* next sequence per flow = frames sent per flow */
    uint32_t next_flow;
    uint32_t src_h, dst_h;       /* first source and destination address, host order */
    uint32_t nsp, ndp, nsi, ndi; /* the ranges, each >= 1 */
    uint32_t dsp, ddp, dsi, ddi; /* next_flow's place in them */
    uint32_t wrap[4];            /* flow_first's place (dsp ddp dsi ddi): a wrap without division */
    struct rte_mbuf *pend[PK_DPDK_MAX_BURST + 1];  /* built, not yet taken by the port (+1: a probe) */
    uint32_t pend_len[PK_DPDK_MAX_BURST + 1];      /* their frame bytes, FCS counted; | PROBE_FLAG */
    uint64_t probe_seq;          /* probes sent = the next probe sequence number */
    uint64_t probe_every, next_probe;  /* TSC */
    uint64_t probe_min;
    uint32_t npend;
    uint8_t dst_mac[6];
    int resolved, dst_broadcast;

    /* RXONLY, and GEN with track: the port's table, shared by its receivers */
    flow_state *flows;           /* nflows load flows, then PK_DPDK_MAX_QUEUES probe flows */
    uint32_t nflows;
    int owns_flows;              /* this worker allocated it, settles and frees it */
    uint64_t drop_ctr;
    uint64_t lat_min;

    /* CPU and NIC accounting */
    uint64_t wall0, busy, last_flush, last_nic;
    uint64_t nic_base[3];
    int nic_owner;               /* the port's first worker in this engine */
    int cpu_frozen;

    char err[256];
} worker;

struct pk_dpdk_engine {
    int n;
    worker *w;
    int stop;                    /* atomic: user asked to stop */
    timebase tb;
    uint64_t hard_end;           /* TSC */
    int settled;
};

static inline int stopping(const worker *w)
{
    return __atomic_load_n(&w->engine->stop, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ checksums */

#include "perfkit/csum.h"   /* sum16, fold */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "words32/words64 assume a little-endian host");

/* The 16-bit words of a host-order value as they lie in memory, summed
 * (little-endian hosts: memory word k is bits 16k..16k+15). */
static inline uint64_t words32(uint32_t v) { return (v & 0xffff) + (v >> 16); }
static inline uint64_t words64(uint64_t v) { return words32((uint32_t)v) + words32((uint32_t)(v >> 32)); }

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }

/* ------------------------------------------------------------ accounting */

static inline void record_latency(worker *w, uint64_t lat, uint64_t *last_lat)
{
    pk_record_latency(&w->c, &w->hist, &w->lat_min, lat, last_lat);
}

static inline void flush_cpu(worker *w, uint64_t now)
{
    const timebase *tb = &w->engine->tb;
    w->last_flush = now;
    if (w->cpu_frozen)
        return;
    pk_set(&w->c, PK_cpu_busy_ns, tb_cyc_ns(tb, w->busy));
    pk_set(&w->c, PK_cpu_wall_ns, tb_cyc_ns(tb, now - w->wall0));
}

static void read_nic(worker *w, uint64_t now, int base)
{
    uint64_t nic[3];
    w->last_nic = now;
    if (!w->nic_owner)   /* port-wide counters: one worker per port reports them */
        return;
    if (pk_dpdk_port_nic(w->port, nic) != 0)
        return;
    if (base) {
        memcpy(w->nic_base, nic, sizeof(nic));
        return;
    }
    pk_set(&w->c, PK_nic_ierrors, nic[0] - w->nic_base[0]);
    pk_set(&w->c, PK_nic_oerrors, nic[1] - w->nic_base[1]);
    pk_set(&w->c, PK_nic_imissed, nic[2] - w->nic_base[2]);
}

/* Counters, once per rx burst. */
typedef struct rx_acc {
    uint64_t pkts, bytes, udp, tcp, arp, icmp, other, bad, lost, dup, reorder;
} rx_acc;

/* --------------------------------------------------------------- receive */

enum { ACT_FREE = 0, ACT_REPLY, ACT_REFLECT };

static void track_payload(worker *w, const uint8_t *pl, uint32_t plen, uint64_t now_ns, rx_acc *a)
{
    uint32_t magic;
    if (plen < PK_WIRE_SHORT_LEN)
        return;
    memcpy(&magic, pl, 4);
    uint32_t flow;
    uint64_t seq, lat;
    if (magic == PK_WIRE_MAGIC && plen >= PK_WIRE_HDR_LEN) {
        pk_wire_hdr h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= w->nflows)
            return;
        flow = h.flow;
        seq = h.seq;
        lat = now_ns >= h.tx_ns ? now_ns - h.tx_ns : UINT64_MAX;
    } else if (magic == PK_WIRE_PROBE_MAGIC && plen >= PK_WIRE_HDR_LEN) {
        pk_wire_hdr h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= PK_DPDK_MAX_QUEUES)
            return;
        flow_state *f = &w->flows[w->nflows + h.flow];
        pk_seq_arrive(f, h.seq, &a->lost, &a->dup, &a->reorder);
        if (now_ns >= h.tx_ns) {
            uint64_t lat = now_ns - h.tx_ns;
            pk_hist_add(&w->probe_hist, lat);
            pk_add(&w->c, PK_probe_rx, 1);
            pk_add(&w->c, PK_probe_lat_sum_ns, lat);
            if (w->probe_min == 0 || lat < w->probe_min) {
                w->probe_min = lat ? lat : 1;
                pk_set(&w->c, PK_probe_lat_min_ns, w->probe_min);
            }
            if (lat > pk_read(&w->c, PK_probe_lat_max_ns))
                pk_set(&w->c, PK_probe_lat_max_ns, lat);
        }
        return;
    } else if (magic == PK_WIRE_SHORT_MAGIC) {
        pk_wire_short h;
        memcpy(&h, pl, sizeof(h));
        if (h.flow >= w->nflows)
            return;
        flow = h.flow;
        seq = pk_seq_widen(w->flows[flow].next, h.seq_lo);
        uint32_t d = (uint32_t)now_ns - h.tx_ns_lo;
        lat = d < 0x80000000u ? d : UINT64_MAX;  /* a timestamp "from the future": skip */
    } else {
        return;
    }
    flow_state *f = &w->flows[flow];
    pk_seq_arrive(f, seq, &a->lost, &a->dup, &a->reorder);
    if (lat != UINT64_MAX)
        record_latency(w, lat, &f->last_lat);
}

/* A Linux sender on a veth leaves its UDP/TCP checksum to an offload (CHECKSUM_PARTIAL):
 * the field holds only the pseudo header's folded sum, and af_packet (and tap, af_xdp) hand
 * the frame over so; sent on as it is, the next kernel drops it. Such a segment gets its
 * whole checksum here. Any other wrong sum is left alone, so corruption still shows at the
 * far end. len bytes of L4 (header and data) lie in the first segment. */
static void l4_csum_finish(const uint8_t *ip, uint8_t *l4, uint32_t len, uint8_t proto)
{
    uint8_t *at = l4 + (proto == 17 ? 6 : 16);
    uint16_t field;
    memcpy(&field, at, 2);
    if (proto == 17 && field == 0)
        return;   /* no UDP checksum: IPv4 allows it */
    const uint8_t head[4] = { 0, proto, (uint8_t)(len >> 8), (uint8_t)len };
    const uint64_t pseudo = sum16(ip + 12, 8, sum16(head, 4, 0));
    if (fold(sum16(l4, len, pseudo)) == 0xffff || field != fold(pseudo))
        return;   /* right already, or wrong in another way */
    memset(at, 0, 2);
    uint16_t c = (uint16_t)~fold(sum16(l4, len, pseudo));
    if (proto == 17 && c == 0)
        c = 0xffff;
    memcpy(at, &c, 2);
}

/* The same for a frame a forwarder passes on from a kernel port: IPv4 (no fragment) UDP or
 * TCP, the whole datagram in the first segment; anything else is left as it is. */
static void fwd_csum_finish(struct rte_mbuf *m)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);
    if (len < ETH_LEN + IP_LEN || rd16(d + 12) != 0x0800)
        return;
    uint8_t *ip = d + ETH_LEN;
    const uint32_t ihl = (uint32_t)(ip[0] & 15) * 4, tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || tot < ihl || ETH_LEN + tot > len || (rd16(ip + 6) & 0x3fff))
        return;
    uint8_t *l4 = ip + ihl;
    const uint32_t l4len = tot - ihl;
    if (ip[9] == 17 && l4len >= UDP_LEN) {
        const uint32_t ulen = rd16(l4 + 4);
        if (ulen >= UDP_LEN && ulen <= l4len)
            l4_csum_finish(ip, l4, ulen, 17);
    } else if (ip[9] == 6 && l4len >= 20) {
        l4_csum_finish(ip, l4, l4len, 6);
    }
}

/* ARP: answer requests for the port's address; a resolving generator takes the
 * reply for its destination. */
static int handle_arp(worker *w, uint8_t *d, uint32_t len, rx_acc *a)
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

static int handle_frame(worker *w, struct rte_mbuf *m, uint64_t now_ns, rx_acc *a)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    const uint32_t len = rte_pktmbuf_data_len(m);   /* headers must lie in the first segment */
    const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
    if (len < ETH_LEN) {
        a->bad++;
        return ACT_FREE;
    }
    uint16_t type = rd16(d + 12);
    if (type == 0x0806)
        return handle_arp(w, d, len, a);
    if (type != 0x0800) {
        a->other++;
        return ACT_FREE;
    }
    /* IPv4: version, IHL, total length, checksum, fragments */
    if (len < ETH_LEN + IP_LEN) {
        a->bad++;
        return ACT_FREE;
    }
    uint8_t *ip = d + ETH_LEN;
    uint32_t ihl = (uint32_t)(ip[0] & 15) * 4;
    uint32_t tot = rd16(ip + 2);
    if ((ip[0] >> 4) != 4 || ihl < IP_LEN || ETH_LEN + ihl > len || tot < ihl || ETH_LEN + tot > pkt_len) {
        a->bad++;
        return ACT_FREE;
    }
    if (fold(sum16(ip, ihl, 0)) != 0xffff) {
        a->bad++;
        return ACT_FREE;
    }
    if ((rd16(ip + 6) & 0x3fff) != 0) {  /* MF or an offset: fragments are not reassembled */
        a->bad++;
        return ACT_FREE;
    }
    uint8_t proto = ip[9];
    uint8_t *l4 = ip + ihl;
    uint32_t l4len = tot - ihl;
    uint32_t l4room = len - ETH_LEN - ihl;  /* bytes of L4 in the first segment */
    uint32_t dst;
    memcpy(&dst, ip + 16, 4);
    const uint32_t me = w->port->ip;
    if (proto == 17) {
        if (l4len < UDP_LEN || l4room < UDP_LEN) {
            a->bad++;
            return ACT_FREE;
        }
        uint32_t ulen = rd16(l4 + 4);
        if (ulen < UDP_LEN || ulen > l4len) {
            a->bad++;
            return ACT_FREE;
        }
        if (w->cfg.role == PK_DPDK_RXONLY && w->cfg.drop_every && ++w->drop_ctr % w->cfg.drop_every == 0)
            return -1;  /* the test hook's lossy link: never seen */
        a->udp++;
        uint32_t plen = ulen - UDP_LEN;
        if (plen > l4room - UDP_LEN)
            plen = l4room - UDP_LEN;
        if (w->flows)
            track_payload(w, l4 + UDP_LEN, plen, now_ns, a);
        if (w->cfg.role == PK_DPDK_REVERSE && me != 0 &&
            rte_be_to_cpu_32(dst) - rte_be_to_cpu_32(me) < (w->cfg.dst_ips ? w->cfg.dst_ips : 1u)) {
            uint8_t t6[6];
            uint8_t t4[4];
            uint8_t t2[2];
            memcpy(t6, d, 6); memcpy(d, d + 6, 6); memcpy(d + 6, t6, 6);
            memcpy(t4, ip + 12, 4); memcpy(ip + 12, ip + 16, 4); memcpy(ip + 16, t4, 4);
            memcpy(t2, l4, 2); memcpy(l4, l4 + 2, 2); memcpy(l4 + 2, t2, 2);
            /* swaps keep both checksums: the sums are the same */
            if (w->port->kernel && ulen <= l4room)
                l4_csum_finish(ip, l4, ulen, 17);
            return ACT_REFLECT;
        }
        return ACT_FREE;
    }
    if (proto == 6) {
        a->tcp++;
        return ACT_FREE;
    }
    if (proto == 1) {
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
        uint8_t t6[6];
        uint8_t t4[4];
        memcpy(t6, d, 6); memcpy(d, d + 6, 6); memcpy(d + 6, t6, 6);
        memcpy(t4, ip + 12, 4); memcpy(ip + 12, ip + 16, 4); memcpy(ip + 16, t4, 4);
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
    a->other++;
    return ACT_FREE;
}

/* One rx burst: count, parse, answer, reflect. Returns frames received. */
/* May w burst on its port and out port? (a memif port: up; see pk_dpdk_port_burst_ok) */
static inline int ports_ready(worker *w)
{
    return w->ports_ok || (w->ports_ok = pk_dpdk_port_burst_ok(w->port) &&
                                         (!w->out || pk_dpdk_port_burst_ok(w->out)));
}

static uint32_t rx_service(worker *w)
{
    struct rte_mbuf *rx[PK_DPDK_MAX_BURST], *refl[PK_DPDK_MAX_BURST], *rep[PK_DPDK_MAX_BURST];
    if (!ports_ready(w))
        return 0;
    uint16_t n = rte_eth_rx_burst(w->pid, w->queue, rx, (uint16_t)w->cfg.burst);
    if (n == 0)
        return 0;
    /* timestamps: CLOCK_MONOTONIC itself, once per burst (vDSO: the kernel's own TSC
     * scaling, the same in every process, so one-way latency holds across processes) */
    uint64_t now_ns = pk_now_ns();
    rx_acc a;
    memset(&a, 0, sizeof(a));
    uint32_t nrefl = 0, nrep = 0, dropped = 0;
    uint32_t refl_len[PK_DPDK_MAX_BURST];
    for (uint16_t i = 0; i < n; i++) {
        struct rte_mbuf *m = rx[i];
        if (i + 1 < n)
            rte_prefetch0(rte_pktmbuf_mtod(rx[i + 1], void *));
        int act = handle_frame(w, m, now_ns, &a);
        if (act < 0) {
            dropped++;
            rte_pktmbuf_free(m);
            continue;
        }
        a.pkts++;
        a.bytes += rte_pktmbuf_pkt_len(m) + FCS_LEN;
        if (act == ACT_REFLECT) {
            refl_len[nrefl] = rte_pktmbuf_pkt_len(m) + FCS_LEN;
            refl[nrefl++] = m;
        } else if (act == ACT_REPLY) {
            rep[nrep++] = m;
        } else {
            rte_pktmbuf_free(m);
        }
    }
    if (nrefl) {
        /* the lengths were taken before: once sent, a frame belongs to the receiver */
        uint16_t k = rte_eth_tx_burst(w->pid, w->queue, refl, (uint16_t)nrefl);
        free_frames(refl + k, nrefl - k);
        uint64_t b = 0;
        for (uint16_t i = 0; i < k; i++)
            b += refl_len[i];
        pk_add(&w->c, PK_pkts_tx, k);
        pk_add(&w->c, PK_bytes_tx, b);
        if (k < nrefl)
            pk_add(&w->c, PK_drop_tx, nrefl - k);
    }
    if (nrep) {
        uint16_t k = rte_eth_tx_burst(w->pid, w->queue, rep, (uint16_t)nrep);
        free_frames(rep + k, nrep - k);
    }
    pk_add(&w->c, PK_pkts_rx, a.pkts);
    pk_add(&w->c, PK_bytes_rx, a.bytes);
    if (a.udp) pk_add(&w->c, PK_udp_rx, a.udp);
    if (a.tcp) pk_add(&w->c, PK_tcp_rx, a.tcp);
    if (a.arp) pk_add(&w->c, PK_arp_rx, a.arp);
    if (a.icmp) pk_add(&w->c, PK_icmp_rx, a.icmp);
    if (a.other) pk_add(&w->c, PK_other_rx, a.other);
    if (a.bad) pk_add(&w->c, PK_bad_rx, a.bad);
    if (a.lost) pk_add(&w->c, PK_seq_lost, a.lost);
    if (a.dup) pk_add(&w->c, PK_seq_dup, a.dup);
    if (a.reorder) pk_add(&w->c, PK_seq_reorder, a.reorder);
    return n - dropped;
}

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
    if (++w->next_flow == w->cfg.flow_first + w->cfg.flows) {
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
 * from registers (memory order = host order here), never read back. */
static uint32_t gen_build(worker *w, uint32_t n, uint64_t now_ns)
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
        uint16_t c = (uint16_t)~fold(w->ip_base + bswap_word(ip_len) + addrs);
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
        memcpy(udp + 6, &c, 2);
    }
    w->npend += n;
    return n;
}

/* One latency probe at the end of the pending list: the first flow's tuple,
 * probe_size bytes, pk_wire_hdr with the probe magic and the probe sequence. */
static void gen_build_probe(worker *w, uint64_t now_ns)
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

static void send_arp_request(worker *w)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
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
static void gen_resolve(worker *w)
{
    const timebase *tb = &w->engine->tb;
    if (w->cfg.dst_mac_set) {
        memcpy(w->dst_mac, w->cfg.dst_mac, 6);
        w->resolved = 1;
        return;
    }
    if (w->cfg.peer >= 0) {
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
        rx_service(w);
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

static int feeders_done(const worker *w, int *any)
{
    const pk_dpdk_engine *e = w->engine;
    int me = (int)(w - e->w);
    *any = 0;
    for (int j = 0; j < e->n; j++) {
        if (e->w[j].cfg.role != PK_DPDK_GEN || e->w[j].cfg.peer < 0 ||
            (e->w[j].cfg.peer != me && e->w[e->w[j].cfg.peer].port != w->port))
            continue;
        *any = 1;
        if (!__atomic_load_n(&e->w[j].done_sending, __ATOMIC_ACQUIRE))
            return 0;
    }
    return 1;
}

static inline void housekeeping(worker *w, uint64_t now, uint64_t flush_c, uint64_t nic_c)
{
    if (now - w->last_flush < flush_c)
        return;
    flush_cpu(w, now);
    if (now - w->last_nic >= nic_c) {
        read_nic(w, now, 0);
        /* idle: a memif peer's leaving or coming is handled now (see "memif: the peer leaving") */
        pk_dpdk_port_poll_idle(w->port, w->cfg.queue, pk_read(&w->c, PK_pkts_rx) + pk_read(&w->c, PK_pkts_tx));
        w->ports_ok = 0;         /* the memif control may have run: look at the links again */
        if (w->guest)
            w->guest->ports_ok = 0;
    }
}

/* A generator whose frames come back: receive until they have all had time to
 * return. With the reflector in this engine: until it has finished and our rx
 * has then been quiet; else quiet QUIET_NS after done_at. Bounded by the hard end. */
static void receive_until_quiet(worker *w, uint64_t done_at)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const worker *peer = w->cfg.peer >= 0 ? &w->engine->w[w->cfg.peer] : NULL;
    uint64_t last = done_at, peer_done_at = peer ? 0 : done_at;
    uint32_t idle = 0;
    for (;;) {
        uint64_t now = rte_rdtsc();
        if (rx_service(w)) {
            last = now;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (now >= hard)
            break;
        if (!peer_done_at) {
            int busy = 0;
            for (int j = 0; j < w->engine->n && !busy; j++)
                busy = w->engine->w[j].port == peer->port &&
                       __atomic_load_n(&w->engine->w[j].running, __ATOMIC_ACQUIRE);
            if (busy)
                continue;
            peer_done_at = rte_rdtsc();  /* everything it sent is on its way to us now */
            continue;
        }
        uint64_t since = last > peer_done_at ? last : peer_done_at;
        if (now > since && now - since >= quiet)
            break;
    }
}

/* A generator that also receives the other side's flows (bidirectional): receive
 * until the generators feeding its port are done and its rx has been quiet. */
static void receive_until_fed(worker *w, uint64_t done_at)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    uint64_t last = done_at, fed_at = 0;
    uint32_t idle = 0;
    for (;;) {
        uint64_t now = rte_rdtsc();
        if (rx_service(w)) {
            last = now;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (now >= hard)
            break;
        int any;
        if (!feeders_done(w, &any))
            continue;
        if (!fed_at)
            fed_at = now;
        uint64_t since = last > fed_at ? last : fed_at;
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
} pace;

static pace pace_make(const worker *w, const timebase *tb)
{
    pace p = { w->cfg.rate > 0, w->cfg.rate / (double)tb->hz, 0, 0 };
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

static void run_gen(worker *w)
{
    const timebase *tb = &w->engine->tb;
    gen_resolve(w);
    memcpy(w->tmpl, w->dst_mac, 6);
    w->gcache = rte_mempool_default_cache(w->gpool, rte_lcore_id());
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const pace p = pace_make(w, tb);
    const uint32_t burst = w->cfg.burst;
    const uint64_t start = rte_rdtsc(), end = start + tb_cycles(tb, w->cfg.duration_ns);
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
    const uint64_t target = p.paced ? pace_due(&p, end - 1 - start) : 0;
    const uint64_t catchup_end = end + tb_cycles(tb, CATCHUP_NS);
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        if (stopping(w))
            break;
        if (t0 >= end && (!p.paced || (built >= target && w->npend == 0) || t0 >= catchup_end))
            break;
        const uint64_t tp = t0 < end ? t0 : end - 1;
        uint32_t moved = 0;
        /* frames coming back are measured at once; otherwise rx is only for ARP and ping */
        if (t0 - last_rx_poll >= rx_every) {
            moved = rx_service(w);
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
                uint64_t allowed = pace_due(&p, tp - start);
                k = allowed > built ? allowed - built : 0;
                if (k > room)
                    k = room;
            }
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
        if (moved) {
            w->busy += t1 - t0;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            /* nothing moves (a full queue, or the next frame is not due): let a
             * partner polling on this CPU run, rather than spin out our time slice */
            idle = 0;
            sched_yield();
        }
        housekeeping(w, t1, flush_c, nic_c);
    }
    uint64_t done = rte_rdtsc();
    flush_cpu(w, done);
    w->cpu_frozen = 1;    /* the CPU counters cover the sending time */
    gen_unbuild(w);
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    if (w->cfg.track == 1)
        receive_until_quiet(w, done);
    else if (w->cfg.track == 2)
        receive_until_fed(w, done);
}

/* ----------------------------------------------------- receive roles */

static void run_rx(worker *w)
{
    const timebase *tb = &w->engine->tb;
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint64_t quiet = tb_cycles(tb, QUIET_NS), hard = w->engine->hard_end;
    const uint64_t start = rte_rdtsc(), own_end = start + tb_cycles(tb, w->cfg.duration_ns);
    uint64_t last_rx = 0, done_at = 0;
    uint32_t idle = 0;
    int paused = 0;
    w->wall0 = start;
    w->last_flush = start;
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        uint32_t moved = rx_service(w);
        uint64_t t1 = rte_rdtsc();
        if (moved) {
            w->busy += t1 - t0;
            last_rx = t1;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        if (moved && w->cfg.pause_ns && !paused) {   /* the test hook: fall behind once */
            paused = 1;
            const uint64_t until = t1 + tb_cycles(tb, w->cfg.pause_ns);
            while (rte_rdtsc() < until && rte_rdtsc() < hard && !stopping(w))
                usleep(1000);
        }
        housekeeping(w, t1, flush_c, nic_c);
        if (t1 >= hard)
            break;
        int any;
        int fed_done = feeders_done(w, &any);
        if (!any) {
            if (stopping(w) || t1 >= own_end)
                break;
            continue;
        }
        if (!fed_done)
            continue;
        if (done_at == 0)
            done_at = t1;
        uint64_t since = last_rx > done_at ? last_rx : done_at;
        if (t1 - since >= quiet)
            break;
    }
}

/* ------------------------------------------------------------- forward */

/* One rx burst of (port, queue) out of (out, queue), as testpmd's io forward (or its
 * mac forward with dst_mac_set). What the out queue does not take is freed and
 * counted in drop_tx. Returns frames received. */
static uint32_t fwd_service(worker *w)
{
    struct rte_mbuf *m[PK_DPDK_MAX_BURST];
    if (!ports_ready(w))
        return 0;
    const uint16_t n = rte_eth_rx_burst(w->pid, w->queue, m, (uint16_t)w->cfg.burst);
    if (n == 0)
        return 0;
    uint64_t rx_bytes = 0, dropped_bytes = 0;
    uint32_t k = n, bad = 0;
    if (w->port->kernel)   /* frames of a Linux stack: offloaded checksums finished */
        for (uint16_t i = 0; i < n; i++)
            fwd_csum_finish(m[i]);
    if (!w->cfg.dst_mac_set) {   /* io: one pass over the lengths, nothing else touched */
        for (uint16_t i = 0; i < n; i++)
            rx_bytes += rte_pktmbuf_pkt_len(m[i]);
        rx_bytes += (uint64_t)n * FCS_LEN;
    } else {
        k = 0;
        for (uint16_t i = 0; i < n; i++) {
            struct rte_mbuf *x = m[i];
            rx_bytes += rte_pktmbuf_pkt_len(x) + FCS_LEN;
            if (rte_pktmbuf_data_len(x) < ETH_LEN) {   /* no Ethernet header to rewrite */
                bad++;
                dropped_bytes += rte_pktmbuf_pkt_len(x) + FCS_LEN;
                rte_pktmbuf_free(x);
                continue;
            }
            uint8_t *d = rte_pktmbuf_mtod(x, uint8_t *);
            memcpy(d, w->cfg.dst_mac, 6);
            memcpy(d + 6, w->out->mac, 6);
            m[k++] = x;
        }
    }
    /* what is sent belongs to the next hop: the unsent ones' lengths are taken off first */
    const uint16_t sent = k ? rte_eth_tx_burst(w->out_pid, w->queue, m, (uint16_t)k) : 0;
    if (sent < k) {
        for (uint32_t i = sent; i < k; i++)
            dropped_bytes += rte_pktmbuf_pkt_len(m[i]) + FCS_LEN;
        free_frames(m + sent, k - sent);
        pk_add(&w->c, PK_drop_tx, k - sent);
    }
    pk_add(&w->c, PK_pkts_rx, n);
    pk_add(&w->c, PK_bytes_rx, rx_bytes);
    pk_add(&w->c, PK_pkts_tx, sent);
    pk_add(&w->c, PK_bytes_tx, rx_bytes - dropped_bytes);
    if (bad)
        pk_add(&w->c, PK_bad_rx, bad);
    return n;
}

/* A forwarder runs until stopped or its duration is over; with a guest (the other
 * direction) it polls both ports in turn, each direction counting in its own block. */
static void run_fwd(worker *w)
{
    worker *g = w->guest;
    const timebase *tb = &w->engine->tb;
    const uint64_t flush_c = tb_cycles(tb, FLUSH_NS), nic_c = tb_cycles(tb, NIC_EVERY_NS);
    const uint64_t hard = w->engine->hard_end;
    const uint64_t start = rte_rdtsc(), own_end = start + tb_cycles(tb, w->cfg.duration_ns);
    uint32_t idle = 0;
    w->wall0 = start;
    w->last_flush = start;
    for (;;) {
        uint64_t t0 = rte_rdtsc();
        uint32_t moved = fwd_service(w);
        if (g)
            moved += fwd_service(g);
        uint64_t t1 = rte_rdtsc();
        if (moved) {
            w->busy += t1 - t0;
            idle = 0;
        } else if (++idle >= IDLE_YIELD) {
            idle = 0;
            sched_yield();
        }
        housekeeping(w, t1, flush_c, nic_c);
        if (g && t1 - g->last_nic >= nic_c)
            read_nic(g, t1, 0);
        if (t1 >= hard || t1 >= own_end || stopping(w))
            break;
    }
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

static void *worker_main(void *arg)
{
    worker *w = arg;
    int i = (int)(w - w->engine->w);
    if (w->cfg.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cfg.cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    char name[16];
    snprintf(name, sizeof(name), "pk-dpdk-%d", i);
    pthread_setname_np(pthread_self(), name);
    /* an lcore id for this thread: mempool caches; released at the end */
    if (rte_thread_register() != 0) {
        snprintf(w->err, sizeof(w->err), "worker %d: rte_thread_register: %s", i, rte_strerror(rte_errno));
        goto out;
    }
    uint64_t now = rte_rdtsc();
    w->wall0 = now;
    w->last_flush = now;
    w->last_nic = now;   /* the NIC base was read at start, before any worker ran */
    if (w->cfg.role == PK_DPDK_GEN)
        run_gen(w);
    else if (w->cfg.role == PK_DPDK_FORWARD)
        run_fwd(w);
    else
        run_rx(w);
    now = rte_rdtsc();
    read_nic(w, now, 0);
    if (w->guest)
        read_nic(w->guest, now, 0);
    flush_cpu(w, now);
    struct rte_mempool *pools[2] = { pool, jumbo_pool };
    for (int k = 0; k < 2; k++) {
        struct rte_mempool_cache *cache = pools[k] ? rte_mempool_default_cache(pools[k], rte_lcore_id()) : NULL;
        if (cache)
            rte_mempool_cache_flush(cache, pools[k]);
    }
    rte_thread_unregister();
out:
    worker_polls(w, 0);
    if (w->guest) {
        __atomic_store_n(&w->guest->done_sending, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&w->guest->running, 0, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&w->done_sending, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&w->running, 0, __ATOMIC_RELEASE);
    return NULL;
}

/* ------------------------------------------------------------ lifecycle */

static int check_worker(pk_dpdk_engine *e, pk_dpdk_port *const *ports, int nports, int i,
                        char *err, size_t errlen)
{
    worker *w = &e->w[i];
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role < 0 || c->role >= PK_DPDK_NROLES) {
        set_err(err, errlen, "worker %d: unknown role %d", i, c->role);
        return -1;
    }
    if (c->port < 0 || c->port >= nports || !ports[c->port]) {
        set_err(err, errlen, "worker %d: port %d out of range", i, c->port);
        return -1;
    }
    for (int j = 0; j < i; j++)
        if (e->w[j].cfg.port == c->port && e->w[j].cfg.queue == c->queue) {
            set_err(err, errlen, "workers %d and %d: one queue of a port, one worker", j, i);
            return -1;
        }
    w->port = ports[c->port];
    w->pid = w->port->pid;
    w->queue = c->queue;
    if (c->queue >= w->port->nq) {
        set_err(err, errlen, "worker %d: queue %u, port %s has %u", i, c->queue, w->port->name, w->port->nq);
        return -1;
    }
    if (pk_dpdk_port_busy(w->port)) {
        set_err(err, errlen, "port %s is in use by another engine", w->port->name);
        return -1;
    }
    if (c->burst == 0 || c->burst > PK_DPDK_MAX_BURST) {
        set_err(err, errlen, "worker %d: burst %u out of range 1..%d", i, c->burst, PK_DPDK_MAX_BURST);
        return -1;
    }
    if (c->duration_ns == 0) {
        set_err(err, errlen, "worker %d: duration must be above 0", i);
        return -1;
    }
    if (c->role == PK_DPDK_GEN) {
        if (c->nsizes > PK_DPDK_MAX_PATTERN) {
            set_err(err, errlen, "worker %d: %u frame sizes: at most %d", i, c->nsizes, PK_DPDK_MAX_PATTERN);
            return -1;
        }
        for (uint32_t k = 0; k < c->nsizes; k++)
            if (c->sizes[k] < PK_DPDK_MIN_SIZE || c->sizes[k] > PK_DPDK_MAX_JUMBO) {
                set_err(err, errlen, "worker %d: frame size %u out of range %d..%d", i, c->sizes[k],
                        PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
                return -1;
            }
        if (c->ramp_ns && (!(c->rate > 0) || !(c->rate_end > 0) || c->rate_end > 1e10)) {
            set_err(err, errlen, "worker %d: a ramp needs a start rate and an end rate above 0", i);
            return -1;
        }
        if (c->probe_rate < 0 || c->probe_rate > 1e6 ||
            (c->probe_rate > 0 && (c->probe_size < PK_DPDK_MIN_SIZE + 6 || c->probe_size > PK_DPDK_MAX_JUMBO))) {
            set_err(err, errlen, "worker %d: probes: rate 0..1e6/s, size 70..%d", i, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->nsizes == 0 && (c->size < PK_DPDK_MIN_SIZE || c->size > PK_DPDK_MAX_JUMBO)) {
            set_err(err, errlen, "worker %d: size %u out of range %d..%d", i, c->size,
                    PK_DPDK_MIN_SIZE, PK_DPDK_MAX_JUMBO);
            return -1;
        }
        if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS || c->flow_first > PK_DPDK_MAX_FLOWS - c->flows) {
            set_err(err, errlen, "worker %d: flows %u from %u out of range 1..%d", i, c->flows, c->flow_first,
                    PK_DPDK_MAX_FLOWS);
            return -1;
        }
        const uint64_t nsp = c->sports ? c->sports : (uint64_t)c->flow_first + c->flows, ndp = c->dports ? c->dports : 1,
                       nsi = c->src_ips ? c->src_ips : 1, ndi = c->dst_ips ? c->dst_ips : 1;
        if (c->sport + nsp > 65536 || c->dport + ndp > 65536 || nsi > 1u << 17 || ndi > 1u << 17) {
            set_err(err, errlen, "worker %d: a port range passes 65535 or an address range is above 131072", i);
            return -1;
        }
        if (nsp * ndp * nsi * ndi < (uint64_t)c->flow_first + c->flows) {
            set_err(err, errlen, "worker %d: %u flows need as many tuples: sports x dports x src_ips x dst_ips "
                    "is only %llu", i, c->flow_first + c->flows, (unsigned long long)(nsp * ndp * nsi * ndi));
            return -1;
        }
        if (!(c->rate >= 0) || c->rate > 1e10) {
            set_err(err, errlen, "worker %d: rate %g out of range", i, c->rate);
            return -1;
        }
        if (c->track > 2) {
            set_err(err, errlen, "worker %d: track %d: 0 (send only), 1 (frames come back), 2 (bidirectional)",
                    i, c->track);
            return -1;
        }
        if (c->peer >= 0 && (c->peer >= e->n || c->peer == i ||
                             (e->w[c->peer].cfg.role == PK_DPDK_GEN && e->w[c->peer].cfg.track != 2))) {
            set_err(err, errlen, "worker %d: peer %d must be a receiving worker of this engine (or a "
                    "bidirectional generator)", i, c->peer);
            return -1;
        }
        if (w->port->ip == 0) {
            set_err(err, errlen, "worker %d: port %s has no IPv4 address to send from", i, w->port->name);
            return -1;
        }
    } else if (c->role == PK_DPDK_FORWARD) {
        if (c->out_port < 0 || c->out_port >= nports || !ports[c->out_port] || c->out_port == c->port ||
            ports[c->out_port] == w->port) {
            set_err(err, errlen, "worker %d: forward: out port %d must be another port of this engine", i,
                    c->out_port);
            return -1;
        }
        w->out = ports[c->out_port];
        w->out_pid = w->out->pid;
        if (c->queue >= w->out->nq) {
            set_err(err, errlen, "worker %d: queue %u, out port %s has %u", i, c->queue, w->out->name,
                    w->out->nq);
            return -1;
        }
        if (pk_dpdk_port_busy(w->out)) {
            set_err(err, errlen, "port %s is in use by another engine", w->out->name);
            return -1;
        }
        /* one sender per tx queue: only forwarders (which send elsewhere) may poll (out, queue) */
        for (int j = 0; j < i; j++) {
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if ((o->port == c->out_port && o->queue == c->queue && o->role != PK_DPDK_FORWARD) ||
                (o->role == PK_DPDK_FORWARD && o->out_port == c->out_port && o->queue == c->queue)) {
                set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->out->name);
                return -1;
            }
        }
        if (c->with_worker >= 0) {
            if (c->with_worker >= e->n || c->with_worker == i || e->w[c->with_worker].cfg.role != PK_DPDK_FORWARD ||
                e->w[c->with_worker].cfg.with_worker >= 0) {
                set_err(err, errlen, "worker %d: with_worker %d must be another forwarder of this engine "
                        "without a guest of its own", i, c->with_worker);
                return -1;
            }
            for (int j = 0; j < e->n; j++)
                if (j != i && e->w[j].cfg.role == PK_DPDK_FORWARD && e->w[j].cfg.with_worker == c->with_worker) {
                    set_err(err, errlen, "workers %d and %d both run worker %d", j, i, c->with_worker);
                    return -1;
                }
        }
    } else if (c->flows == 0 || c->flows > PK_DPDK_MAX_FLOWS) {
        set_err(err, errlen, "worker %d: flows %u out of range 1..%d", i, c->flows, PK_DPDK_MAX_FLOWS);
        return -1;
    }
    if (c->role != PK_DPDK_FORWARD)
        for (int j = 0; j < i; j++) {   /* a forwarder checked before this one sends on (port, queue)? */
            const pk_dpdk_worker_cfg *o = &e->w[j].cfg;
            if (o->role == PK_DPDK_FORWARD && o->out_port == c->port && o->queue == c->queue) {
                set_err(err, errlen, "workers %d and %d would both send on queue %u of port %s", j, i,
                        c->queue, w->port->name);
                return -1;
            }
        }
    return 0;
}

/* Zeroed and touched now (calloc may map lazily): no page faults in the loop. */
static void *zalloc(size_t size)
{
    size = (size + 63u) & ~(size_t)63u;
    void *p = aligned_alloc(64, size ? size : 64);
    if (p)
        memset(p, 0, size);
    return p;
}

static int alloc_worker(worker *w)
{
    const pk_dpdk_worker_cfg *c = &w->cfg;
    if (c->role == PK_DPDK_GEN) {
        w->npattern = c->nsizes ? c->nsizes : 1;
        w->pattern = zalloc(sizeof(uint16_t) * w->npattern);
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
        w->flow_seq = zalloc(sizeof(uint64_t) * c->flows);
        if (!w->tmpl || !w->flow_seq)
            return -1;
        w->nsp = c->sports ? c->sports : c->flow_first + c->flows;
        w->ndp = c->dports ? c->dports : 1;
        w->nsi = c->src_ips ? c->src_ips : 1;
        w->ndi = c->dst_ips ? c->dst_ips : 1;
        w->src_h = rte_be_to_cpu_32(w->port->ip);
        w->dst_h = rte_be_to_cpu_32(c->dst_ip);
        gen_flow_set(w, c->flow_first);
        w->wrap[0] = w->dsp;
        w->wrap[1] = w->ddp;
        w->wrap[2] = w->dsi;
        w->wrap[3] = w->ddi;
        gen_template(w);
    }
    return 0;
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
        flow_state *t = zalloc(sizeof(flow_state) * ((size_t)n + PK_DPDK_MAX_QUEUES));
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
    if (need_pool(err, errlen) != 0)
        return NULL;
    if (n <= 0 || n > PK_DPDK_MAX_WORKERS) {
        set_err(err, errlen, "between 1 and %d workers, not %d", PK_DPDK_MAX_WORKERS, n);
        return NULL;
    }
    pk_dpdk_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    e->w = aligned_alloc(64, sizeof(worker) * (size_t)n);
    if (!e->w) {
        free(e);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    memset(e->w, 0, sizeof(worker) * (size_t)n);
    e->n = n;
    for (int i = 0; i < n; i++) {
        e->w[i].cfg = cfgs[i];
        e->w[i].engine = e;
    }
    for (int i = 0; i < n; i++) {
        if (check_worker(e, ports, nports, i, err, errlen) != 0) {
            e->n = 0;  /* no port is marked busy yet */
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i <= n; i++) {
        if (i < n ? alloc_worker(&e->w[i]) != 0 : alloc_flow_tables(e) != 0) {
            set_err(err, errlen, "worker %d: out of memory", i);
            for (int j = 0; j < n; j++)
                e->w[j].port = e->w[j].out = NULL;
            pk_dpdk_destroy(e);
            return NULL;
        }
    }
    for (int i = 0; i < n; i++) {   /* frames longer than a standard mbuf: one jumbo mbuf each */
        worker *w = &e->w[i];
        w->gpool = pool;
        if (w->cfg.role == PK_DPDK_GEN && w->frame_len > RTE_MBUF_DEFAULT_DATAROOM) {
            if (need_jumbo_pool(err, errlen) != 0) {
                for (int j = 0; j < n; j++)
                    e->w[j].port = e->w[j].out = NULL;
                pk_dpdk_destroy(e);
                return NULL;
            }
            w->gpool = jumbo_pool;
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
    for (int i = 0; i < e->n; i++)
        if (e->w[i].started || e->w[i].running || e->settled) {
            set_err(err, errlen, "this engine has already run; make a new one");
            return -1;
        }
    timebase_now(&e->tb);
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
        if (c->role == PK_DPDK_GEN && !c->dst_mac_set && c->peer < 0)
            arp = PK_DPDK_ARP_NS;
    }
    e->hard_end = rte_rdtsc() + tb_cycles(&e->tb, longest + arp + PK_DPDK_DRAIN_NS);
    for (int i = 0; i < e->n; i++)   /* run by another worker's thread: running until it ends */
        if (e->w[i].hosted)
            e->w[i].running = 1;
    /* the port-wide NIC counters' base, before any worker sends: a thread that starts late
     * must not miss what another queue's worker already made the PMD count */
    for (int i = 0; i < e->n; i++)
        read_nic(&e->w[i], rte_rdtsc(), 1);
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (w->hosted)
            continue;
        w->running = 1;
        worker_polls(w, 1);
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            worker_polls(w, 0);
            w->running = 0;
            for (int j = 0; j < e->n; j++)   /* guests of threads that never started */
                if (e->w[j].guest && !e->w[j].started)
                    e->w[j].guest->running = 0;
            set_err(err, errlen, "worker %d: pthread_create: %s", i, strerror(rc));
            pk_dpdk_stop(e);
            pk_dpdk_join(e);
            return -1;
        }
        w->started = 1;
    }
    return 0;
}

void pk_dpdk_stop(pk_dpdk_engine *e)
{
    __atomic_store_n(&e->stop, 1, __ATOMIC_RELAXED);
}

int pk_dpdk_running(const pk_dpdk_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += __atomic_load_n(&e->w[i].running, __ATOMIC_ACQUIRE);
    return n;
}

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
    int joined = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->w[i].started) {
            pthread_join(e->w[i].thread, NULL);
            e->w[i].started = 0;
            joined = 1;
        }
    }
    if (e->settled || !joined)
        return;
    /* the port-wide NIC counters once more, now that every queue's worker has stopped */
    for (int i = 0; i < e->n; i++)
        if (e->w[i].nic_owner && !e->w[i].err[0])
            read_nic(&e->w[i], rte_rdtsc(), 0);
    /* settle loss once: what the sender sent and never arrived, per flow */
    e->settled = 1;
    for (int i = 0; i < e->n; i++) {
        worker *w = &e->w[i];
        if (!w->owns_flows)
            continue;
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
    if (i < 0 || i >= e->n)
        return;
    const worker *w = &e->w[i];
    for (int k = 0; k < PK_NCOUNTERS; k++)
        counters[k] = pk_read(&w->c, (enum pk_counter_id)k);
    if (hist)
        for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
            hist[k] = __atomic_load_n(&w->hist.b[k], __ATOMIC_RELAXED);
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

const char *pk_dpdk_error(const pk_dpdk_engine *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->w[i].err[0])
            return e->w[i].err;
    return NULL;
}

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
    free(e->w);
    free(e);
}

/* ------------------------------------------ hooks for other engines (tcp_engine.c) */

struct rte_mempool *pk_dpdk_pool(void) { return pool; }

uint32_t pk_dpdk_port_ip(const pk_dpdk_port *p) { return p->ip; }

int pk_dpdk_port_claim(pk_dpdk_port *p)
{
    int idle = 0;
    return __atomic_compare_exchange_n(&p->busy, &idle, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 0 : -1;
}

void pk_dpdk_port_release(pk_dpdk_port *p) { __atomic_store_n(&p->busy, 0, __ATOMIC_RELEASE); }
