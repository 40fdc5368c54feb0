/* perfkit's delay line: the packet path of the lab's bpf impairment backend.
 *
 * A tc BPF program diverts each packet leaving a lab link end into a tap device
 * (one tap per link end). The delay line reads the taps, holds every packet for
 * delay +- jitter (uniform, as netem), lets the reorder share through at once,
 * flips one bit in the corrupt share and writes the packet back into its tap,
 * whose ingress BPF program sends it out of the link.
 *
 * One pthread runs the whole packet path; it never touches Python and never
 * allocates once started. Packets live in a fixed pool of buffers (one slot
 * each, sized for the lab's MTU); when the pool is full a packet is read and
 * dropped, and counted. Per tap, packets wait in a FIFO as long as their due
 * times keep in order (a fixed delay); a packet due before the last one queued
 * on its tap (jitter, or a delay just made shorter) waits in one min-heap
 * instead, so packets always leave in due order, and in arrival order among
 * equals. The thread sleeps in ppoll() until the next packet is due, less a
 * wake-up margin it learns from its own late wake-ups, and spins for the last
 * stretch; spinning takes at most a quarter of the time (PK_DL_SPIN_BUDGET_NS of
 * every PK_DL_SPIN_WINDOW_NS), past which packets go out when the thread wakes
 * (late by a wake-up, tens of microseconds in a VM), so that a steady stream
 * does not keep a CPU spinning.
 *
 * A packet's delay counts from the moment the BPF program diverted it, not from
 * when this thread got round to reading it (a sleeping thread wakes tens of
 * microseconds late in a VM, and a busy one reads in batches): the program
 * pushes an outer 802.1ad tag whose 16-bit TCI holds CLOCK_MONOTONIC >> 12
 * (4.096 us units, wrapping every 268 ms), which the line reads and strips. A
 * frame without that tag is timed from when it was read. With stamped frames,
 * the thread does not wake for each arrival while it holds packets: it reads
 * the taps when it wakes to send, at least every PK_DL_READ_LAG_NS (and half the
 * shortest delay), and while awake at most every PK_DL_POLL_EVERY_NS, so that a
 * stream is read in batches. Once a frame comes without the stamp, every frame
 * is read as it comes again.
 *
 * The thread runs SCHED_FIFO when asked (rt_priority): a delay line in a normal
 * thread falls milliseconds behind as soon as the machine is busy.
 *
 * Python (perfkit._delayline) opens the taps, creates the line, starts it,
 * changes the configuration per tap at any time (a mutex taken only when the
 * configuration changes; the thread notices a new generation number), reads
 * the counters, and stops it. Stopping is a flag plus an eventfd: the thread
 * ends within one loop, and never sleeps longer than PK_DL_MAX_SLEEP_NS.
 */
#ifndef PERFKIT_DELAYLINE_H
#define PERFKIT_DELAYLINE_H

#include <stddef.h>
#include <stdint.h>

#define PK_DL_MAX_TAPS      256
#define PK_DL_MAX_POOL      (1u << 20)            /* packets */
#define PK_DL_POOL_DEFAULT  200000u               /* packets, at most ... */
#define PK_DL_POOL_BYTES    (512ull << 20)        /* ... and this many bytes of buffers */
#define PK_DL_MAX_DELAY_NS  20000000000ull        /* 20 s: delay and jitter, each */
#define PK_DL_MAX_SLEEP_NS  100000000ull          /* the thread looks at its stop flag this often */
#define PK_DL_READ_BATCH    64                    /* packets read from one tap in a row */
#define PK_DL_SEND_BATCH    256                   /* packets written before reading again */
#define PK_DL_POLL_EVERY_NS 20000ull             /* awake: poll the taps at most this often (stamped) */
#define PK_DL_READ_LAG_NS   2000000ull           /* asleep with packets held: read the taps this often */
#define PK_DL_SPIN_WINDOW_NS 10000000ull          /* spinning (awake, waiting for a due time) ... */
#define PK_DL_SPIN_BUDGET_NS 2500000ull           /* ... takes at most this much of each window */
#define PK_DL_STAMP_TPID    0x88a8                /* 802.1ad: the outer tag that carries the stamp */
#define PK_DL_STAMP_SHIFT   12                    /* stamp = (CLOCK_MONOTONIC ns >> 12) & 0xffff */

/* Per-tap counters: one list, in this order (pk_dl_counter_names). Written by the
 * delay-line thread only; read at any time. */
#define PK_DL_COUNTERS(X) \
    X(rx)           /* packets read from the tap */ \
    X(rx_bytes)     \
    X(tx)           /* packets written back (sent on) */ \
    X(tx_bytes)     \
    X(dropped)      /* read and dropped: the pool was full (or the frame was too big) */ \
    X(tx_errors)    /* a write into the tap failed: the packet is lost */ \
    X(reordered)    /* sent at once, ahead of the delayed ones */ \
    X(corrupted)    /* sent with one bit flipped */ \
    X(stamped)      /* timed from the BPF program's stamp (else from the read) */ \
    X(queued)       /* held now (a gauge) */ \
    X(late_ns_sum)  /* delayed packets: sum of (sent - due) */ \
    X(late_ns_max)

enum {
#define PK_DL_ENUM(name) PK_DL_##name,
    PK_DL_COUNTERS(PK_DL_ENUM)
#undef PK_DL_ENUM
    PK_DL_NCOUNTERS
};

/* Whole-line figures (pk_dl_stat_names). */
#define PK_DL_STATS(X) \
    X(pool_size)       /* packet buffers */ \
    X(slot_bytes)      /* bytes per buffer */ \
    X(pool_used)       /* buffers holding a packet now */ \
    X(pool_used_max)   \
    X(heap_max)        /* most packets waiting out of FIFO order at once */ \
    X(loops)           \
    X(sleeps)          /* ppoll() calls that could block */ \
    X(spin_ns)         /* time spent awake waiting for a due time */ \
    X(wake_late_ns)    /* running mean of how late a timed sleep wakes up */ \
    X(margin_ns)       /* wakes this long before a packet is due, then spins */ \
    X(cpu_ns)          /* CPU time of the delay-line thread */ \
    X(rt_priority)     /* its SCHED_FIFO priority, 0: the normal class */ \
    X(nice_boost)      /* SCHED_FIFO refused: how far its nice value was lowered (20: to -20) */ \
    X(slice_ns)        /* ... and the scheduler slice it asked for (0: the default) */ \
    X(tid)             /* the thread's id, for top -H, perf -t and /proc/PID/task/TID */

enum {
#define PK_DL_ENUM(name) PK_DL_STAT_##name,
    PK_DL_STATS(PK_DL_ENUM)
#undef PK_DL_ENUM
    PK_DL_NSTATS
};

extern const char *const pk_dl_counter_names[PK_DL_NCOUNTERS];
extern const char *const pk_dl_stat_names[PK_DL_NSTATS];

typedef struct pk_dl pk_dl;

/* A delay line over ntaps tap fds (non-blocking, IFF_TAP | IFF_NO_PI; the line
 * does not own them). mtu: the lab's MTU (a buffer holds mtu + Ethernet + VLAN
 * headers). pool: packet buffers, 0 = the default (PK_DL_POOL_DEFAULT, fewer for
 * a large MTU). stamped: frames carry the diversion time in an outer 802.1ad
 * tag (stripped before they go on). rt_priority: run the thread SCHED_FIFO at this
 * priority (1..99; it then wakes on time on a busy machine, as netem's softirq
 * does), 0 = the caller's class; if the kernel refuses, the thread stays in the
 * caller's class, at nice -20 and a short slice where allowed (stats rt_priority,
 * nice_boost and slice_ns say which). notify_fd: written one byte when the thread
 * ends, or -1. Every tap starts with no delay. NULL + err on failure. */
pk_dl *pk_dl_create(const int *fds, int ntaps, uint32_t mtu, uint32_t pool, int stamped,
                    int rt_priority, int notify_fd, char *err, size_t errlen);
int pk_dl_ntaps(const pk_dl *dl);
/* Start the thread (signals blocked in it). 0, or -1 + err. */
int pk_dl_start(pk_dl *dl, char *err, size_t errlen);
/* Change one tap's impairment; safe from any thread at any time. reorder and
 * corrupt are probabilities 0..1. 0, or -1 for a bad tap or value. */
int pk_dl_set_config(pk_dl *dl, int tap, uint64_t delay_ns, uint64_t jitter_ns,
                     double reorder, double corrupt);
/* Ask the thread to stop (it drops what it holds). Safe from any thread. */
void pk_dl_stop(pk_dl *dl);
/* 1 while the thread runs. */
int pk_dl_running(const pk_dl *dl);
/* Wait for the thread (bounded: it stops within PK_DL_MAX_SLEEP_NS of a stop). */
void pk_dl_join(pk_dl *dl);
/* One tap's counters (PK_DL_NCOUNTERS values). */
void pk_dl_counters(const pk_dl *dl, int tap, uint64_t *out);
/* Whole-line figures (PK_DL_NSTATS values). */
void pk_dl_stats(const pk_dl *dl, uint64_t *out);
/* Why the thread stopped by itself (a tap failed), or NULL. */
const char *pk_dl_error(const pk_dl *dl);
/* Stop, join and free. */
void pk_dl_destroy(pk_dl *dl);

#endif
