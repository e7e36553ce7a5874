/* gaspi_group_commit polled as GPI-2 codes do: `while (gaspi_group_commit(g, GASPI_TEST) ==
 * GASPI_TIMEOUT) {}`. GASPI_TEST asks a call to make progress without blocking, so every
 * call must take the commit further and the loop must end; the same with a timeout shorter
 * than a round trip (1 ms). Each rank polls until success (bounded: a commit that starts
 * over at every call never ends), then uses the group: barrier and allreduce. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

static gaspi_rank_t me, n;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void commit_polling(gaspi_group_t g, gaspi_timeout_t tmo) {
  double start = now();
  long calls = 0;
  gaspi_return_t rc;
  while ((rc = gaspi_group_commit(g, tmo)) == GASPI_TIMEOUT) {
    calls++;
    if (now() - start > 20.0) {
      fprintf(stderr, "commit polled with timeout %lu did not complete (%ld calls)\n",
              (unsigned long)tmo, calls);
      exit(1);
    }
  }
  CHECK(rc);
}

int main(void) {
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  const gaspi_timeout_t polls[] = {GASPI_TEST, 1};
  for (int i = 0; i < 2; i++) {
    gaspi_group_t g;
    CHECK(gaspi_group_create(&g));
    for (gaspi_rank_t r = 0; r < n; r++) CHECK(gaspi_group_add(g, r));
    commit_polling(g, polls[i]);
    CHECK(gaspi_barrier(g, TMO));
    long mine = (long)me, sum = -1;
    CHECK(gaspi_allreduce(&mine, &sum, 1, GASPI_OP_SUM, GASPI_TYPE_LONG, g, TMO));
    ASSERT(sum == (long)n * (n - 1) / 2);
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
    CHECK(gaspi_group_delete(g));
  }
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: commit_poll ok on %u ranks\n", me, n);
  return 0;
}
