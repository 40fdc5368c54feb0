/* perfkit's DPDK engine: memif ports and EAL's interrupt thread (see below). */
#define _GNU_SOURCE
#include "dpdk_internal.h"

#include <errno.h>
#include <time.h>

#include <rte_alarm.h>

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
    if (ctl_pending == 0 && pkd_eal_state == 1 && rte_eal_alarm_set(CTL_PERIOD_US, ctl_alarm_cb, NULL) == 0)
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

void pkd_ctl_quiet_begin(void)
{
    pthread_mutex_lock(&ctl_lock);
    ctl_quiet++;
    ctl_wait_parked();
    pthread_mutex_unlock(&ctl_lock);
}

void pkd_ctl_quiet_end(void)
{
    pthread_mutex_lock(&ctl_lock);
    ctl_quiet--;
    pthread_cond_broadcast(&ctl_cond);
    pthread_mutex_unlock(&ctl_lock);
}

void pkd_memif_add(pk_dpdk_port *p)
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

void pkd_memif_remove(pk_dpdk_port *p)
{
    pthread_mutex_lock(&ctl_lock);
    for (int i = 0; i < MAX_MEMIF; i++)
        if (memif_open[i] == p)
            memif_open[i] = NULL;
    pthread_cond_broadcast(&ctl_cond);
    pthread_mutex_unlock(&ctl_lock);
}
