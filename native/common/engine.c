/* The engine lifecycle (engine.h): threads, stop flag, running count, snapshots, errors. */
#define _GNU_SOURCE
#include "engine.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pk_engine_init(pk_engine *e, const pk_engine_ops *ops, void *owner, const char *name, int n)
{
    memset(e, 0, sizeof(*e));
    e->ops = ops;
    e->owner = owner;
    e->name = name;
    e->w = calloc((size_t)(n > 0 ? n : 1), sizeof(*e->w));
    if (!e->w)
        return -1;
    e->n = n;
    for (int i = 0; i < n; i++) {
        e->w[i].engine = e;
        e->w[i].index = i;
        e->w[i].cpu = -1;
    }
    return 0;
}

void pk_engine_worker_init(pk_engine *e, int i, pk_counter_block *c, pk_hist *hist, char *err, int cpu)
{
    pk_engine_worker *w = &e->w[i];
    w->c = c;
    w->hist = hist;
    w->err = err;
    w->cpu = cpu;
}

void pk_engine_fini(pk_engine *e)
{
    if (!e->w)
        return;
    pk_engine_stop(e);
    pk_engine_join(e);
    free(e->w);
    e->w = NULL;
    e->n = 0;
}

static void *thread_main(void *arg)
{
    pk_engine_worker *w = arg;
    pk_engine *e = w->engine;
    if (w->cpu >= 0) {   /* a CPU this process may not use leaves it unpinned */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }
    char name[16];   /* top -H and /proc/PID/task/TID/comm show which worker is which */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(name, sizeof(name), e->name, w->index);
#pragma GCC diagnostic pop
    pthread_setname_np(pthread_self(), name);
    int ran = !e->ops->thread_init || e->ops->thread_init(e, w->index) == 0;
    if (ran)
        e->ops->run(e, w->index);
    if (e->ops->thread_exit)
        e->ops->thread_exit(e, w->index, ran);
    __atomic_store_n(&w->running, 0, __ATOMIC_RELEASE);
    return NULL;
}

int pk_engine_start(pk_engine *e, char *err, size_t errlen)
{
    for (int i = 0; i < e->n; i++)   /* run by another worker's thread: running until it ends */
        if (e->w[i].hosted)
            e->w[i].running = 1;
    for (int i = 0; i < e->n; i++) {
        pk_engine_worker *w = &e->w[i];
        if (w->hosted)
            continue;
        w->running = 1;
        if (e->ops->poll)
            e->ops->poll(e, i, 1);
        int rc = pthread_create(&w->thread, NULL, thread_main, w);
        if (rc != 0) {
            if (e->ops->poll)
                e->ops->poll(e, i, 0);
            w->running = 0;
            for (int j = 0; j < e->n; j++)   /* hosted by threads that never started, or stop soon */
                if (e->w[j].hosted)
                    __atomic_store_n(&e->w[j].running, 0, __ATOMIC_RELEASE);
            snprintf(err, errlen, "worker %d: start a thread: %s", i, strerror(rc));
            pk_engine_stop(e);
            return -1;
        }
        w->started = 1;
    }
    return 0;
}

void pk_engine_stop(pk_engine *e)
{
    __atomic_store_n(&e->stop, 1, __ATOMIC_RELAXED);
}

int pk_engine_running(const pk_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += __atomic_load_n(&e->w[i].running, __ATOMIC_ACQUIRE);
    return n;
}

int pk_engine_worker_running(const pk_engine *e, int i)
{
    return __atomic_load_n(&e->w[i].running, __ATOMIC_ACQUIRE);
}

void pk_engine_done(pk_engine *e, int i)
{
    __atomic_store_n(&e->w[i].running, 0, __ATOMIC_RELEASE);
}

int pk_engine_started(const pk_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n; i++)
        n += e->w[i].started;
    return n;
}

int pk_engine_join(pk_engine *e)
{
    int joined = 0;
    for (int i = 0; i < e->n; i++) {
        if (e->w[i].started) {
            pthread_join(e->w[i].thread, NULL);
            e->w[i].started = 0;
            joined++;
        }
    }
    return joined;
}

void pk_engine_snapshot(const pk_engine *e, int i, uint64_t *counters, uint64_t *hist)
{
    if (i < 0 || i >= e->n || !e->w[i].c)
        return;
    const pk_engine_worker *w = &e->w[i];
    for (int k = 0; k < PK_NCOUNTERS; k++)
        counters[k] = pk_read(w->c, (enum pk_counter_id)k);
    if (hist && w->hist)
        for (uint32_t k = 0; k < PK_HIST_BUCKETS; k++)
            hist[k] = __atomic_load_n(&w->hist->b[k], __ATOMIC_RELAXED);
}

const char *pk_engine_error(const pk_engine *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->w[i].err && e->w[i].err[0])
            return e->w[i].err;
    return NULL;
}
