/* GPI-2's benchmarks time with the CPU's time-stamp counter (rdtsc) and divide by
 * gaspi_cpu_frequency, and programs divide gaspi_time_ticks by it: over a 100 ms busy wait
 * both must measure what gaspi_time_get does, within 5%, before init and after it. */
#include <stdint.h>

#include "check.h"

static uint64_t counter(void) {
#if defined(__x86_64__)
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return ((uint64_t)hi << 32) | lo;
#else
  gaspi_cycles_t t;
  CHECK(gaspi_time_ticks(&t));
  return t;
#endif
}

static void agree(double ms, double by_clock, const char *what) {
  const double off = ms / by_clock - 1.0;
  if (off < -0.05 || off > 0.05) {
    fprintf(stderr, "%s: %.3f ms, gaspi_time_get: %.3f ms\n", what, ms, by_clock);
    exit(1);
  }
}

/* gaspi_time_get between two reads of the counter and of gaspi_time_ticks, again while
 * those are far apart (the thread was preempted between them): the counters' midpoints. */
static void paired(gaspi_time_t *ms, gaspi_cycles_t *ticks, uint64_t *cycles, double mhz) {
  const double tight = mhz * 20.0; /* 20 us of ticks */
  for (int i = 0; i < 100; i++) {
    gaspi_cycles_t t0, t1;
    const uint64_t c0 = counter();
    CHECK(gaspi_time_ticks(&t0));
    CHECK(gaspi_time_get(ms));
    CHECK(gaspi_time_ticks(&t1));
    const uint64_t c1 = counter();
    *ticks = t0 + (t1 - t0) / 2;
    *cycles = c0 + (c1 - c0) / 2;
    if ((double)(t1 - t0) < tight && (double)(c1 - c0) < tight) return;
  }
}

static void measure(void) {
  gaspi_float mhz;
  CHECK(gaspi_cpu_frequency(&mhz));
  ASSERT(mhz > 0);
  gaspi_time_t ms0, ms1;
  gaspi_cycles_t t0, t1;
  uint64_t c0, c1;
  paired(&ms0, &t0, &c0, mhz);
  do {
    CHECK(gaspi_time_get(&ms1));
  } while (ms1 - ms0 < 100.0f);
  paired(&ms1, &t1, &c1, mhz);
  const double per_ms = (double)mhz * 1000.0;
  agree((double)(t1 - t0) / per_ms, ms1 - ms0, "gaspi_time_ticks / gaspi_cpu_frequency");
  agree((double)(c1 - c0) / per_ms, ms1 - ms0, "rdtsc / gaspi_cpu_frequency");
}

int main(void) {
  measure();
  CHECK(gaspi_proc_init(TMO));
  gaspi_rank_t me, n;
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  measure();
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: clock ok on %u ranks\n", me, n);
  return 0;
}
