/* Clocks for workers: CLOCK_MONOTONIC (vDSO, no syscall) for timestamps and
 * pacing, the thread CPU clock for the engine's own CPU use. */
#ifndef PERFKIT_CLOCK_H
#define PERFKIT_CLOCK_H

#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t pk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t pk_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef RUSAGE_THREAD
/* Of this thread's CPU time, the part in user mode (a syscall: call it seldom). */
static inline uint64_t pk_thread_user_ns(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 0;
    return (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull;
}
#endif

/* Sleep until an absolute CLOCK_MONOTONIC time. */
static inline void pk_sleep_until_ns(uint64_t t)
{
    struct timespec ts = { (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
}

#endif
