/* A profiling tool the PMPI way: it defines its own gaspi_proc_init, gaspi_barrier and
 * gaspi_write_notify, counts the calls and forwards them to pgaspi_*; the program below
 * calls gaspi_* as usual. Linked against libgaspi.so and libgaspi.a by the test. */
#include "check.h"
#include <PGASPI.h>

static int inits, barriers, writes;

gaspi_return_t gaspi_proc_init(const gaspi_timeout_t timeout_ms) {
  inits++;
  return pgaspi_proc_init(timeout_ms);
}

gaspi_return_t gaspi_barrier(const gaspi_group_t group, const gaspi_timeout_t timeout_ms) {
  barriers++;
  return pgaspi_barrier(group, timeout_ms);
}

gaspi_return_t gaspi_write_notify(const gaspi_segment_id_t segment_id_local,
                                  const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                                  const gaspi_segment_id_t segment_id_remote,
                                  const gaspi_offset_t offset_remote, const gaspi_size_t size,
                                  const gaspi_notification_id_t notification_id,
                                  const gaspi_notification_t notification_value,
                                  const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms) {
  writes++;
  return pgaspi_write_notify(segment_id_local, offset_local, rank, segment_id_remote,
                             offset_remote, size, notification_id, notification_value, queue,
                             timeout_ms);
}

int main(void) {
  gaspi_rank_t me, n;
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  CHECK(gaspi_segment_create(0, 4096, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n);
  for (int i = 0; i < 3; i++) {
    CHECK(gaspi_write_notify(0, 0, right, 0, 64, 8, 0, 1, 0, TMO));
    gaspi_notification_id_t got;
    gaspi_notification_t val;
    CHECK(gaspi_notify_waitsome(0, 0, 1, &got, TMO));
    CHECK(pgaspi_notify_reset(0, got, &val));
    CHECK(gaspi_wait(0, TMO));
    CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  }
  CHECK(gaspi_proc_term(TMO));
  /* segment_create ends with a barrier of its own (inside the library: not counted). */
  ASSERT(inits == 1 && barriers == 3 && writes == 3);
  printf("[Rank %4u]: pgaspi_tool ok on %u ranks\n", me, n);
  return 0;
}
