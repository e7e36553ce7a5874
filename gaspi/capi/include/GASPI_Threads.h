/*
 * GASPI_Threads.h -- the thread-pool helpers of the reference implementation (GPI-2) for
 * multi-threaded GASPI programs. Deprecated there, still used by real codes; the same
 * semantics here (see docs/capi.md), except that threads waiting in a barrier sleep instead
 * of spinning.
 */
#ifndef TARANTELLA_GASPI_THREADS_H
#define TARANTELLA_GASPI_THREADS_H

#include "GASPI.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(TNT_GASPI_THREADS_NO_DEPRECATION)
#define TNT_GASPI_DEPRECATED __attribute__((deprecated))
#else
#define TNT_GASPI_DEPRECATED
#endif

/* This thread's id in the pool (gaspi_threads_register gave it; -1 if none). */
gaspi_return_t gaspi_threads_get_tid(gaspi_int *const tid) TNT_GASPI_DEPRECATED;
/* The size of the pool. */
gaspi_return_t gaspi_threads_get_total(gaspi_int *const num) TNT_GASPI_DEPRECATED;
/* The cores this process may run on. */
gaspi_return_t gaspi_threads_get_num_cores(gaspi_int *const cores) TNT_GASPI_DEPRECATED;
/* A pool of one thread per core; their number in `num`. Starts no thread. */
gaspi_return_t gaspi_threads_init(gaspi_int *const num) TNT_GASPI_DEPRECATED;
/* A pool of `use_nr_of_threads` threads (at most 1024). Starts no thread. */
gaspi_return_t gaspi_threads_init_user(const gaspi_uint use_nr_of_threads) TNT_GASPI_DEPRECATED;
/* Ends the pool; threads waiting in a barrier of it return. */
gaspi_return_t gaspi_threads_term(void) TNT_GASPI_DEPRECATED;
/* Starts one (detached) thread that runs function(arg). */
gaspi_return_t gaspi_threads_run(void *(*function)(void *), void *arg) TNT_GASPI_DEPRECATED;
/* Registers the calling thread with the pool: the next id (the first caller gets 0). */
gaspi_return_t gaspi_threads_register(gaspi_int *tid);
/* A barrier of the pool's threads. */
void gaspi_threads_sync(void);
/* A barrier of the pool's threads with one gaspi_barrier(g, timeout_ms) of the ranks in
 * it; every thread returns its result. */
gaspi_return_t gaspi_threads_sync_all(const gaspi_group_t g, const gaspi_timeout_t timeout_ms)
    TNT_GASPI_DEPRECATED;

#ifdef __cplusplus
}
#endif

#endif /* TARANTELLA_GASPI_THREADS_H */
