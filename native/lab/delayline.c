/* perfkit's delay line: see delayline.h. */
#define _GNU_SOURCE
#include "delayline.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "perfkit/clock.h"

#define NIL UINT32_MAX
#define FRAME_EXTRA (14 + 8)             /* Ethernet header + the stamp tag + a VLAN tag the tap may insert */
#define IDX_BITS 20                      /* heap key: seq << IDX_BITS | slot */
#define MARGIN_MIN_NS 10000ull
#define MARGIN_MAX_NS 200000ull
#define LATE_SAMPLE_MAX_NS 1000000ull
#define NORMAL_CLASS_SLICE_NS 100000ull  /* the shortest slice the kernel allows */

const char *const pk_dl_counter_names[PK_DL_NCOUNTERS] = {
#define PK_DL_NAME(name) #name,
    PK_DL_COUNTERS(PK_DL_NAME)
#undef PK_DL_NAME
};

const char *const pk_dl_stat_names[PK_DL_NSTATS] = {
#define PK_DL_NAME(name) #name,
    PK_DL_STATS(PK_DL_NAME)
#undef PK_DL_NAME
};

typedef struct {
    uint64_t delay_ns;
    uint64_t jitter_ns;
    uint64_t reorder;        /* threshold out of 2^32: a 32-bit random number below it hits */
    uint64_t corrupt;
} dl_cfg;

typedef struct {             /* one packet buffer's bookkeeping */
    uint64_t due;
    uint32_t next;           /* the next slot in its tap's FIFO */
    uint32_t len;
    uint32_t tap;
    uint32_t off;            /* the packet starts this far into its buffer (a stripped tag) */
} dl_meta;

typedef struct {
    uint64_t due;
    uint64_t key;            /* arrival number << IDX_BITS | slot: ties leave in arrival order */
} dl_heap_ent;

typedef struct {
    _Alignas(64) uint64_t c[PK_DL_NCOUNTERS];   /* the thread writes, anyone reads */
    int fd;
    uint32_t head, tail;     /* FIFO of slots whose due times keep in order */
    uint64_t tail_due;
    dl_cfg cfg;              /* the thread's copy of this tap's configuration */
} dl_tap;

struct pk_dl {
    int ntaps;
    int notify_fd;
    int evfd;
    int stamped;
    int unstamped;           /* a frame came without the stamp: time every one as it comes */
    int rt_priority;
    uint32_t mtu, slot_bytes, pool_n;
    uint8_t *bufs;
    size_t bufs_len;
    uint8_t *scratch;        /* where a packet that finds no free buffer is read, to drop it */
    dl_meta *meta;
    uint32_t *free_stack;
    uint32_t nfree;
    dl_heap_ent *heap;
    uint32_t nheap;
    uint64_t seq;
    uint64_t poll_every;     /* while awake, poll the taps at most this often (ns) */
    uint64_t read_lag;       /* while packets wait, read the taps at least this often (ns);
                                0: wake for every arrival */
    uint64_t nonempty[PK_DL_MAX_TAPS / 64];   /* taps whose FIFO holds packets */
    uint64_t rng[4];

    pthread_mutex_t cfg_mu;  /* taken only to change or copy the configuration */
    dl_cfg *cfg;             /* the configuration as set, guarded by cfg_mu */
    _Atomic uint64_t cfg_gen;
    uint64_t cfg_seen;

    _Atomic int stop;
    _Atomic int running;
    int started, joined;
    pthread_t thread;
    _Alignas(64) uint64_t stats[PK_DL_NSTATS];
    _Atomic int failed;
    char err[256];
    dl_tap taps[];
};

/* ------------------------------------------------------------------ small helpers */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static inline uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void st(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void add(uint64_t *p, uint64_t v) { st(p, ld(p) + v); }   /* one writer */

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rnd(pk_dl *dl)        /* xoshiro256** */
{
    uint64_t *s = dl->rng;
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

static inline int hit(pk_dl *dl, uint64_t threshold)
{
    return threshold && (rnd(dl) >> 32) < threshold;
}

static uint64_t threshold(double p)
{
    if (!(p > 0))
        return 0;
    if (p >= 1)
        return 1ull << 32;
    uint64_t t = (uint64_t)(p * 4294967296.0 + 0.5);
    return t ? t : 1;
}

static void fail(pk_dl *dl, const char *fmt, ...)
{
    if (atomic_exchange(&dl->failed, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(dl->err, sizeof(dl->err), fmt, ap);
        va_end(ap);
    }
    atomic_store(&dl->stop, 1);
}

static int tap_gone(int e)   /* the tap (or its namespace) went away: stop, as the lab is going */
{
    return e == EBADFD || e == ENODEV || e == EIO || e == EBADF;
}

/* ------------------------------------------------------------------ the heap */

static inline int heap_less(const dl_heap_ent *a, const dl_heap_ent *b)
{
    return a->due < b->due || (a->due == b->due && a->key < b->key);
}

static void heap_push(pk_dl *dl, uint64_t due, uint32_t slot)
{
    dl_heap_ent e = { due, (dl->seq++ << IDX_BITS) | slot };
    uint32_t i = dl->nheap++;
    while (i) {
        uint32_t p = (i - 1) / 2;
        if (!heap_less(&e, &dl->heap[p]))
            break;
        dl->heap[i] = dl->heap[p];
        i = p;
    }
    dl->heap[i] = e;
    if (dl->nheap > ld(&dl->stats[PK_DL_STAT_heap_max]))
        st(&dl->stats[PK_DL_STAT_heap_max], dl->nheap);
}

static uint32_t heap_pop(pk_dl *dl)
{
    uint32_t slot = (uint32_t)(dl->heap[0].key & ((1u << IDX_BITS) - 1));
    dl_heap_ent last = dl->heap[--dl->nheap];
    uint32_t n = dl->nheap, i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_less(&dl->heap[c + 1], &dl->heap[c]))
            c++;
        if (!heap_less(&dl->heap[c], &last))
            break;
        dl->heap[i] = dl->heap[c];
        i = c;
    }
    if (n)
        dl->heap[i] = last;
    return slot;
}

/* ------------------------------------------------------------------ queues */

static inline uint8_t *buf_of(pk_dl *dl, uint32_t slot)
{
    return dl->bufs + (size_t)slot * dl->slot_bytes;
}

static inline void release(pk_dl *dl, uint32_t slot)
{
    dl->free_stack[dl->nfree++] = slot;
}

static void enqueue(pk_dl *dl, int k, uint32_t slot, uint64_t due)
{
    dl_tap *t = &dl->taps[k];
    dl->meta[slot].due = due;
    if (t->head == NIL) {
        dl->meta[slot].next = NIL;
        t->head = t->tail = slot;
        t->tail_due = due;
        dl->nonempty[k >> 6] |= 1ull << (k & 63);
    } else if (due >= t->tail_due) {
        dl->meta[slot].next = NIL;
        dl->meta[t->tail].next = slot;
        t->tail = slot;
        t->tail_due = due;
    } else {
        heap_push(dl, due, slot);        /* due before the last one queued here: out of order */
    }
    add(&t->c[PK_DL_queued], 1);
}

/* The packet due first: its due time, and -1 for the heap or the tap's index; 0 if none. */
static int earliest(pk_dl *dl, uint64_t *due, int *from)
{
    uint64_t best = UINT64_MAX;
    int which = -2;
    if (dl->nheap) {
        best = dl->heap[0].due;
        which = -1;
    }
    for (int w = 0; w < PK_DL_MAX_TAPS / 64; w++) {
        uint64_t bits = dl->nonempty[w];
        while (bits) {
            int k = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            uint64_t d = dl->meta[dl->taps[k].head].due;
            if (which == -2 || d < best) {
                best = d;
                which = k;
            }
        }
    }
    *due = best;
    *from = which;
    return which != -2;
}

static uint32_t take(pk_dl *dl, int from)
{
    if (from < 0)
        return heap_pop(dl);
    dl_tap *t = &dl->taps[from];
    uint32_t slot = t->head;
    t->head = dl->meta[slot].next;
    if (t->head == NIL) {
        t->tail = NIL;
        dl->nonempty[from >> 6] &= ~(1ull << (from & 63));
    }
    return slot;
}

/* Write one packet back into its tap. 0, or -1 when the tap is gone. */
static int emit(pk_dl *dl, int k, const uint8_t *pkt, uint32_t len)
{
    dl_tap *t = &dl->taps[k];
    for (int tries = 0; tries < 3; tries++) {
        ssize_t n = write(t->fd, pkt, len);
        if (n >= 0) {
            add(&t->c[PK_DL_tx], 1);
            add(&t->c[PK_DL_tx_bytes], len);
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (tap_gone(errno)) {
            fail(dl, "tap %d: write: %s", k, strerror(errno));
            return -1;
        }
        break;
    }
    add(&t->c[PK_DL_tx_errors], 1);
    return 0;
}

/* Send what is due by now (at most PK_DL_SEND_BATCH). Returns how many. */
static int send_due(pk_dl *dl, uint64_t now)
{
    int sent = 0;
    uint64_t due;
    int from;
    while (sent < PK_DL_SEND_BATCH && earliest(dl, &due, &from)) {
        if (due > now) {
            now = pk_now_ns();
            if (due > now)
                break;
        }
        uint32_t slot = take(dl, from);
        int k = (int)dl->meta[slot].tap;
        dl_tap *t = &dl->taps[k];
        uint64_t late = now - due;
        add(&t->c[PK_DL_late_ns_sum], late);
        if (late > ld(&t->c[PK_DL_late_ns_max]))
            st(&t->c[PK_DL_late_ns_max], late);
        add(&t->c[PK_DL_queued], (uint64_t)-1);
        int rc = emit(dl, k, buf_of(dl, slot) + dl->meta[slot].off, dl->meta[slot].len);
        release(dl, slot);
        sent++;
        if (rc)
            break;
    }
    return sent;
}

static void refresh_config(pk_dl *dl)
{
    uint64_t gen = atomic_load_explicit(&dl->cfg_gen, memory_order_acquire);
    if (gen == dl->cfg_seen)
        return;
    pthread_mutex_lock(&dl->cfg_mu);
    for (int k = 0; k < dl->ntaps; k++)
        dl->taps[k].cfg = dl->cfg[k];
    dl->cfg_seen = atomic_load_explicit(&dl->cfg_gen, memory_order_relaxed);
    pthread_mutex_unlock(&dl->cfg_mu);
    /* Stamped frames may wait in their tap without coming out late, as long as they are
     * read before they are due: then the thread need not wake for each one. least: the
     * shortest time a packet is held (0 where the reorder share is sent at once). */
    uint64_t least = UINT64_MAX;
    for (int k = 0; k < dl->ntaps; k++) {
        const dl_cfg *c = &dl->taps[k].cfg;
        if (c->delay_ns || c->jitter_ns || c->reorder || c->corrupt) {
            uint64_t held = c->delay_ns > c->jitter_ns ? c->delay_ns - c->jitter_ns : 0;
            if (c->reorder)
                held = 0;
            if (held < least)
                least = held;
        }
    }
    if (!dl->stamped || dl->unstamped)
        least = 0;
    dl->poll_every = least / 8 < PK_DL_POLL_EVERY_NS ? least / 8 : PK_DL_POLL_EVERY_NS;
    dl->read_lag = least / 2 < PK_DL_READ_LAG_NS ? least / 2 : PK_DL_READ_LAG_NS;
}

/* Read what tap k holds (at most PK_DL_READ_BATCH): corrupt, reorder or queue each.
 * Returns how many frames it read. */
static int read_tap(pk_dl *dl, int k)
{
    dl_tap *t = &dl->taps[k];
    int i;
    for (i = 0; i < PK_DL_READ_BATCH; i++) {
        uint32_t slot = NIL;
        uint8_t *buf = dl->scratch;
        if (dl->nfree) {
            slot = dl->free_stack[dl->nfree - 1];
            buf = buf_of(dl, slot);
        }
        ssize_t n = read(t->fd, buf, dl->slot_bytes);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK && tap_gone(errno))
                fail(dl, "tap %d: read: %s", k, strerror(errno));
            return i;
        }
        uint64_t now = pk_now_ns();
        add(&t->c[PK_DL_rx], 1);
        add(&t->c[PK_DL_rx_bytes], (uint64_t)n);
        if (slot == NIL || (size_t)n > dl->slot_bytes || n == 0) {
            add(&t->c[PK_DL_dropped], 1);   /* pool full, or a frame larger than the MTU */
            continue;
        }
        dl->nfree--;
        if (dl->pool_n - dl->nfree > ld(&dl->stats[PK_DL_STAT_pool_used_max]))
            st(&dl->stats[PK_DL_STAT_pool_used_max], dl->pool_n - dl->nfree);
        uint8_t *pkt = buf;
        uint32_t len = (uint32_t)n, off = 0;
        uint64_t arrival = now;
        if (dl->stamped && len >= 18 && buf[12] == (PK_DL_STAMP_TPID >> 8) && buf[13] == (PK_DL_STAMP_TPID & 0xff)) {
            /* the diversion time, from the outer tag: the latest time that ends in these
             * 16 bits and is not after now (the middle of its 4.096 us unit) */
            uint64_t units = now >> PK_DL_STAMP_SHIFT;
            uint64_t stamp = ((uint64_t)buf[14] << 8) | buf[15];
            uint64_t age = (units - stamp) & 0xffff;
            arrival = ((units - age) << PK_DL_STAMP_SHIFT) + (1u << (PK_DL_STAMP_SHIFT - 1));
            if (arrival > now)
                arrival = now;
            memmove(buf + 4, buf, 12);               /* strip the tag: the MACs move up */
            pkt = buf + 4;
            len -= 4;
            off = 4;
            add(&t->c[PK_DL_stamped], 1);
        } else if (dl->stamped && !dl->unstamped) {
            /* not every frame carries the stamp (a BPF program of an older perfkit, or a
             * failed push): stop letting frames wait in the taps */
            dl->unstamped = 1;
            dl->read_lag = dl->poll_every = 0;
        }
        const dl_cfg *c = &t->cfg;
        if (len > 14 && hit(dl, c->corrupt)) {
            /* one flipped bit past the Ethernet header; the checksums are final by now
             * (the tap has no checksum offload), so the receiver sees a bad one */
            uint64_t r = rnd(dl);
            pkt[14 + (r >> 3) % (len - 14)] ^= (uint8_t)(1u << (r & 7));
            add(&t->c[PK_DL_corrupted], 1);
        }
        if (hit(dl, c->reorder)) {                 /* ahead of the delayed ones */
            add(&t->c[PK_DL_reordered], 1);
            int rc = emit(dl, k, pkt, len);
            release(dl, slot);
            if (rc)
                return i + 1;
            continue;
        }
        int64_t wait = (int64_t)c->delay_ns;
        if (c->jitter_ns) {                         /* uniform in [delay - jitter, delay + jitter] */
            wait += (int64_t)(rnd(dl) % (2 * c->jitter_ns + 1)) - (int64_t)c->jitter_ns;
            if (wait < 0)
                wait = 0;                           /* due now */
        }
        dl->meta[slot].len = len;
        dl->meta[slot].off = off;
        dl->meta[slot].tap = (uint32_t)k;
        enqueue(dl, k, slot, arrival + (uint64_t)wait);
    }
    return i;
}

/* ------------------------------------------------------------------ the thread */

/* SCHED_FIFO refused (no CAP_SYS_NICE, or a cpu cgroup with no real-time budget under
 * CONFIG_RT_GROUP_SCHED): the next best is the normal class at nice -20 (the most CPU
 * share against the threads that feed and drain the line) with the shortest slice
 * (sched_runtime, Linux 6.12+: EEVDF lets a thread with a short slice preempt at
 * wake-up; older kernels ignore it here). Neither helps against load in another cgroup:
 * in a cgroup with rt_runtime 0 and a busy loop outside it, this line was still sent
 * milliseconds late in some runs, against microseconds with SCHED_FIFO. */
struct pk_sched_attr {                    /* struct sched_attr, as sched_setattr(2) */
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static void normal_class_boost(pk_dl *dl)
{
    struct pk_sched_attr a = { .size = sizeof(a), .sched_policy = SCHED_OTHER, .sched_nice = -20,
                               .sched_runtime = NORMAL_CLASS_SLICE_NS };
    if (syscall(SYS_sched_setattr, 0, &a, 0) == 0) {
        st(&dl->stats[PK_DL_STAT_nice_boost], 20);
        st(&dl->stats[PK_DL_STAT_slice_ns], NORMAL_CLASS_SLICE_NS);
    } else if (setpriority(PRIO_PROCESS, (id_t)gettid(), -20) == 0) {
        st(&dl->stats[PK_DL_STAT_nice_boost], 20);
    }
}

static void *dl_main(void *arg)
{
    pk_dl *dl = arg;
    st(&dl->stats[PK_DL_STAT_tid], (uint64_t)gettid());
    prctl(PR_SET_TIMERSLACK, 1UL);           /* on-time wake-ups */
    if (dl->rt_priority > 0) {
        struct sched_param sp = { .sched_priority = dl->rt_priority };
        if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
            st(&dl->stats[PK_DL_STAT_rt_priority], (uint64_t)dl->rt_priority);
        else
            normal_class_boost(dl);
    }
    const int n = dl->ntaps;
    struct pollfd pfd[PK_DL_MAX_TAPS + 1];
    for (int k = 0; k < n; k++)
        pfd[k] = (struct pollfd){ .fd = dl->taps[k].fd, .events = POLLIN };
    pfd[n] = (struct pollfd){ .fd = dl->evfd, .events = POLLIN };
    uint64_t cpu0 = pk_thread_cpu_ns();
    /* how late a timed ppoll wakes: a running mean and mean deviation (ns) */
    int64_t late_mean = 40000, late_dev = 20000;
    uint64_t margin = 100000;
    uint64_t loops = 0, spin = 0;
    uint64_t window = pk_now_ns(), window_spin = 0;
    uint64_t polled = 0;                      /* when the taps were last polled */
    int full = 0;                             /* the last poll left a tap with more to read */
    st(&dl->stats[PK_DL_STAT_margin_ns], margin);

    while (!atomic_load_explicit(&dl->stop, memory_order_relaxed)) {
        loops++;
        uint64_t start = pk_now_ns();
        if (start - window >= PK_DL_SPIN_WINDOW_NS) {
            window = start;
            window_spin = 0;
        }
        int sent = send_due(dl, start);
        if (atomic_load_explicit(&dl->stop, memory_order_relaxed))
            break;
        uint64_t due = 0;
        int from;
        int have = earliest(dl, &due, &from);
        uint64_t now = pk_now_ns();
        /* wake this early and spin the rest, while the spin budget lasts */
        uint64_t early = window_spin < PK_DL_SPIN_BUDGET_NS ? margin : 0;
        uint64_t timeout = 0;
        int watch = 1;                            /* wake when a tap has a packet */
        if (sent < PK_DL_SEND_BATCH && !(have && due <= now + early)) {
            uint64_t until = have ? due - early : now + PK_DL_MAX_SLEEP_NS;
            if (have && dl->read_lag) {           /* arrivals wait in their taps till then */
                watch = 0;
                if (until > now + dl->read_lag)
                    until = now + dl->read_lag;
            }
            timeout = until - now < PK_DL_MAX_SLEEP_NS ? until - now : PK_DL_MAX_SLEEP_NS;
        }
        if (!timeout && !full && now - polled < dl->poll_every) {
            if (!sent) {                          /* awake, nothing due yet: spin */
                uint64_t idle = pk_now_ns() - start;
                spin += idle;
                window_spin += idle;
            }
            continue;
        }
        if (timeout)
            add(&dl->stats[PK_DL_STAT_sleeps], 1);
        struct timespec ts = { (time_t)(timeout / 1000000000ull), (long)(timeout % 1000000000ull) };
        int r = watch ? ppoll(pfd, (nfds_t)n + 1, &ts, NULL) : ppoll(&pfd[n], 1, &ts, NULL);
        uint64_t after = pk_now_ns();
        polled = after;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            fail(dl, "ppoll: %s", strerror(errno));
            break;
        }
        if (timeout && r == 0 && have) {          /* the timer woke us: learn how late */
            int64_t s = (int64_t)(after - (now + timeout));
            if (s < 0)
                s = 0;
            if (s > (int64_t)LATE_SAMPLE_MAX_NS)
                s = LATE_SAMPLE_MAX_NS;
            late_mean += (s - late_mean) / 16;
            late_dev += ((s > late_mean ? s - late_mean : late_mean - s) - late_dev) / 16;
            int64_t m = late_mean + 2 * late_dev + 5000;
            margin = m < (int64_t)MARGIN_MIN_NS ? MARGIN_MIN_NS
                   : m > (int64_t)MARGIN_MAX_NS ? MARGIN_MAX_NS : (uint64_t)m;
            st(&dl->stats[PK_DL_STAT_wake_late_ns], (uint64_t)late_mean);
            st(&dl->stats[PK_DL_STAT_margin_ns], margin);
        }
        if (pfd[n].revents) {
            uint64_t v;
            if (read(dl->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                (void)0;
        }
        refresh_config(dl);
        int got = 0;
        full = 0;
        for (int k = 0; k < n && (r > 0 || !watch); k++) {
            if (watch && (pfd[k].revents & POLLNVAL)) {
                fail(dl, "tap %d: closed", k);
                break;
            }
            if (!watch || pfd[k].revents) {
                int m = read_tap(dl, k);
                got += m;
                full |= m >= PK_DL_READ_BATCH;
            }
        }
        if (!timeout && !sent && !got) {          /* a round of waiting, awake */
            uint64_t idle = pk_now_ns() - start;
            spin += idle;
            window_spin += idle;
        }
        if ((loops & 255) == 0) {
            st(&dl->stats[PK_DL_STAT_loops], loops);
            st(&dl->stats[PK_DL_STAT_spin_ns], spin);
            st(&dl->stats[PK_DL_STAT_cpu_ns], pk_thread_cpu_ns() - cpu0);
        }
    }
    /* what is still held is dropped: the lab is going */
    st(&dl->stats[PK_DL_STAT_loops], loops);
    st(&dl->stats[PK_DL_STAT_spin_ns], spin);
    st(&dl->stats[PK_DL_STAT_cpu_ns], pk_thread_cpu_ns() - cpu0);
    atomic_store(&dl->running, 0);
    if (dl->notify_fd >= 0) {
        char c = 'x';
        if (write(dl->notify_fd, &c, 1) < 0)
            (void)0;
    }
    return NULL;
}

/* ------------------------------------------------------------------ the API */

pk_dl *pk_dl_create(const int *fds, int ntaps, uint32_t mtu, uint32_t pool, int stamped,
                    int rt_priority, int notify_fd, char *err, size_t errlen)
{
    if (ntaps < 1 || ntaps > PK_DL_MAX_TAPS) {
        set_err(err, errlen, "taps: between 1 and %d, not %d", PK_DL_MAX_TAPS, ntaps);
        return NULL;
    }
    if (mtu < 68 || mtu > 65535) {
        set_err(err, errlen, "mtu: %u is outside 68..65535", mtu);
        return NULL;
    }
    if (rt_priority < 0 || rt_priority > 99) {
        set_err(err, errlen, "rt_priority: %d is outside 0..99", rt_priority);
        return NULL;
    }
    for (int k = 0; k < ntaps; k++) {
        if (fds[k] < 0) {
            set_err(err, errlen, "tap %d: bad fd %d", k, fds[k]);
            return NULL;
        }
    }
    uint32_t slot_bytes = (mtu + FRAME_EXTRA + 63) & ~63u;
    if (pool == 0) {
        uint64_t by_bytes = PK_DL_POOL_BYTES / slot_bytes;
        pool = by_bytes < PK_DL_POOL_DEFAULT ? (uint32_t)by_bytes : PK_DL_POOL_DEFAULT;
    }
    if (pool < 16 || pool > PK_DL_MAX_POOL) {
        set_err(err, errlen, "pool: %u packets is outside 16..%u", pool, PK_DL_MAX_POOL);
        return NULL;
    }
    pk_dl *dl = calloc(1, sizeof(*dl) + (size_t)ntaps * sizeof(dl_tap));
    if (!dl) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    dl->ntaps = ntaps;
    dl->notify_fd = notify_fd;
    dl->stamped = stamped != 0;
    dl->rt_priority = rt_priority;
    dl->evfd = -1;
    dl->mtu = mtu;
    dl->slot_bytes = slot_bytes;
    dl->pool_n = pool;
    pthread_mutex_init(&dl->cfg_mu, NULL);
    /* buffers: reserved, touched only as used (the free list hands out the same ones again) */
    dl->bufs_len = (size_t)pool * slot_bytes;
    dl->bufs = mmap(NULL, dl->bufs_len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dl->bufs == MAP_FAILED) {
        dl->bufs = NULL;
        set_err(err, errlen, "mmap of %zu bytes of packet buffers: %s", dl->bufs_len, strerror(errno));
        goto fail;
    }
    dl->scratch = malloc(slot_bytes);
    dl->meta = calloc(pool, sizeof(dl_meta));
    dl->free_stack = malloc((size_t)pool * sizeof(uint32_t));
    dl->heap = malloc((size_t)pool * sizeof(dl_heap_ent));
    dl->cfg = calloc((size_t)ntaps, sizeof(dl_cfg));
    if (!dl->scratch || !dl->meta || !dl->free_stack || !dl->heap || !dl->cfg) {
        set_err(err, errlen, "out of memory for a pool of %u packets", pool);
        goto fail;
    }
    for (uint32_t i = 0; i < pool; i++)
        dl->free_stack[i] = pool - 1 - i;      /* slot 0 first */
    dl->nfree = pool;
    dl->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (dl->evfd < 0) {
        set_err(err, errlen, "eventfd: %s", strerror(errno));
        goto fail;
    }
    for (int k = 0; k < ntaps; k++) {
        dl->taps[k].fd = fds[k];
        dl->taps[k].head = dl->taps[k].tail = NIL;
    }
    if (getrandom(dl->rng, sizeof(dl->rng), 0) != (ssize_t)sizeof(dl->rng)) {
        uint64_t x = pk_now_ns() ^ ((uint64_t)getpid() << 32);
        for (int i = 0; i < 4; i++) {               /* splitmix64 */
            x += 0x9e3779b97f4a7c15ull;
            uint64_t z = x;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            dl->rng[i] = z ^ (z >> 31);
        }
    }
    if (!(dl->rng[0] | dl->rng[1] | dl->rng[2] | dl->rng[3]))
        dl->rng[0] = 1;
    dl->stats[PK_DL_STAT_pool_size] = pool;
    dl->stats[PK_DL_STAT_slot_bytes] = slot_bytes;
    return dl;
fail:
    pk_dl_destroy(dl);
    return NULL;
}

int pk_dl_ntaps(const pk_dl *dl)
{
    return dl->ntaps;
}

int pk_dl_start(pk_dl *dl, char *err, size_t errlen)
{
    if (dl->started) {
        set_err(err, errlen, "the delay line was started already");
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);    /* signals stay with the caller's threads */
    atomic_store(&dl->running, 1);
    int rc = pthread_create(&dl->thread, NULL, dl_main, dl);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_store(&dl->running, 0);
        set_err(err, errlen, "pthread_create: %s", strerror(rc));
        return -1;
    }
    dl->started = 1;
    return 0;
}

int pk_dl_set_config(pk_dl *dl, int tap, uint64_t delay_ns, uint64_t jitter_ns,
                     double reorder, double corrupt)
{
    if (tap < 0 || tap >= dl->ntaps || delay_ns > PK_DL_MAX_DELAY_NS || jitter_ns > PK_DL_MAX_DELAY_NS
        || !(reorder >= 0 && reorder <= 1) || !(corrupt >= 0 && corrupt <= 1))
        return -1;
    dl_cfg c = { delay_ns, jitter_ns, threshold(reorder), threshold(corrupt) };
    pthread_mutex_lock(&dl->cfg_mu);
    dl->cfg[tap] = c;
    if (!dl->started)
        dl->taps[tap].cfg = c;                  /* no thread yet: its copy too */
    atomic_fetch_add_explicit(&dl->cfg_gen, 1, memory_order_release);
    pthread_mutex_unlock(&dl->cfg_mu);
    uint64_t one = 1;
    if (dl->evfd >= 0 && write(dl->evfd, &one, sizeof(one)) < 0)
        (void)0;                                 /* wake it: the next packet sees the change */
    return 0;
}

void pk_dl_stop(pk_dl *dl)
{
    atomic_store(&dl->stop, 1);
    uint64_t one = 1;
    if (dl->evfd >= 0 && write(dl->evfd, &one, sizeof(one)) < 0)
        (void)0;
}

int pk_dl_running(const pk_dl *dl)
{
    return atomic_load(&((pk_dl *)dl)->running);
}

void pk_dl_join(pk_dl *dl)
{
    if (dl->started && !dl->joined) {
        pthread_join(dl->thread, NULL);
        dl->joined = 1;
    }
}

void pk_dl_counters(const pk_dl *dl, int tap, uint64_t *out)
{
    for (int i = 0; i < PK_DL_NCOUNTERS; i++)
        out[i] = (tap >= 0 && tap < dl->ntaps) ? ld(&dl->taps[tap].c[i]) : 0;
}

void pk_dl_stats(const pk_dl *dl, uint64_t *out)
{
    for (int i = 0; i < PK_DL_NSTATS; i++)
        out[i] = ld(&dl->stats[i]);
    uint64_t used = 0;
    for (int k = 0; k < dl->ntaps; k++)
        used += ld(&dl->taps[k].c[PK_DL_queued]);
    out[PK_DL_STAT_pool_used] = used;
}

const char *pk_dl_error(const pk_dl *dl)
{
    return atomic_load(&((pk_dl *)dl)->failed) ? dl->err : NULL;
}

void pk_dl_destroy(pk_dl *dl)
{
    if (!dl)
        return;
    if (dl->started) {
        pk_dl_stop(dl);
        pk_dl_join(dl);
    }
    if (dl->evfd >= 0)
        close(dl->evfd);
    if (dl->bufs)
        munmap(dl->bufs, dl->bufs_len);
    free(dl->scratch);
    free(dl->meta);
    free(dl->free_stack);
    free(dl->heap);
    free(dl->cfg);
    pthread_mutex_destroy(&dl->cfg_mu);
    free(dl);
}
