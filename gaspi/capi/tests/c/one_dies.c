/* GPI-2's fault-tolerance pattern (its tests/error_vec/one_dies.c): the last rank dies
 * without a goodbye; the survivors go on posting to every rank they have not found dead.
 * Posting to the dead rank succeeds, as in GPI-2; the failure shows at gaspi_wait, the state
 * vector names the rank, the next wait finds the queue clean, and the survivors carry on in
 * a group of their own. */
#include <stdio.h>
#include <unistd.h>

#include "check.h"

#define MAX_RANKS 64

int main(void) {
  gaspi_rank_t me, n;
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  ASSERT(n >= 3 && n <= MAX_RANKS);
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  gaspi_state_t vec[MAX_RANKS];
  CHECK(gaspi_state_vec_get(vec));
  for (gaspi_rank_t i = 0; i < n; i++) ASSERT(vec[i] == GASPI_STATE_HEALTHY);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  const gaspi_rank_t last = (gaspi_rank_t)(n - 1);
  if (me == last) _exit(0); /* dies: no term, no goodbye */

  gaspi_group_t survivors;
  CHECK(gaspi_group_create(&survivors));
  for (gaspi_rank_t i = 0; i < last; i++) CHECK(gaspi_group_add(survivors, i));
  CHECK(gaspi_group_commit(survivors, TMO));
  /* Instead of GPI-2's sleep(2): a wait for a notification nobody sends ends with
     GASPI_ERROR once a rank's failure is known here (this implementation's report). */
  gaspi_notification_id_t id;
  EXPECT(gaspi_notify_waitsome(0, 100, 1, &id, TMO), GASPI_ERROR);

  int avoid[MAX_RANKS] = {0}, failures = 0;
  for (int round = 0; round < 10; round++) {
    for (gaspi_rank_t i = 0; i < n; i++) {
      if (!avoid[i]) CHECK(gaspi_write(0, 0, i, 0, 8 * me, sizeof(int), 0, TMO));
    }
    gaspi_return_t waited = gaspi_wait(0, TMO);
    if (waited != GASPI_SUCCESS) {
      ASSERT(waited == GASPI_ERROR);
      CHECK(gaspi_state_vec_get(vec));
      for (gaspi_rank_t i = 0; i < n; i++) {
        if (vec[i] != GASPI_STATE_HEALTHY) {
          ASSERT(i == last);
          avoid[i] = 1;
          failures++;
        }
      }
      /* Reported once: the queue is clean again. */
      CHECK(gaspi_wait(0, TMO));
    }
  }
  ASSERT(failures == 1);
  CHECK(gaspi_barrier(survivors, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: one_dies ok on %u ranks\n", me, n);
  return 0;
}
