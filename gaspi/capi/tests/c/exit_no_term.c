/* A GPI-2 program whose last rank returns from main without gaspi_proc_term: its
 * shared-memory files must be gone from /dev/shm once the survivors know it has left (its
 * exit handlers run before its connections close), whoever started the job. The survivors
 * then finish normally. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

/* How many files of rank `rank` of this job are in /dev/shm:
 * tnt-<job>-<16 hex digits>-r<rank>-s<segment>. */
static int files_of(const char *job, gaspi_rank_t rank) {
  char prefix[256], mark[32];
  snprintf(prefix, sizeof prefix, "tnt-%s-", job);
  snprintf(mark, sizeof mark, "-r%u-s", rank);
  DIR *dir = opendir("/dev/shm");
  ASSERT(dir != NULL);
  int count = 0;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    const char *rest = e->d_name + strlen(prefix);
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strlen(rest) > 17 &&
        strncmp(rest + 16, mark, strlen(mark)) == 0)
      count++;
  }
  closedir(dir);
  return count;
}

int main(void) {
  gaspi_rank_t me, n;
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  ASSERT(n >= 2);
  const char *job = getenv("GASPI_JOB_ID");
  ASSERT(job != NULL);
  for (gaspi_segment_id_t s = 0; s < 2; s++)
    CHECK(gaspi_segment_create(s, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  const gaspi_rank_t last = (gaspi_rank_t)(n - 1);
  /* Its two segments, and the runtime's own (the barrier's). */
  if (me != last) ASSERT(files_of(job, last) >= 2);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  if (me == last) return 0; /* leaves: no gaspi_proc_term */

  /* A wait for a notification nobody sends ends with GASPI_ERROR once the last rank's
     departure is known here. */
  gaspi_notification_id_t id;
  EXPECT(gaspi_notify_waitsome(0, 100, 1, &id, TMO), GASPI_ERROR);
  ASSERT(files_of(job, last) == 0);
  printf("[Rank %4u]: exit_no_term ok on %u ranks\n", me, n);
  return 0;
}
