/* perfkit's DPDK engine: EAL once per process, the mbuf pools, the TSC time base, the
 * crash report (see dpdk_engine.h). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>

#define POOL_CACHE      256

/* ------------------------------------------------------------ time base */

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

int pkd_eal_state;                    /* 0 never, 1 up, -1 failed */
static char eal_fail[256];
struct rte_mempool *pkd_pool;
struct rte_mempool *pkd_jumbo_pool;   /* frames above one standard mbuf: made on first need */
static uint64_t cal_tsc, cal_ns;      /* the TSC/clock pair taken at init */

void pkd_set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

unsigned pkd_main_socket(void)
{
    int s = (int)rte_lcore_to_socket_id(rte_get_main_lcore());
    return s < 0 ? 0u : (unsigned)s;
}

#define JUMBO_MBUFS 2047
#define JUMBO_ROOM  (RTE_PKTMBUF_HEADROOM + PK_DPDK_MAX_JUMBO)

int pkd_need_jumbo_pool(char *err, size_t errlen)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!pkd_jumbo_pool)
        pkd_jumbo_pool = rte_pktmbuf_pool_create("pk_jumbo", JUMBO_MBUFS, POOL_CACHE, 0, JUMBO_ROOM,
                                                 (int)pkd_main_socket());
    pthread_mutex_unlock(&lock);
    if (!pkd_jumbo_pool) {
        pkd_set_err(err, errlen, "DPDK: cannot make the jumbo frame pool (%u mbufs of %u bytes): %s "
                    "(give EAL more memory)", JUMBO_MBUFS, JUMBO_ROOM, rte_strerror(rte_errno));
        return -1;
    }
    return 0;
}

static int make_pool(uint32_t nb_mbufs, char *err, size_t errlen)
{
    pkd_pool = rte_pktmbuf_pool_create("pk_mbufs", nb_mbufs, POOL_CACHE, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       (int)pkd_main_socket());
    if (!pkd_pool) {
        /* EAL is up and stays up; a later call can try again with fewer buffers */
        pkd_set_err(err, errlen, "DPDK: cannot make a pool of %u mbufs: %s (give EAL more memory, "
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
    if (pkd_eal_state == 1)
        return pkd_pool ? 0 : make_pool(nb_mbufs, err, errlen);
    if (pkd_eal_state == -1) {
        pkd_set_err(err, errlen, "DPDK EAL failed to initialise earlier in this process (%s); "
                    "EAL can be initialised only once per process: restart the kernel/process", eal_fail);
        return -1;
    }
    if (argc < 1 || argc > 64) {
        pkd_set_err(err, errlen, "EAL: between 1 and 64 arguments, not %d", argc);
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
        pkd_eal_state = -1;
        snprintf(eal_fail, sizeof(eal_fail), "rte_eal_init: %s", rte_strerror(init_errno));
        pkd_set_err(err, errlen, "DPDK EAL failed to initialise (%s; its log is on stderr). "
                    "EAL can be initialised only once per process: fix the options, then restart "
                    "the kernel/process", eal_fail);
        return -1;
    }
    pkd_eal_state = 1;
    crash_report_install();
    tsc_mono_pair(&cal_tsc, &cal_ns);
    return make_pool(nb_mbufs, err, errlen);
}

int pkd_need_pool(char *err, size_t errlen)
{
    if (pkd_eal_state != 1) {
        pkd_set_err(err, errlen, "DPDK EAL is not initialised");
        return -1;
    }
    if (!pkd_pool) {
        pkd_set_err(err, errlen, "DPDK: no mbuf pool (its creation failed at EAL init)");
        return -1;
    }
    return 0;
}

int pk_dpdk_eal_state(void) { return pkd_eal_state; }

void pk_dpdk_pool_counts(uint32_t *size, uint32_t *avail)
{
    *size = (pkd_pool ? pkd_pool->size : 0) + (pkd_jumbo_pool ? pkd_jumbo_pool->size : 0);
    *avail = (pkd_pool ? rte_mempool_avail_count(pkd_pool) : 0) + (pkd_jumbo_pool ? rte_mempool_avail_count(pkd_jumbo_pool) : 0);
}

int pk_dpdk_ethdev_count(void) { return pkd_eal_state == 1 ? (int)rte_eth_dev_count_total() : 0; }

uint64_t pk_dpdk_tsc_hz(void) { return pkd_eal_state == 1 ? rte_get_tsc_hz() : 0; }

void pkd_timebase_now(timebase *tb)
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

/* a hook for other engines (tcp_engine.c) */
struct rte_mempool *pk_dpdk_pool(void) { return pkd_pool; }
