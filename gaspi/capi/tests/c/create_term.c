/* gaspi_segment_create is collective: a program that creates a segment on GASPI_GROUP_ALL,
 * fills it and terminates at once (no barrier) must work on every rank, however far ahead
 * a rank runs (GPI-2 ends its segment_create with a barrier of the group). */
#include "check.h"
#include <string.h>

int main(void) {
  gaspi_rank_t me, n;
  gaspi_pointer_t p;
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, GASPI_BLOCK, GASPI_MEM_INITIALIZED));
  for (gaspi_rank_t r = 0; r < n; r++) {
    gaspi_size_t size;
    CHECK(gaspi_segment_size(0, r, &size));
    ASSERT(size == 1 << 16);
  }
  CHECK(gaspi_segment_ptr(0, &p));
  memset(p, (int)me, 1 << 16);
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  printf("[Rank %4u]: create_term ok on %u ranks\n", me, n);
  return 0;
}
