/* Core-to-core round trip of one cache line between two CPUs (bench/dperf_memif.py --c2c).
 *
 *     cc -O2 -pthread -o c2c bench/c2c.c && ./c2c 0 1 [round trips]
 *
 * Two threads pinned to the two CPUs take turns writing one 64-byte line: each round trip moves
 * it there and back. Prints the median of 15 batches in ns per round trip. On a VM the host
 * decides where the vCPUs run: two vCPUs sharing a last-level cache bounce the line through it,
 * two on different dies (an EPYC's CCDs) through the interconnect, several times slower; the
 * memif benches move every frame's lines between the two CPUs the same way. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) _Atomic long line;
static long rounds;
static int cpus[2];

static int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *pong(void *arg)
{
    (void)arg;
    if (pin(cpus[1]) != 0)
        return (void *)1;
    for (long i = 0; i < rounds * 16; i++) {   /* 15 batches and a warm-up */
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&line, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: c2c CPU_A CPU_B [round trips per batch]\n");
        return 2;
    }
    cpus[0] = atoi(argv[1]);
    cpus[1] = atoi(argv[2]);
    rounds = argc > 3 ? atol(argv[3]) : 20000;
    if (rounds < 1 || rounds > 100000000) {
        fprintf(stderr, "c2c: round trips per batch: 1..100000000\n");
        return 2;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, pong, NULL) != 0 || pin(cpus[0]) != 0) {
        fprintf(stderr, "c2c: cannot run a thread on CPU %d and %d\n", cpus[0], cpus[1]);
        return 1;
    }
    double ns[16];
    long v = 0;
    for (int b = 0; b < 16; b++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < rounds; i++, v += 2) {
            atomic_store_explicit(&line, v + 1, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != v + 2)
                ;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ns[b] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / rounds;
    }
    void *rc;
    pthread_join(t, &rc);
    if (rc) {
        fprintf(stderr, "c2c: cannot run a thread on CPU %d\n", cpus[1]);
        return 1;
    }
    qsort(ns + 1, 15, sizeof(double), cmp);   /* batch 0: the warm-up */
    printf("%.1f\n", ns[8]);
    return 0;
}
