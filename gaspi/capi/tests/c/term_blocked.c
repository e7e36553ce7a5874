/* gaspi_proc_term while another thread is blocked in a GASPI call. A helper thread serves
 * requests in gaspi_passive_receive(GASPI_BLOCK): it answers each with a gaspi_write_notify
 * of a value and a passive acknowledgement (which the requester's helper receives). The
 * main thread sends requests to the right neighbour's helper, waits for its answers and
 * acknowledgements, then barrier and proc_term. proc_term must complete; the helper's
 * blocked call (usually the receive) must return GASPI_ERROR (or GASPI_ERR_NOINIT, when the
 * helper was between two calls as term ran), and calls after term GASPI_ERR_NOINIT. */
#include "check.h"
#include <pthread.h>
#include <string.h>

#define ROUNDS 20
#define REQ_OFF 0     /* passive receive buffer of the helper: {kind, round} */
#define SEND_OFF 64   /* passive send buffer of the main thread */
#define ACK_OFF 128   /* passive send buffer of the helper */
#define DATA_OFF 4096 /* written by the neighbour's helper: one word per round */
#define REQUEST 1ul
#define ACK 2ul

static gaspi_rank_t me, n;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t acked = PTHREAD_COND_INITIALIZER;
static int acks = 0;
/* What ended the helper: the first of its calls that failed (at term). */
static gaspi_return_t helper_rc = GASPI_SUCCESS;

#define HELPER_CALL(call)                  \
  do {                                     \
    gaspi_return_t rc_ = (call);           \
    if (rc_ != GASPI_SUCCESS) {            \
      helper_rc = rc_;                     \
      return NULL;                         \
    }                                      \
  } while (0)

static void *serve(void *arg) {
  (void)arg;
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(0, &p));
  unsigned long *req = (unsigned long *)((char *)p + REQ_OFF);
  unsigned long *out = (unsigned long *)((char *)p + ACK_OFF);
  for (;;) {
    gaspi_rank_t from;
    HELPER_CALL(gaspi_passive_receive(0, REQ_OFF, &from, 16, GASPI_BLOCK));
    unsigned long kind = req[0], round = req[1];
    if (kind == ACK) {
      pthread_mutex_lock(&lock);
      acks++;
      pthread_cond_signal(&acked);
      pthread_mutex_unlock(&lock);
      continue;
    }
    ASSERT(kind == REQUEST);
    out[2] = 7000 + round;
    HELPER_CALL(gaspi_write_notify(0, ACK_OFF + 16, from, 0, DATA_OFF + 8 * round, 8,
                                   (gaspi_notification_id_t)round, 1, 1, TMO));
    HELPER_CALL(gaspi_wait(1, TMO));
    out[0] = ACK;
    out[1] = round;
    /* The requester may terminate once the message is in its inbox, before the delivery
     * confirmation reaches us: then this call ends with an error, as at term. */
    HELPER_CALL(gaspi_passive_send(0, ACK_OFF, from, 16, TMO));
  }
}

int main(void) {
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  pthread_t helper;
  ASSERT(pthread_create(&helper, NULL, serve, NULL) == 0);

  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n);
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(0, &p));
  unsigned long *words = p;
  for (unsigned long round = 0; round < ROUNDS; round++) {
    words[SEND_OFF / 8] = REQUEST;
    words[SEND_OFF / 8 + 1] = round;
    CHECK(gaspi_passive_send(0, SEND_OFF, right, 16, TMO));
    gaspi_notification_id_t got;
    gaspi_notification_t val;
    CHECK(gaspi_notify_waitsome(0, (gaspi_notification_id_t)round, 1, &got, TMO));
    CHECK(gaspi_notify_reset(0, got, &val));
    ASSERT(words[DATA_OFF / 8 + round] == 7000 + round);
  }
  /* Our helper has received every acknowledgement of our requests... */
  pthread_mutex_lock(&lock);
  while (acks < ROUNDS) pthread_cond_wait(&acked, &lock);
  pthread_mutex_unlock(&lock);
  /* ...and so has everyone's: every helper is done sending and waits in passive_receive. */
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  ASSERT(pthread_join(helper, NULL) == 0);
  if (helper_rc != GASPI_ERROR && helper_rc != GASPI_ERR_NOINIT) {
    fprintf(stderr, "the helper's blocked call returned %d at term\n", (int)helper_rc);
    return 1;
  }
  gaspi_rank_t r;
  EXPECT(gaspi_proc_rank(&r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_passive_receive(0, REQ_OFF, &r, 16, GASPI_BLOCK), GASPI_ERR_NOINIT);
  printf("[Rank %4u]: term_blocked ok on %u ranks\n", me, n);
  return 0;
}
