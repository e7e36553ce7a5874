/* C twin of benches/src/bin/gaspi-p2p.rs (the rank part), for comparing the C interface
 * with the Rust API in the same session: same sizes, iteration counts, batches and
 * medians. Rank 0 prints "pingpong <size> <half-RTT us>" and "bw <size> <GB/s>".
 * Run with 2 ranks: gaspi/capi/bench/run.sh [--quick]. */
#define _POSIX_C_SOURCE 199309L
#include <GASPI.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T ((gaspi_timeout_t)60000)
#define CHECK(call)                                                                    \
  do {                                                                                 \
    gaspi_return_t rc_ = (call);                                                       \
    if (rc_ != GASPI_SUCCESS) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)rc_);  \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

static int quick;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static int iters(unsigned long size) {
  int base = size <= 4096 ? 20000 : 1;
  return quick ? base / 10 : base;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) quick |= strcmp(argv[i], "--quick") == 0;
  quick |= getenv("TNT_P2P_QUICK") != NULL;
  const unsigned long pp[2] = {8, 4096}, bw[2] = {1ul << 20, 64ul << 20};
  const unsigned long max = 64ul << 20;
  gaspi_rank_t me;
  CHECK(gaspi_proc_init(T));
  CHECK(gaspi_proc_rank(&me));
  gaspi_rank_t peer = (gaspi_rank_t)(1 - me);
  CHECK(gaspi_segment_create(0, 2 * max, GASPI_GROUP_ALL, T, GASPI_MEM_INITIALIZED));
  const gaspi_notification_id_t ping = 0, pong = 1, data = 2, ack = 3;
  gaspi_notification_id_t id;
  gaspi_notification_t val;
  for (int s = 0; s < 2; s++) {
    int n = iters(pp[s]), batches = 10, per = n / batches;
    double halves[10];
    for (int b = 0; b <= batches; b++) {
      CHECK(gaspi_barrier(GASPI_GROUP_ALL, T));
      double t = now();
      for (int i = 0; i < per; i++) {
        gaspi_notification_t v = (gaspi_notification_t)(i + 1);
        if (me == 0) {
          CHECK(gaspi_write_notify(0, 0, peer, 0, max, pp[s], ping, v, 0, T));
          CHECK(gaspi_notify_waitsome(0, pong, 1, &id, T));
          CHECK(gaspi_notify_reset(0, pong, &val));
        } else {
          CHECK(gaspi_notify_waitsome(0, ping, 1, &id, T));
          CHECK(gaspi_notify_reset(0, ping, &val));
          CHECK(gaspi_write_notify(0, 0, peer, 0, max, pp[s], pong, v, 0, T));
        }
        CHECK(gaspi_wait(0, T));
      }
      if (b > 0) halves[b - 1] = (now() - t) * 1e6 / (2.0 * per);
    }
    if (me == 0) printf("pingpong %lu %.3f\n", pp[s], median(halves, batches));
  }
  for (int s = 0; s < 2; s++) {
    unsigned long total = quick ? 64ul << 20 : 512ul << 20;
    unsigned long window = total / bw[s] < 4 ? 4 : total / bw[s];
    double rates[5];
    for (int rep = 0; rep <= 5; rep++) {
      CHECK(gaspi_barrier(GASPI_GROUP_ALL, T));
      double t = now();
      if (me == 0) {
        for (unsigned long k = 0; k < window; k++) {
          CHECK(gaspi_write_notify(0, 0, peer, 0, 0, bw[s], data, (gaspi_notification_t)(k + 1), 0, T));
          if ((k + 1) % 256 == 0) CHECK(gaspi_wait(0, T));
        }
        CHECK(gaspi_wait(0, T));
        CHECK(gaspi_notify_waitsome(0, ack, 1, &id, T));
        CHECK(gaspi_notify_reset(0, ack, &val));
        if (rep > 0) rates[rep - 1] = (double)(window * bw[s]) / (now() - t) / 1e9;
      } else {
        for (;;) {
          CHECK(gaspi_notify_waitsome(0, data, 1, &id, T));
          CHECK(gaspi_notify_reset(0, data, &val));
          if (val == window) break;
        }
        CHECK(gaspi_notify(0, peer, ack, 1, 0, T));
        CHECK(gaspi_wait(0, T));
      }
    }
    if (me == 0) printf("bw %lu %.3f\n", bw[s], median(rates, 5));
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, T));
  CHECK(gaspi_proc_term(T));
  return 0;
}
