/* Segment ids are reusable: created, deleted and created again with any size, in any order,
 * any number of times, also as user memory (gaspi_segment_use). Every blocking call is
 * bounded, so a hang fails the test. After each create the ring write proves that every
 * rank sees the new segment, not a stale registration of the deleted one. */
#include "check.h"
#include <string.h>

static gaspi_rank_t me, n;

/* Writes our rank into the right neighbour's segment at `size - 8` and checks the left one's. */
static void ring_check(gaspi_segment_id_t seg, gaspi_size_t size) {
  gaspi_pointer_t p;
  gaspi_notification_id_t got;
  gaspi_notification_t val;
  gaspi_size_t remote;
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n), left = (gaspi_rank_t)((me + n - 1) % n);
  CHECK(gaspi_segment_size(seg, right, &remote));
  ASSERT(remote == size);
  CHECK(gaspi_segment_ptr(seg, &p));
  unsigned long *words = p;
  words[0] = 1000 + me;
  CHECK(gaspi_write_notify(seg, 0, right, seg, size - 8, 8, 7, 1, 0, TMO));
  CHECK(gaspi_notify_waitsome(seg, 7, 1, &got, TMO));
  CHECK(gaspi_notify_reset(seg, got, &val));
  ASSERT(val == 1);
  ASSERT(words[(size - 8) / 8] == 1000ul + left);
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
}

static void create(gaspi_segment_id_t seg, gaspi_size_t size) {
  CHECK(gaspi_segment_create(seg, size, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  ring_check(seg, size);
}

static void delete(gaspi_segment_id_t seg) {
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_segment_delete(seg));
}

int main(void) {
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));

  /* create 10, delete 10, create 2 */
  create(10, 4096);
  delete(10);
  create(2, 4096);
  delete(2);

  /* the same id again with another size, several times */
  for (int round = 0; round < 4; round++) {
    create(0, 1024u << round);
    delete(0);
  }

  /* every id the runtime offers, all deleted, then a few again in another order */
  gaspi_number_t max;
  CHECK(gaspi_segment_max(&max));
  gaspi_number_t made = 0;
  for (;;) {
    gaspi_segment_id_t avail;
    if (gaspi_segment_avail_local(&avail) != GASPI_SUCCESS) break;
    CHECK(gaspi_segment_create(avail, 64, GASPI_GROUP_ALL, TMO, GASPI_MEM_UNINITIALIZED));
    made++;
  }
  ASSERT(made == max);
  gaspi_number_t num;
  CHECK(gaspi_segment_num(&num));
  ASSERT(num == max);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  for (gaspi_number_t s = 0; s < max; s++) CHECK(gaspi_segment_delete((gaspi_segment_id_t)s));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  create(0, 2048);
  create(2, 8192);
  create(1, 4096);
  delete(0);
  delete(1);
  delete(2);

  /* user memory under an id that held runtime memory, then runtime memory again */
  static unsigned long user[1024];
  CHECK(gaspi_segment_use(3, user, sizeof user, GASPI_GROUP_ALL, TMO, 0));
  ring_check(3, sizeof user);
  delete(3);
  create(3, 512);
  delete(3);

  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: seg_reuse ok on %u ranks\n", me, n);
  return 0;
}
