/* Every function of GASPI.h and GASPI_Ext.h on the success path, with its results checked,
 * as one SPMD program for 2-4 ranks (and 1). Exits 0 when everything held. */
#include "check.h"
#include <string.h>

static gaspi_rank_t me, n, left, right;

/* gaspi_allreduce_user reduction: element-wise maximum of unsigned long pairs. */
static gaspi_return_t max_pairs(gaspi_pointer_t const a, gaspi_pointer_t const b,
                                gaspi_pointer_t const r, gaspi_reduce_state_t const state,
                                const gaspi_number_t num, const gaspi_size_t size,
                                const gaspi_timeout_t tmo) {
  (void)tmo;
  ASSERT(size == sizeof(unsigned long) && *(int *)state == 42);
  for (gaspi_number_t i = 0; i < num; i++) {
    unsigned long x = ((unsigned long *)a)[i], y = ((unsigned long *)b)[i];
    ((unsigned long *)r)[i] = x > y ? x : y;
  }
  return GASPI_SUCCESS;
}

static void wait_notification(gaspi_segment_id_t seg, gaspi_notification_id_t id,
                              gaspi_notification_t want) {
  gaspi_notification_id_t got;
  gaspi_notification_t val;
  CHECK(gaspi_notify_waitsome(seg, id, 1, &got, TMO));
  CHECK(gaspi_notify_reset(seg, got, &val));
  ASSERT(got == id && val == want);
}

static void before_init(void) {
  gaspi_number_t init = 7;
  float version = 0;
  gaspi_config_t cfg;
  CHECK(gaspi_initialized(&init));
  ASSERT(init == 0);
  CHECK(gaspi_version(&version));
  ASSERT(version > 0);
  CHECK(gaspi_config_get(&cfg));
  ASSERT(cfg.queue_num == 8 && cfg.queue_size_max == 1024 && cfg.notification_num == 65536);
  cfg.queue_num = 4;
  cfg.rw_list_elem_max = 64;
  CHECK(gaspi_config_set(cfg));
}

static void process_and_info(void) {
  gaspi_number_t init, num;
  gaspi_config_t cfg;
  gaspi_rank_t lr, ln;
  CHECK(gaspi_initialized(&init));
  ASSERT(init == 1);
  CHECK(gaspi_config_get(&cfg));
  ASSERT(cfg.queue_num == 4 && cfg.rw_list_elem_max == 64);
  CHECK(gaspi_queue_num(&num));
  ASSERT(num == 4);
  CHECK(gaspi_rw_list_elem_max(&num));
  ASSERT(num == 64);
  CHECK(gaspi_proc_local_rank(&lr));
  CHECK(gaspi_proc_local_num(&ln));
  ASSERT(lr < ln && ln == n);
  CHECK(gaspi_connect(right, TMO));
  CHECK(gaspi_proc_ping(right, TMO));
  CHECK(gaspi_disconnect(right, TMO));
  gaspi_size_t s;
  CHECK(gaspi_transfer_size_min(&s));
  ASSERT(s == 0);
  CHECK(gaspi_transfer_size_max(&s));
  ASSERT(s == 1ul << 30);
  CHECK(gaspi_passive_transfer_size_min(&s));
  ASSERT(s == 1);
  CHECK(gaspi_passive_transfer_size_max(&s));
  ASSERT(s == 65535);
  CHECK(gaspi_allreduce_buf_size(&s));
  ASSERT(s >= 255 * 8);
  CHECK(gaspi_allreduce_elem_max(&num));
  ASSERT(num == 255);
  CHECK(gaspi_notification_num(&num));
  ASSERT(num == 65536);
  gaspi_atomic_value_t amax;
  CHECK(gaspi_atomic_max(&amax));
  ASSERT(amax == ~0ul);
  gaspi_network_t net;
  CHECK(gaspi_network_type(&net));
  ASSERT(net == GASPI_ETHERNET);
  CHECK(gaspi_build_infrastructure(&num));
  ASSERT(num == GASPI_TOPOLOGY_STATIC);
  gaspi_cycles_t t0, t1;
  gaspi_time_t ms;
  float mhz;
  CHECK(gaspi_time_ticks(&t0));
  CHECK(gaspi_time_get(&ms));
  CHECK(gaspi_time_ticks(&t1));
  ASSERT(t1 >= t0 && ms >= 0);
  CHECK(gaspi_cpu_frequency(&mhz));
  ASSERT(mhz > 0); /* the tick rate: clock.c checks it */
  gaspi_string_t msg = NULL;
  CHECK(gaspi_print_error(GASPI_ERR_INV_RANK, &msg));
  ASSERT(msg != NULL && strcmp(msg, "invalid rank") == 0);
  free(msg);
  ASSERT(strcmp(gaspi_error_str(GASPI_QUEUE_FULL), "queue is full") == 0);
  gaspi_state_t states[16];
  CHECK(gaspi_state_vec_get(states));
  for (gaspi_rank_t r = 0; r < n; r++) ASSERT(states[r] == GASPI_STATE_HEALTHY);
  gaspi_uchar socket;
  CHECK(gaspi_numa_socket(&socket));
}

static void segments(void) {
  gaspi_number_t num, max;
  gaspi_segment_id_t ids[8], avail;
  gaspi_size_t size;
  CHECK(gaspi_segment_create(0, 1 << 20, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  /* Segment 1: allocated here, registered with the left neighbour (who writes into it). */
  CHECK(gaspi_segment_alloc(1, 4096, GASPI_ALLOC_DEFAULT));
  CHECK(gaspi_segment_register(1, left, TMO));
  /* Segment 2: user memory, registered with the left neighbour too. */
  static unsigned long bound[512];
  CHECK(gaspi_segment_bind(2, bound, sizeof bound, 0));
  CHECK(gaspi_segment_register(2, left, TMO));
  /* Segment 3: user memory used collectively. */
  static unsigned long used[512];
  CHECK(gaspi_segment_use(3, used, sizeof used, GASPI_GROUP_ALL, TMO, 0));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_segment_num(&num));
  ASSERT(num == 4);
  CHECK(gaspi_segment_list(num, ids));
  ASSERT(ids[0] == 0 && ids[1] == 1 && ids[2] == 2 && ids[3] == 3);
  CHECK(gaspi_segment_max(&max));
  ASSERT(max == 255);
  CHECK(gaspi_segment_avail_local(&avail));
  ASSERT(avail == 4);
  CHECK(gaspi_segment_size(0, me, &size));
  ASSERT(size == 1 << 20);
  CHECK(gaspi_segment_size(1, right, &size));
  ASSERT(size == 4096);
  CHECK(gaspi_segment_size(3, right, &size));
  ASSERT(size == sizeof used);
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(2, &p));
  ASSERT(p == (gaspi_pointer_t)bound);
}

static unsigned long *seg(gaspi_segment_id_t s) {
  gaspi_pointer_t p;
  CHECK(gaspi_segment_ptr(s, &p));
  return (unsigned long *)p;
}

static void one_sided(void) {
  unsigned long *s0 = seg(0), *s1 = seg(1), *s2 = seg(2);
  for (int i = 0; i < 64; i++) s0[i] = 100ul * me + (unsigned long)i;
  /* write then notify on the same queue: data before notification. */
  CHECK(gaspi_write(0, 0, right, 1, 0, 8 * 8, 1, TMO));
  CHECK(gaspi_notify(1, right, 1, 11, 1, TMO));
  wait_notification(1, 1, 11);
  for (int i = 0; i < 8; i++) ASSERT(s1[i] == 100ul * left + (unsigned long)i);
  /* write_notify into bound user memory. */
  CHECK(gaspi_write_notify(0, 8 * 8, right, 2, 0, 8 * 8, 2, 12, 1, TMO));
  wait_notification(2, 2, 12);
  for (int i = 0; i < 8; i++) ASSERT(s2[i] == 100ul * left + 8 + (unsigned long)i);
  gaspi_number_t qs;
  CHECK(gaspi_queue_size(1, &qs));
  ASSERT(qs >= 1);
  CHECK(gaspi_wait(1, TMO));
  CHECK(gaspi_queue_size(1, &qs));
  ASSERT(qs == 0);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  /* read and read_notify from the right neighbour's segment 0. */
  CHECK(gaspi_read(0, 4096, right, 0, 0, 8 * 4, 2, TMO));
  CHECK(gaspi_wait(2, TMO));
  for (int i = 0; i < 4; i++) ASSERT(s0[512 + i] == 100ul * right + (unsigned long)i);
  CHECK(gaspi_read_notify(0, 8192, right, 0, 8 * 4, 8 * 4, 3, 2, TMO));
  wait_notification(0, 3, 1);
  for (int i = 0; i < 4; i++) ASSERT(s0[1024 + i] == 100ul * right + 4 + (unsigned long)i);
  CHECK(gaspi_wait(2, TMO));
  /* Lists: two elements each. */
  gaspi_segment_id_t sl[2] = {0, 0}, sr[2] = {1, 1};
  gaspi_offset_t ol[2] = {16 * 8, 20 * 8}, orr[2] = {100 * 8, 200 * 8};
  gaspi_size_t sz[2] = {16, 24};
  CHECK(gaspi_write_list(2, sl, ol, right, sr, orr, sz, 0, TMO));
  CHECK(gaspi_write_list_notify(2, sl, ol, right, sr, orr, sz, 1, 4, 14, 0, TMO));
  wait_notification(1, 4, 14);
  ASSERT(s1[100] == 100ul * left + 16 && s1[101] == 100ul * left + 17);
  ASSERT(s1[200] == 100ul * left + 20 && s1[202] == 100ul * left + 22);
  CHECK(gaspi_wait(0, TMO));
  gaspi_segment_id_t rl[2] = {0, 0}, rr[2] = {0, 0};
  gaspi_offset_t rol[2] = {3000 * 8, 3010 * 8}, ror[2] = {30 * 8, 40 * 8};
  CHECK(gaspi_read_list(2, rl, rol, right, rr, ror, sz, 0, TMO));
  CHECK(gaspi_wait(0, TMO));
  ASSERT(s0[3000] == 100ul * right + 30 && s0[3010] == 100ul * right + 40);
  CHECK(gaspi_read_list_notify(2, rl, rol, right, rr, ror, sz, 0, 5, 0, TMO));
  wait_notification(0, 5, 1);
  CHECK(gaspi_wait(0, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
}

static void queues(void) {
  gaspi_number_t num, max, before, after, size_max;
  gaspi_queue_id_t q;
  CHECK(gaspi_queue_num(&before));
  CHECK(gaspi_queue_max(&max));
  ASSERT(max == 16);
  CHECK(gaspi_queue_size_max(&size_max));
  ASSERT(size_max == 1024);
  CHECK(gaspi_queue_create(&q, TMO));
  CHECK(gaspi_queue_num(&after));
  ASSERT(after == before + 1 && q == before);
  CHECK(gaspi_write(0, 0, right, 0, 0, 8, q, TMO));
  CHECK(gaspi_wait(q, TMO));
  CHECK(gaspi_queue_purge(q, TMO));
  CHECK(gaspi_queue_delete(q));
  CHECK(gaspi_queue_num(&num));
  ASSERT(num == before);
}

static void groups_and_collectives(void) {
  gaspi_group_t g;
  gaspi_number_t num, size, max;
  CHECK(gaspi_group_create(&g));
  for (gaspi_rank_t r = 0; r < n; r++) CHECK(gaspi_group_add(g, r));
  CHECK(gaspi_group_commit(g, TMO));
  CHECK(gaspi_group_num(&num));
  ASSERT(num == 2);
  CHECK(gaspi_group_size(g, &size));
  ASSERT(size == n);
  gaspi_rank_t ranks[16];
  CHECK(gaspi_group_ranks(g, ranks));
  for (gaspi_rank_t r = 0; r < n; r++) ASSERT(ranks[r] == r);
  CHECK(gaspi_group_max(&max));
  ASSERT(max == 32);
  CHECK(gaspi_barrier(g, TMO));
  int is[3] = {me, -(int)me, 1}, ir[3];
  CHECK(gaspi_allreduce(is, ir, 3, GASPI_OP_SUM, GASPI_TYPE_INT, g, TMO));
  ASSERT(ir[0] == n * (n - 1) / 2 && ir[1] == -(n * (n - 1) / 2) && ir[2] == n);
  unsigned int us = me, ur;
  CHECK(gaspi_allreduce(&us, &ur, 1, GASPI_OP_MAX, GASPI_TYPE_UINT, GASPI_GROUP_ALL, TMO));
  ASSERT(ur == (unsigned)(n - 1));
  float fs = 1.5f + me, fr;
  CHECK(gaspi_allreduce(&fs, &fr, 1, GASPI_OP_MIN, GASPI_TYPE_FLOAT, GASPI_GROUP_ALL, TMO));
  ASSERT(fr == 1.5f);
  double ds = 0.25, dr;
  CHECK(gaspi_allreduce(&ds, &dr, 1, GASPI_OP_SUM, GASPI_TYPE_DOUBLE, GASPI_GROUP_ALL, TMO));
  ASSERT(dr == 0.25 * n);
  long ls = -10 - me, lr;
  CHECK(gaspi_allreduce(&ls, &lr, 1, GASPI_OP_MIN, GASPI_TYPE_LONG, GASPI_GROUP_ALL, TMO));
  ASSERT(lr == -10 - (n - 1));
  unsigned long uls[2] = {me, 1ul << 40}, ulr[2];
  CHECK(gaspi_allreduce(uls, ulr, 2, GASPI_OP_SUM, GASPI_TYPE_ULONG, GASPI_GROUP_ALL, TMO));
  ASSERT(ulr[0] == (unsigned long)(n * (n - 1) / 2) && ulr[1] == (1ul << 40) * n);
  /* In place. */
  CHECK(gaspi_allreduce(uls, uls, 1, GASPI_OP_MAX, GASPI_TYPE_ULONG, GASPI_GROUP_ALL, TMO));
  ASSERT(uls[0] == (unsigned long)(n - 1));
  unsigned long pairs[2] = {me, 100ul - me}, pr[2];
  int state = 42;
  CHECK(gaspi_allreduce_user(pairs, pr, 2, sizeof(unsigned long), max_pairs, &state, g, TMO));
  ASSERT(pr[0] == (unsigned long)(n - 1) && pr[1] == 100);
  CHECK(gaspi_group_delete(g));
  CHECK(gaspi_group_num(&num));
  ASSERT(num == 1);
}

static void atomics_and_passive(void) {
  gaspi_atomic_value_t old;
  /* Everyone adds 1 to rank 0's counter at offset 4096*8 of segment 0. */
  CHECK(gaspi_atomic_fetch_add(0, 40000, 0, 1, &old, TMO));
  ASSERT(old < n);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_atomic_compare_swap(0, 40000, 0, 999, 5, &old, TMO));
  ASSERT(old == n || old == 5); /* only the rank that sees n swaps */
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_atomic_compare_swap(0, 40000, 0, n, 7, &old, TMO));
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_atomic_fetch_add(0, 40000, 0, 0, &old, TMO));
  ASSERT(old == 7);
  /* Passive: send my rank to the right, receive the left one's. */
  unsigned long *s0 = seg(0);
  s0[6000] = 5000ul + me;
  CHECK(gaspi_passive_send(0, 6000 * 8, right, 8, TMO));
  gaspi_rank_t from;
  CHECK(gaspi_passive_receive(0, 6001 * 8, &from, 8, TMO));
  ASSERT(from == left && s0[6001] == 5000ul + left);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
}

static void statistics(void) {
  gaspi_number_t max, level;
  gaspi_statistic_argument_t arg;
  gaspi_string_t name, desc;
  unsigned long value;
  CHECK(gaspi_statistic_verbosity_level(1));
  CHECK(gaspi_statistic_counter_max(&max));
  ASSERT(max >= 1);
  for (gaspi_statistic_counter_t c = 0; c < max; c++) {
    CHECK(gaspi_statistic_counter_info(c, &arg, &name, &desc, &level));
    ASSERT(arg == GASPI_STATISTIC_ARGUMENT_NONE && name[0] != 0 && desc[0] != 0);
  }
  CHECK(gaspi_statistic_counter_info(0, &arg, &name, &desc, &level));
  ASSERT(strcmp(name, "BytesWritten") == 0);
  CHECK(gaspi_statistic_counter_get(0, 0, &value));
  ASSERT(value >= 64);
  CHECK(gaspi_statistic_counter_reset(0));
  CHECK(gaspi_statistic_counter_get(0, 0, &value));
  ASSERT(value == 0);
}

int main(void) {
  before_init();
  CHECK(gaspi_proc_init(TMO));
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  ASSERT(n <= 16);
  left = (gaspi_rank_t)((me + n - 1) % n);
  right = (gaspi_rank_t)((me + 1) % n);
  process_and_info();
  segments();
  one_sided();
  queues();
  groups_and_collectives();
  atomics_and_passive();
  statistics();
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_segment_delete(3));
  CHECK(gaspi_segment_delete(2));
  CHECK(gaspi_segment_delete(1));
  gaspi_printf("api_all ok on %u ranks\n", n);
  gaspi_printf_to(0, "printf_to ok\n");
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_segment_delete(0));
  CHECK(gaspi_proc_term(TMO));
  gaspi_number_t init;
  CHECK(gaspi_initialized(&init));
  ASSERT(init == 0);
  return 0;
}
