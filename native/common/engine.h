/* The engine lifecycle, written once: N workers, each a thread pinned to its CPU (when it has
 * one) that alone writes its counter block and histogram; a stop flag they poll; how many still
 * run; the first error. An engine (sock, DPDK UDP, DPDK TCP) embeds a pk_engine, points each
 * worker at its counters, and supplies the worker function and its thread hooks. */
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "perfkit/counters.h"
#include "perfkit/hist.h"

typedef struct pk_engine pk_engine;

typedef struct pk_engine_ops {
    /* in worker i's thread, before run: 0, or nonzero after writing why into the worker's error */
    int (*thread_init)(pk_engine *e, int i);
    /* worker i's work (and any hosted worker's), until it is done or pk_engine_stopping */
    void (*run)(pk_engine *e, int i);
    /* in worker i's thread after run (ran = 1) or a failed thread_init (ran = 0) */
    void (*thread_exit)(pk_engine *e, int i, int ran);
    /* in the caller's thread: before worker i's thread is made (begin = 1), and again
     * (begin = 0) if it could not be; NULL when the engine has nothing to do there */
    void (*poll)(pk_engine *e, int i, int begin);
} pk_engine_ops;

typedef struct pk_engine_worker {
    pk_counter_block *c;         /* its own counters and histogram: only its thread writes them */
    pk_hist *hist;
    char *err;                   /* its error, "" when none: written before it stops running */
    pk_engine *engine;
    pthread_t thread;
    int index;
    int cpu;                     /* -1: any */
    int hosted;                  /* run by another worker's thread: none of its own */
    int started;                 /* a thread to join */
    int running;                 /* atomic: 1 while it runs */
} pk_engine_worker;

struct pk_engine {
    const pk_engine_ops *ops;
    void *owner;                 /* the engine that embeds this core */
    const char *name;            /* thread names, a format taking the worker index (15 chars) */
    int n;
    pk_engine_worker *w;
    int stop;                    /* atomic: asked to stop */
};

/* Workers 0..n-1 with no counters yet (pk_engine_worker_init sets them); -1: out of memory. */
int pk_engine_init(pk_engine *e, const pk_engine_ops *ops, void *owner, const char *name, int n);
void pk_engine_worker_init(pk_engine *e, int i, pk_counter_block *c, pk_hist *hist, char *err, int cpu);
/* Stop, join, free the workers (a zeroed or already finished core is fine). */
void pk_engine_fini(pk_engine *e);

/* Start a thread per worker that is not hosted. On failure the engine is stopping and its
 * threads that did start still need pk_engine_join. */
int pk_engine_start(pk_engine *e, char *err, size_t errlen);
void pk_engine_stop(pk_engine *e);
static inline int pk_engine_stopping(const pk_engine *e)
{
    return __atomic_load_n(&e->stop, __ATOMIC_RELAXED);
}
int pk_engine_running(const pk_engine *e);          /* workers still running */
int pk_engine_worker_running(const pk_engine *e, int i);
void pk_engine_done(pk_engine *e, int i);           /* worker i (hosted) has stopped */
int pk_engine_started(const pk_engine *e);          /* threads not joined yet */
int pk_engine_join(pk_engine *e);                   /* how many threads it joined */
void pk_engine_snapshot(const pk_engine *e, int i, uint64_t *counters, uint64_t *hist);
const char *pk_engine_error(const pk_engine *e);    /* the first worker's error that has one */
