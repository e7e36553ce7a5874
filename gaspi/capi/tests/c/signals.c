/* SIGTERM in a program linked with libgaspi, as argv[1] sets it up before gaspi_proc_init:
 * "default": rank 1 raises SIGTERM and must die of it, its shared-memory files unlinked;
 *   rank 0's barrier then fails (no hang) and it finds none of rank 1's files left.
 * "handler": the program's own handler runs (the process lives on) and rank 1's files are
 *   unlinked.
 * "ignore": SIGTERM stays ignored; nothing is unlinked. */
#include "check.h"

#include <dirent.h>
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t handled = 0;

static void on_term(int sig) {
  (void)sig;
  handled = 1;
}

/* How many segment files of `rank` this job has in /dev/shm. */
static int files_of(gaspi_rank_t rank) {
  const char *job = getenv("GASPI_JOB_ID");
  char prefix[256], mark[32];
  int n = 0;
  struct dirent *e;
  DIR *d = opendir("/dev/shm");
  ASSERT(job != NULL && d != NULL);
  snprintf(prefix, sizeof prefix, "tnt-%s-", job);
  snprintf(mark, sizeof mark, "-r%u-s", (unsigned)rank);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
        strstr(e->d_name + strlen(prefix), mark) != NULL) {
      n++;
    }
  }
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "default";
  gaspi_rank_t me;
  if (strcmp(mode, "handler") == 0) {
    ASSERT(signal(SIGTERM, on_term) != SIG_ERR);
  } else if (strcmp(mode, "ignore") == 0) {
    ASSERT(signal(SIGTERM, SIG_IGN) != SIG_ERR);
  }
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  CHECK(gaspi_segment_create(1, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  ASSERT(files_of(1) >= 2);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  if (strcmp(mode, "default") == 0) {
    if (me == 1) {
      raise(SIGTERM);
      fprintf(stderr, "rank 1 survived SIGTERM\n");
      return 3;
    }
    ASSERT(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK) != GASPI_SUCCESS);
    ASSERT(files_of(1) == 0);
    gaspi_printf("signals ok on rank 0\n");
    return 0;
  }
  if (me == 1) {
    raise(SIGTERM);
    if (strcmp(mode, "handler") == 0) {
      ASSERT(handled == 1);
      ASSERT(files_of(1) == 0);
    } else {
      ASSERT(handled == 0);
      ASSERT(files_of(1) >= 2);
    }
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  gaspi_printf("signals ok on rank %u\n", (unsigned)me);
  CHECK(gaspi_proc_term(TMO));
  return 0;
}
