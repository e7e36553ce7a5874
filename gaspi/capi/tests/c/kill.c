/* gaspi_proc_kill: rank 0 kills rank 1, which is waiting for a notification that never
 * comes; the harness expects rank 1 to die of SIGKILL and rank 0 to finish. */
#include "check.h"

int main(void) {
  gaspi_rank_t me;
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_segment_create(0, 64, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  if (me == 0) {
    EXPECT(gaspi_proc_kill(0, TMO), GASPI_ERR_INV_RANK);
    CHECK(gaspi_proc_kill(1, TMO));
    gaspi_printf("kill sent\n");
  } else {
    gaspi_notification_id_t id;
    gaspi_return_t rc = gaspi_notify_waitsome(0, 0, 1, &id, TMO);
    fprintf(stderr, "rank 1 was not killed (waitsome returned %d)\n", (int)rc);
    return 3;
  }
  CHECK(gaspi_proc_term(TMO));
  return 0;
}
