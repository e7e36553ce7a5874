/* What GPI-2 accepts and does where we once differed: the calls valid before init (timing
 * included), configurations at the edges of GPI-2's ranges and their effect (a 1,000,000
 * element allreduce, 255 groups, notification ids up to the configured number), waiting for
 * zero notifications, resetting without the old value, the minimum transfer size, and
 * gaspi_segment_bind/use without memory (NULL: the library allocates it).
 * With the argument "zero", notification_num = 0 (the default) is configured instead. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define ELEMS 1000000
#define NOTIFS (2 * 65536)

static gaspi_rank_t me, n;

static void before_init(int zero) {
  gaspi_cycles_t t0, t1;
  gaspi_time_t ms;
  gaspi_float mhz, version;
  gaspi_number_t init = 9;
  gaspi_string_t text;
  gaspi_delay();
  CHECK(gaspi_time_ticks(&t0));
  CHECK(gaspi_time_get(&ms));
  CHECK(gaspi_cpu_frequency(&mhz));
  CHECK(gaspi_time_ticks(&t1));
  ASSERT(t1 >= t0 && ms >= 0 && mhz > 0);
  CHECK(gaspi_version(&version));
  CHECK(gaspi_initialized(&init));
  ASSERT(init == 0);
  CHECK(gaspi_print_error(GASPI_TIMEOUT, &text));
  ASSERT(strstr(text, "timeout") != NULL || strstr(text, "Timeout") != NULL);
  free(text);
  ASSERT(gaspi_error_str(GASPI_ERR_NOINIT) != NULL);
  /* The statistics calls too (GPI-2 checks no initialization there); counters are 0. */
  gaspi_number_t counters = 0;
  unsigned long value = 7;
  CHECK(gaspi_statistic_verbosity_level(1));
  CHECK(gaspi_statistic_counter_max(&counters));
  ASSERT(counters > 0);
  CHECK(gaspi_statistic_counter_get(0, 0, &value));
  ASSERT(value == 0);
  CHECK(gaspi_statistic_counter_reset(0));
  EXPECT(gaspi_statistic_counter_reset(counters), GASPI_ERR_INV_NUM);

  gaspi_config_t cfg;
  CHECK(gaspi_config_get(&cfg));
  cfg.allreduce_elem_max = ELEMS;
  cfg.group_max = 255;
  cfg.notification_num = zero ? 0 : NOTIFS;
  cfg.dev_config.params.ib.mtu = 0;
  CHECK(gaspi_config_set(cfg));
  gaspi_config_t back;
  CHECK(gaspi_config_get(&back));
  ASSERT(back.allreduce_elem_max == ELEMS && back.group_max == 255);
}

static void notifications(int zero) {
  gaspi_number_t num;
  CHECK(gaspi_notification_num(&num));
  ASSERT(num == (zero ? 65536u : NOTIFS));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n);
  gaspi_notification_id_t last = (gaspi_notification_id_t)(num - 1), got;
  CHECK(gaspi_write_notify(0, 0, right, 0, 8, 8, last, 5, 0, TMO));
  CHECK(gaspi_notify_waitsome(0, last, 1, &got, TMO));
  ASSERT(got == last);
  /* GPI-2 takes NULL for the old value. */
  CHECK(gaspi_notify_reset(0, last, NULL));
  gaspi_notification_t val = 9;
  CHECK(gaspi_notify_reset(0, last, &val));
  ASSERT(val == 0);
  /* One past the configured number is refused. */
  EXPECT(gaspi_notify(0, right, (gaspi_notification_id_t)num, 1, 0, TMO), GASPI_ERR_INV_NOTIF_ID);
  /* Waiting for zero notifications returns at once, even with nothing set, and leaves
     first_id alone (GPI-2's src/GPI2_IO.c returns before touching it). */
  got = 12345;
  CHECK(gaspi_notify_waitsome(0, 5, 0, &got, GASPI_BLOCK));
  ASSERT(got == 12345);
  /* The segment is still checked first (segment 9 was never created). */
  EXPECT(gaspi_notify_waitsome(9, 5, 0, &got, GASPI_BLOCK), GASPI_ERR_INV_SEG);
  ASSERT(got == 12345);
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
}

/* Zero-size transfers, as GPI-2's tests/comm/write_zero_size.c and read_zero_size.c do
   them (GASPI_MIN_TSIZE_C is 0): to every rank, this one included, then the segment is
   unchanged; a zero-size write_notify is its notification, a zero-size read_notify sets its
   own; zero-size list elements are skipped. */
static void transfer_sizes(void) {
  gaspi_size_t min;
  CHECK(gaspi_transfer_size_min(&min));
  ASSERT(min == 0);
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(0, &p));
  int *mem = (int *)p;
  for (gaspi_rank_t i = 0; i < n; i++) mem[i] = (int)me;
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  gaspi_offset_t off = me * sizeof(int);
  for (gaspi_rank_t i = 0; i < n; i++) {
    CHECK(gaspi_write(0, off, i, 0, off, 0, 0, TMO));
    CHECK(gaspi_read(0, off, i, 0, off, 0, 0, TMO));
  }
  CHECK(gaspi_wait(0, TMO));
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n);
  gaspi_notification_id_t id;
  gaspi_notification_t val;
  CHECK(gaspi_write_notify(0, 0, right, 0, 0, 0, 40, 3, 0, TMO));
  CHECK(gaspi_notify_waitsome(0, 40, 1, &id, TMO));
  CHECK(gaspi_notify_reset(0, 40, &val));
  ASSERT(id == 40 && val == 3);
  CHECK(gaspi_read_notify(0, 0, right, 0, 0, 0, 41, 0, TMO));
  CHECK(gaspi_notify_waitsome(0, 41, 1, &id, TMO));
  CHECK(gaspi_notify_reset(0, 41, &val));
  ASSERT(id == 41 && val == 1);
  gaspi_segment_id_t s = 0;
  gaspi_offset_t o = 0;
  gaspi_size_t size = 0;
  CHECK(gaspi_write_list(1, &s, &o, right, &s, &o, &size, 0, TMO));
  CHECK(gaspi_read_list(1, &s, &o, right, &s, &o, &size, 0, TMO));
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  for (gaspi_rank_t i = 0; i < n; i++) ASSERT(mem[i] == (int)me);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
}

/* gaspi_segment_bind and gaspi_segment_use with a NULL pointer allocate the segment's
   memory, as GPI-2 1.5 does (src/GPI2_SEG.c, pgaspi_segment_alloc_maybe): a usable segment
   of the size asked for, local for bind, registered with the group for use. A size of 0 is
   still GASPI_ERR_INV_SEGSIZE. */
static void bind_without_memory(void) {
  gaspi_pointer_t p = NULL;
  gaspi_size_t size = 0;
  CHECK(gaspi_segment_bind(1, NULL, 4096, 0));
  CHECK(gaspi_segment_ptr(1, &p));
  CHECK(gaspi_segment_size(1, me, &size));
  ASSERT(p != NULL && size == 4096);
  memset(p, 0x5a, 4096);
  CHECK(gaspi_segment_delete(1));
  EXPECT(gaspi_segment_bind(1, NULL, 0, 0), GASPI_ERR_INV_SEGSIZE);
  EXPECT(gaspi_segment_use(1, NULL, 0, GASPI_GROUP_ALL, TMO, 0), GASPI_ERR_INV_SEGSIZE);

  CHECK(gaspi_segment_use(2, NULL, 4096, GASPI_GROUP_ALL, TMO, 0));
  CHECK(gaspi_segment_ptr(2, &p));
  long *v = (long *)p;
  v[0] = 1000 + (long)me;
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  gaspi_rank_t right = (gaspi_rank_t)((me + 1) % n), left = (gaspi_rank_t)((me + n - 1) % n);
  gaspi_notification_id_t id;
  CHECK(gaspi_write_notify(2, 0, right, 2, sizeof(long), sizeof(long), 3, 1, 0, TMO));
  CHECK(gaspi_notify_waitsome(2, 3, 1, &id, TMO));
  ASSERT(id == 3 && v[1] == 1000 + (long)left);
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_segment_delete(2));
}

/* GPI-2's machine helpers of GASPI_Ext.h. */
static void machine(void) {
  char type[64];
  memset(type, 'x', sizeof type);
  CHECK(gaspi_machine_type(type));
  ASSERT(memchr(type, 0, sizeof type) != NULL && strlen(type) > 0);
  CHECK(gaspi_set_socket_affinity(0));
  EXPECT(gaspi_set_socket_affinity(200), GASPI_ERR_INV_NUM);
  gaspi_print_affinity_mask();
  fflush(stdout);
}

static void big_allreduce(void) {
  gaspi_number_t max;
  CHECK(gaspi_allreduce_elem_max(&max));
  ASSERT(max == ELEMS);
  double *in = malloc(sizeof(double) * ELEMS), *out = malloc(sizeof(double) * ELEMS);
  ASSERT(in && out);
  for (int i = 0; i < ELEMS; i++) in[i] = (double)i + me;
  CHECK(gaspi_allreduce(in, out, ELEMS, GASPI_OP_SUM, GASPI_TYPE_DOUBLE, GASPI_GROUP_ALL, TMO));
  double ranks = (double)n * (n - 1) / 2;
  for (int i = 0; i < ELEMS; i++) ASSERT(out[i] == (double)i * n + ranks);
  CHECK(gaspi_allreduce(in, out, ELEMS, GASPI_OP_MAX, GASPI_TYPE_DOUBLE, GASPI_GROUP_ALL, TMO));
  for (int i = 0; i < ELEMS; i++) ASSERT(out[i] == (double)i + n - 1);
  free(in);
  free(out);
}

static void many_groups(void) {
  gaspi_number_t max, num;
  CHECK(gaspi_group_max(&max));
  ASSERT(max == 255);
  gaspi_group_t g = 0;
  for (;;) {
    gaspi_return_t rc = gaspi_group_create(&g);
    if (rc == GASPI_ERR_MANY_GRP) break;
    CHECK(rc);
  }
  CHECK(gaspi_group_num(&num));
  ASSERT(num == 255 && g == 254);
  /* The last groups work as groups: all ranks, committed, a barrier and an allreduce. */
  for (gaspi_group_t k = 250; k <= 254; k++) {
    for (gaspi_rank_t r = 0; r < n; r++) CHECK(gaspi_group_add(k, r));
    CHECK(gaspi_group_commit(k, TMO));
    CHECK(gaspi_barrier(k, TMO));
    long one = 1, sum = 0;
    CHECK(gaspi_allreduce(&one, &sum, 1, GASPI_OP_SUM, GASPI_TYPE_LONG, k, TMO));
    ASSERT(sum == n);
  }
}

int main(int argc, char **argv) {
  int zero = argc > 1 && strcmp(argv[1], "zero") == 0;
  before_init(zero);
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  notifications(zero);
  transfer_sizes();
  bind_without_memory();
  machine();
  if (!zero) {
    big_allreduce();
    many_groups();
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  printf("[Rank %4u]: gpi2_compat ok on %u ranks\n", me, n);
  return 0;
}
