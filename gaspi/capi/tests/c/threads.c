/* GASPI_Threads.h with 4 threads per rank: every thread registers, posts write_notify to the
 * right neighbour on its own queue and waits for it, waits for its notification from the
 * left neighbour, sends a passive message (thread 0 receives the left neighbour's four),
 * and all meet in gaspi_threads_sync / gaspi_threads_sync_all, for several rounds. Built
 * with -fsanitize=address by the test. */
#include "check.h"
#include <GASPI_Threads.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 10
#define SLOT 64 /* bytes per (round parity, thread) in the data area */
#define DATA_OFF 4096
#define PASSIVE_OFF 0

static gaspi_rank_t me, n;

static void *worker(void *arg) {
  (void)arg;
  gaspi_int tid, total;
  CHECK(gaspi_threads_register(&tid));
  CHECK(gaspi_threads_get_total(&total));
  ASSERT(total == THREADS && tid >= 0 && tid < THREADS);
  gaspi_int again;
  CHECK(gaspi_threads_get_tid(&again));
  ASSERT(again == tid);
  gaspi_threads_sync();

  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n), left = (gaspi_rank_t)((me + n - 1) % n);
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(0, &p));
  char *base = p;
  gaspi_queue_id_t q = (gaspi_queue_id_t)tid; /* 8 queues by default */
  for (unsigned long round = 0; round < ROUNDS; round++) {
    gaspi_offset_t mine = DATA_OFF + (round % 2) * THREADS * SLOT + (gaspi_offset_t)tid * SLOT;
    gaspi_offset_t src = mine + 2 * THREADS * SLOT; /* the send buffer, apart from landing */
    unsigned long *out = (unsigned long *)(base + src);
    out[0] = 1000000ul * me + 1000ul * (unsigned long)tid + round;
    gaspi_notification_id_t id = (gaspi_notification_id_t)(tid + 1);
    CHECK(gaspi_write_notify(0, src, right, 0, mine, 8, id, (gaspi_notification_t)(round + 1), q,
                             TMO));
    CHECK(gaspi_wait(q, TMO));
    gaspi_notification_id_t got;
    gaspi_notification_t val;
    CHECK(gaspi_notify_waitsome(0, id, 1, &got, TMO));
    CHECK(gaspi_notify_reset(0, got, &val));
    ASSERT(got == id && val == round + 1);
    unsigned long in = *(unsigned long *)(base + mine);
    ASSERT(in == 1000000ul * left + 1000ul * (unsigned long)tid + round);

    /* Passive: every thread sends one message; thread 0 takes the left neighbour's. */
    unsigned long *msg = (unsigned long *)(base + 1024 + (gaspi_offset_t)tid * SLOT);
    msg[0] = (unsigned long)tid;
    msg[1] = round;
    CHECK(gaspi_passive_send(0, 1024 + (gaspi_offset_t)tid * SLOT, right, 16, TMO));
    if (tid == 0) {
      int seen[THREADS] = {0};
      for (int k = 0; k < THREADS; k++) {
        gaspi_rank_t from;
        CHECK(gaspi_passive_receive(0, PASSIVE_OFF, &from, 16, TMO));
        unsigned long *m = (unsigned long *)(base + PASSIVE_OFF);
        ASSERT(from == left && m[0] < THREADS && m[1] == round && !seen[m[0]]);
        seen[m[0]] = 1;
      }
    }
    /* Nobody starts the next round (and reuses a landing slot) before all are done. */
    CHECK(gaspi_threads_sync_all(GASPI_GROUP_ALL, TMO));
  }
  gaspi_threads_sync();
  return NULL;
}

int main(void) {
  gaspi_int cores;
  CHECK(gaspi_threads_get_num_cores(&cores));
  ASSERT(cores >= 1);
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  gaspi_int tid;
  EXPECT(gaspi_threads_get_tid(&tid), GASPI_ERROR); /* no pool yet */
  CHECK(gaspi_threads_init_user(THREADS));
  EXPECT(gaspi_threads_init_user(THREADS), GASPI_ERROR); /* a pool exists */
  for (int t = 1; t < THREADS; t++) CHECK(gaspi_threads_run(worker, NULL));
  worker(NULL);
  CHECK(gaspi_threads_term());
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: threads ok on %u ranks\n", me, n);
  return 0;
}
