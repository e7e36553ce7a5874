/* gaspi_group_add after gaspi_group_commit, as GPI-2 allows it (src/GPI2_GRP.c: group_add
 * appends to the member list of any existing group; group_commit takes the list as it is
 * then): ranks 1..n-1 commit a group and use it; they add rank 0, which joins with the same
 * group id, so every member's index shifts. Until it is committed again the group refuses
 * collectives (GPI-2 leaves them undefined there); after every member has committed it
 * again, barrier, allreduce and segment_create work on all n members. Needs n >= 3. */
#include "check.h"
#include <string.h>

static gaspi_rank_t me, n;

static long sum_of_ranks(gaspi_group_t g) {
  long mine = (long)me, sum = -1;
  CHECK(gaspi_allreduce(&mine, &sum, 1, GASPI_OP_SUM, GASPI_TYPE_LONG, g, TMO));
  return sum;
}

/* Ring write over the members of g on segment `seg`, created on g. */
static void ring(gaspi_group_t g, gaspi_segment_id_t seg) {
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n), left = (gaspi_rank_t)((me + n - 1) % n);
  gaspi_pointer_t p;
  gaspi_notification_id_t got;
  CHECK(gaspi_segment_create(seg, 4096, g, TMO, GASPI_MEM_INITIALIZED));
  CHECK(gaspi_segment_ptr(seg, &p));
  long *v = (long *)p;
  v[0] = 1000 + (long)me;
  CHECK(gaspi_write_notify(seg, 0, right, seg, 8, 8, 1, 1, 0, TMO));
  CHECK(gaspi_notify_waitsome(seg, 1, 1, &got, TMO));
  ASSERT(got == 1 && v[1] == 1000 + (long)left);
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(g, TMO));
  CHECK(gaspi_segment_delete(seg));
}

int main(void) {
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  ASSERT(n >= 3);
  gaspi_group_t g;
  gaspi_number_t size, segs_before, segs_after;
  gaspi_rank_t ranks[64];
  CHECK(gaspi_group_create(&g));

  if (me != 0) {
    for (gaspi_rank_t r = 1; r < n; r++) CHECK(gaspi_group_add(g, r));
    CHECK(gaspi_group_commit(g, TMO));
    CHECK(gaspi_barrier(g, TMO));
    ASSERT(sum_of_ranks(g) == (long)n * (n - 1) / 2);
    /* Committing an unchanged, committed group again succeeds on its own. */
    if (me == 1) CHECK(gaspi_group_commit(g, TMO));
    CHECK(gaspi_barrier(g, TMO));

    /* Added after the commit: the member list changes at once. */
    CHECK(gaspi_group_add(g, 0));
    EXPECT(gaspi_group_add(g, 0), GASPI_ERR_INV_RANK);
    CHECK(gaspi_group_size(g, &size));
    ASSERT(size == n);
    CHECK(gaspi_group_ranks(g, ranks));
    for (gaspi_rank_t r = 0; r < n; r++) ASSERT(ranks[r] == r);
    /* Not usable until committed again, and refused without side effects. */
    EXPECT(gaspi_barrier(g, TMO), GASPI_ERR_INV_GROUP);
    ASSERT(strstr(tnt_gaspi_last_error(), "commit") != NULL);
    long one = 1, out = 0;
    EXPECT(gaspi_allreduce(&one, &out, 1, GASPI_OP_SUM, GASPI_TYPE_LONG, g, TMO),
           GASPI_ERR_INV_GROUP);
    CHECK(gaspi_segment_num(&segs_before));
    EXPECT(gaspi_segment_create(3, 4096, g, TMO, GASPI_MEM_INITIALIZED), GASPI_ERR_INV_GROUP);
    CHECK(gaspi_segment_num(&segs_after));
    ASSERT(segs_after == segs_before);
  } else {
    /* The newcomer: the same group id, every member. */
    for (gaspi_rank_t r = 0; r < n; r++) CHECK(gaspi_group_add(g, r));
  }

  /* Every member commits the grown group; it works on all n. */
  CHECK(gaspi_group_commit(g, TMO));
  CHECK(gaspi_barrier(g, TMO));
  ASSERT(sum_of_ranks(g) == (long)n * (n - 1) / 2);
  ring(g, 2);
  for (int i = 0; i < 3; i++) CHECK(gaspi_barrier(g, TMO));
  ASSERT(sum_of_ranks(g) == (long)n * (n - 1) / 2);

  /* The id is reusable afterwards, as before. */
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_group_delete(g));
  CHECK(gaspi_group_create(&g));
  for (gaspi_rank_t r = 0; r < n; r++) CHECK(gaspi_group_add(g, r));
  CHECK(gaspi_group_commit(g, TMO));
  ASSERT(sum_of_ranks(g) == (long)n * (n - 1) / 2);
  CHECK(gaspi_group_delete(g));

  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: group_grow ok on %u ranks\n", me, n);
  return 0;
}
