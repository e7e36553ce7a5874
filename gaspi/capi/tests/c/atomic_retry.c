/* Atomics retried after GASPI_TIMEOUT, the way GPI-2 programs poll: every rank adds 1 to
 * rank 0's counter K times and takes a spin lock on rank 0 M times, each call retried with
 * GASPI_TEST until it succeeds. A call that timed out after its operation went out is
 * resumed by the retry, so each logical call is applied once (GPI-2 applies it once too:
 * its GASPI_TIMEOUT means the operation never started). Then connect to a peer that has
 * already left (GPI-2 returns success for an endpoint it connected). */
#include "check.h"
#include <sched.h>

#define K 50
#define M 10

static gaspi_atomic_value_t fetch_add(gaspi_offset_t off, gaspi_rank_t r) {
  gaspi_atomic_value_t old;
  gaspi_return_t rc;
  while ((rc = gaspi_atomic_fetch_add(0, off, r, 1, &old, GASPI_TEST)) == GASPI_TIMEOUT)
    sched_yield();
  CHECK(rc);
  return old;
}

static gaspi_atomic_value_t swap(gaspi_rank_t r, gaspi_atomic_value_t from, gaspi_atomic_value_t to) {
  gaspi_atomic_value_t old;
  gaspi_return_t rc;
  while ((rc = gaspi_atomic_compare_swap(0, 8, r, from, to, &old, GASPI_TEST)) == GASPI_TIMEOUT)
    sched_yield();
  CHECK(rc);
  return old;
}

int main(void) {
  gaspi_rank_t me, n;
  gaspi_pointer_t p;
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  CHECK(gaspi_segment_create(0, 64, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  CHECK(gaspi_segment_ptr(0, &p));
  volatile gaspi_atomic_value_t *word = p;
  for (int i = 0; i < K; i++)
    fetch_add(0, 0);
  gaspi_atomic_value_t tag = (gaspi_atomic_value_t)me + 1;
  for (int i = 0; i < M; i++) {
    gaspi_atomic_value_t held;
    while ((held = swap(0, 0, tag)) != 0) {
      ASSERT(held != tag); /* our own earlier swap, applied again */
      sched_yield();
    }
    fetch_add(16, 0);
    ASSERT(swap(0, tag, 0) == tag);
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  if (me == 0) {
    ASSERT(word[0] == (gaspi_atomic_value_t)n * K);
    ASSERT(word[1] == 0);
    ASSERT(word[2] == (gaspi_atomic_value_t)n * M);
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  printf("[Rank %4u]: atomic_retry ok on %u ranks\n", me, n);
  fflush(stdout);
  if (me == 0 && n > 1) {
    /* Rank 1 has left once a ping to it fails. */
    while (gaspi_proc_ping(1, TMO) == GASPI_SUCCESS)
      sched_yield();
    CHECK(gaspi_connect(1, TMO));
    CHECK(gaspi_disconnect(1, TMO));
  }
  CHECK(gaspi_proc_term(TMO));
  return 0;
}
