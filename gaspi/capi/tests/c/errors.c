/* The error paths: calls before init, null pointers, bad arguments and misuse, each with
 * the return code the standard gives it. Runs on 1 or 2 ranks. */
#include "check.h"
#include <string.h>

static gaspi_return_t failing_reduction(gaspi_pointer_t const a, gaspi_pointer_t const b,
                                        gaspi_pointer_t const r, gaspi_reduce_state_t const s,
                                        const gaspi_number_t num, const gaspi_size_t size,
                                        const gaspi_timeout_t tmo) {
  (void)a; (void)b; (void)r; (void)s; (void)num; (void)size; (void)tmo;
  return GASPI_ERROR;
}

static void not_initialized(void) {
  gaspi_rank_t r;
  gaspi_number_t num;
  gaspi_size_t size;
  gaspi_pointer_t p;
  gaspi_group_t g;
  gaspi_queue_id_t q;
  gaspi_notification_id_t id;
  gaspi_notification_t val;
  gaspi_atomic_value_t old;
  gaspi_state_t st[4];
  gaspi_segment_id_t s = 0;
  gaspi_offset_t o = 0;
  gaspi_size_t one = 8;
  int buf[1] = {0};
  EXPECT(gaspi_proc_term(TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_rank(&r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_num(&r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_local_rank(&r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_local_num(&r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_kill(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_proc_ping(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_connect(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_disconnect(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_create(&g), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_add(1, 0), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_commit(1, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_delete(1), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_num(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_size(0, &num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_ranks(0, &r), GASPI_ERR_NOINIT);
  EXPECT(gaspi_group_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_alloc(0, 64, GASPI_MEM_INITIALIZED), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_create(0, 64, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_register(0, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_bind(0, buf, sizeof buf, 0), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_use(0, buf, sizeof buf, GASPI_GROUP_ALL, TMO, 0), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_delete(0), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_num(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_list(1, &s), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_ptr(0, &p), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_size(0, 0, &size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_segment_avail_local(&s), GASPI_ERR_NOINIT);
  EXPECT(gaspi_write(0, 0, 0, 0, 0, 8, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_read(0, 0, 0, 0, 0, 8, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_write_notify(0, 0, 0, 0, 0, 8, 0, 1, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_read_notify(0, 0, 0, 0, 0, 8, 0, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_write_list(1, &s, &o, 0, &s, &o, &one, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_read_list(1, &s, &o, 0, &s, &o, &one, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_write_list_notify(1, &s, &o, 0, &s, &o, &one, 0, 0, 1, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_read_list_notify(1, &s, &o, 0, &s, &o, &one, 0, 0, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_wait(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_notify(0, 0, 0, 1, 0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_notify_waitsome(0, 0, 1, &id, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_notify_reset(0, 0, &val), GASPI_ERR_NOINIT);
  EXPECT(gaspi_notification_num(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_size(0, &num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_num(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_size_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_create(&q, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_delete(0), GASPI_ERR_NOINIT);
  EXPECT(gaspi_queue_purge(0, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_barrier(GASPI_GROUP_ALL, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_allreduce(buf, buf, 1, GASPI_OP_SUM, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_allreduce_user(buf, buf, 1, 4, failing_reduction, NULL, GASPI_GROUP_ALL, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_allreduce_buf_size(&size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_allreduce_elem_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_atomic_fetch_add(0, 0, 0, 1, &old, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_atomic_compare_swap(0, 0, 0, 0, 1, &old, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_atomic_max(&old), GASPI_ERR_NOINIT);
  EXPECT(gaspi_passive_send(0, 0, 0, 8, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_passive_receive(0, 0, &r, 8, TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_passive_transfer_size_min(&size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_passive_transfer_size_max(&size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_transfer_size_min(&size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_transfer_size_max(&size), GASPI_ERR_NOINIT);
  EXPECT(gaspi_rw_list_elem_max(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_network_type((gaspi_network_t *)&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_build_infrastructure(&num), GASPI_ERR_NOINIT);
  EXPECT(gaspi_state_vec_get(st), GASPI_ERR_NOINIT);
  EXPECT(gaspi_numa_socket(&s), GASPI_ERR_NOINIT);
  ASSERT(strstr(tnt_gaspi_last_error(), "not initialized") != NULL);
}

static void configuration(void) {
  gaspi_config_t cfg, bad;
  EXPECT(gaspi_config_get(NULL), GASPI_ERR_NULLPTR);
  CHECK(gaspi_config_get(&cfg));
  bad = cfg;
  bad.dev_config.params.ib.mtu = 1500;
  EXPECT(gaspi_config_set(bad), GASPI_ERR_CONFIG);
  ASSERT(strstr(tnt_gaspi_last_error(), "mtu") != NULL);
  bad = cfg;
  bad.queue_num = 17;
  EXPECT(gaspi_config_set(bad), GASPI_ERR_CONFIG);
  bad = cfg;
  bad.network = GASPI_GEMINI;
  EXPECT(gaspi_config_set(bad), GASPI_ERR_CONFIG);
  bad = cfg;
  bad.queue_size_max = 4; /* valid: small queues for the QUEUE_FULL check */
  CHECK(gaspi_config_set(bad));
  EXPECT(gaspi_version(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_initialized(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_print_error(GASPI_ERROR, NULL), GASPI_ERR_NULLPTR);
  for (int c = -1; c <= 28; c++) {
    gaspi_string_t msg;
    CHECK(gaspi_print_error((gaspi_return_t)c, &msg));
    ASSERT(strcmp(msg, gaspi_error_str((gaspi_return_t)c)) == 0 && strlen(msg) > 3);
    free(msg);
  }
  ASSERT(strcmp(gaspi_error_str((gaspi_return_t)999), "unknown error code") == 0);
}

static void null_pointers(void) {
  gaspi_segment_id_t s = 0;
  gaspi_offset_t o = 0;
  gaspi_size_t one = 8;
  int buf[2] = {0, 0};
  EXPECT(gaspi_proc_rank(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_proc_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_proc_local_rank(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_proc_local_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_group_create(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_group_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_group_size(0, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_group_ranks(0, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_group_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_list(1, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_ptr(0, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_size(0, 0, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_segment_avail_local(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_write_list(1, NULL, &o, 0, &s, &o, &one, 0, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_read_list(1, &s, NULL, 0, &s, &o, &one, 0, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_write_list_notify(1, &s, &o, 0, NULL, &o, &one, 0, 0, 1, 0, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_read_list_notify(1, &s, &o, 0, &s, &o, NULL, 0, 0, 0, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_notify_waitsome(0, 0, 1, NULL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_notification_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_queue_size(0, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_queue_num(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_queue_size_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_queue_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_queue_create(NULL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_allreduce(NULL, buf, 1, GASPI_OP_SUM, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_allreduce(buf, NULL, 1, GASPI_OP_SUM, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_allreduce_user(buf, buf, 1, 4, NULL, NULL, GASPI_GROUP_ALL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_allreduce_buf_size(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_allreduce_elem_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_atomic_fetch_add(0, 0, 0, 1, NULL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_atomic_compare_swap(0, 0, 0, 0, 1, NULL, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_atomic_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_passive_receive(0, 0, NULL, 8, TMO), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_passive_transfer_size_min(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_passive_transfer_size_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_transfer_size_min(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_transfer_size_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_rw_list_elem_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_network_type(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_build_infrastructure(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_time_ticks(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_time_get(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_state_vec_get(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_numa_socket(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_cpu_frequency(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_statistic_counter_max(NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_statistic_counter_info(0, NULL, NULL, NULL, NULL), GASPI_ERR_NULLPTR);
  EXPECT(gaspi_statistic_counter_get(0, 0, NULL), GASPI_ERR_NULLPTR);
  ASSERT(strstr(tnt_gaspi_last_error(), "null pointer") != NULL);
}

static void bad_arguments(gaspi_rank_t me, gaspi_rank_t n) {
  gaspi_notification_id_t id;
  gaspi_notification_t val;
  gaspi_atomic_value_t old;
  gaspi_group_t g;
  gaspi_rank_t from;
  int in[300] = {0}, outv[300];
  EXPECT(gaspi_segment_create(0, 0, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED), GASPI_ERR_INV_SEGSIZE);
  EXPECT(gaspi_segment_create(0, 64, GASPI_GROUP_ALL, TMO, 7), GASPI_ERR_INV_NUM);
  EXPECT(gaspi_segment_create(0, 64, 9, TMO, GASPI_MEM_INITIALIZED), GASPI_ERR_INV_GROUP);
  CHECK(gaspi_segment_create(0, 4096, GASPI_GROUP_ALL, TMO, GASPI_MEM_INITIALIZED));
  EXPECT(gaspi_segment_alloc(0, 64, GASPI_MEM_INITIALIZED), GASPI_ERR_INV_SEG);
  EXPECT(gaspi_segment_alloc(255, 64, GASPI_MEM_INITIALIZED), GASPI_ERR_INV_SEG);
  EXPECT(gaspi_segment_delete(9), GASPI_ERR_INV_SEG);
  EXPECT(gaspi_segment_register(0, n, TMO), GASPI_ERR_INV_RANK);
  EXPECT(gaspi_write(0, 0, n, 0, 0, 8, 0, TMO), GASPI_ERR_INV_RANK);
  EXPECT(gaspi_write(0, 0, me, 0, 0, 8, 16, TMO), GASPI_ERR_INV_QUEUE);
  EXPECT(gaspi_write(0, 4090, me, 0, 0, 8, 0, TMO), GASPI_ERR_INV_LOC_OFF);
  EXPECT(gaspi_write(0, 0, me, 0, 4090, 8, 0, TMO), GASPI_ERR_INV_REM_OFF);
  EXPECT(gaspi_write(0, 0, me, 9, 0, 8, 0, TMO), GASPI_ERR_INV_SEG);
  EXPECT(gaspi_read(0, 0, me, 0, 4090, 8, 0, TMO), GASPI_ERR_INV_REM_OFF);
  EXPECT(gaspi_write_notify(0, 0, me, 0, 0, 8, 0, 0, 0, TMO), GASPI_ERR_INV_NOTIF_VAL);
  EXPECT(gaspi_write_notify(0, 0, me, 0, 0, 8, 70000, 1, 0, TMO), GASPI_ERR_INV_NOTIF_ID);
  EXPECT(gaspi_notify(0, me, 0, 0, 0, TMO), GASPI_ERR_INV_NOTIF_VAL);
  EXPECT(gaspi_notify_waitsome(0, 65535, 2, &id, TMO), GASPI_ERR_INV_NOTIF_ID);
  EXPECT(gaspi_notify_reset(0, 65536, &val), GASPI_ERR_INV_NOTIF_ID);
  /* Nothing was notified: a test returns TIMEOUT, and so does a short wait. */
  EXPECT(gaspi_notify_waitsome(0, 0, 16, &id, GASPI_TEST), GASPI_TIMEOUT);
  EXPECT(gaspi_notify_waitsome(0, 0, 16, &id, 20), GASPI_TIMEOUT);
  EXPECT(gaspi_atomic_fetch_add(0, 4, me, 1, &old, TMO), GASPI_ERR_UNALIGN_OFF);
  EXPECT(gaspi_atomic_compare_swap(0, 4096, me, 0, 1, &old, TMO), GASPI_ERR_INV_REM_OFF);
  EXPECT(gaspi_allreduce(in, outv, 1, (gaspi_operation_t)9, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO), GASPI_ERR_INV_NUM);
  EXPECT(gaspi_allreduce(in, outv, 1, GASPI_OP_SUM, (gaspi_datatype_t)9, GASPI_GROUP_ALL, TMO), GASPI_ERR_INV_NUM);
  /* No elements: the group synchronises, as in GPI-2. */
  CHECK(gaspi_allreduce(in, outv, 0, GASPI_OP_SUM, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO));
  EXPECT(gaspi_allreduce(in, outv, 256, GASPI_OP_SUM, GASPI_TYPE_INT, GASPI_GROUP_ALL, TMO), GASPI_ERR_INV_NUM);
  /* allreduce_buf_size is allreduce_elem_max 8-byte elements (2040), and allreduce_user
     takes no more bytes than that. */
  gaspi_size_t buf_size;
  CHECK(gaspi_allreduce_buf_size(&buf_size));
  ASSERT(buf_size == 255 * 8);
  EXPECT(gaspi_allreduce_user(in, outv, 200, 16, failing_reduction, NULL, GASPI_GROUP_ALL, TMO),
         GASPI_ERR_INV_SIZE);
  EXPECT(gaspi_allreduce(in, outv, 1, GASPI_OP_SUM, GASPI_TYPE_INT, 5, TMO), GASPI_ERR_INV_GROUP);
  EXPECT(gaspi_group_delete(GASPI_GROUP_ALL), GASPI_ERR_INV_GROUP);
  EXPECT(gaspi_group_add(7, 0), GASPI_ERR_INV_GROUP);
  EXPECT(gaspi_barrier(7, TMO), GASPI_ERR_INV_GROUP);
  CHECK(gaspi_group_create(&g));
  EXPECT(gaspi_group_add(g, n), GASPI_ERR_INV_RANK);
  /* A rank added twice: GASPI_ERR_INV_RANK, as in GPI-2. */
  CHECK(gaspi_group_add(g, me));
  EXPECT(gaspi_group_add(g, me), GASPI_ERR_INV_RANK);
  CHECK(gaspi_group_delete(g));
  /* gaspi_segment_list wants the number of segments (GPI-2: GASPI_ERROR otherwise). */
  gaspi_segment_id_t ids[2];
  EXPECT(gaspi_segment_list(2, ids), GASPI_ERROR);
  CHECK(gaspi_segment_list(1, ids));
  ASSERT(ids[0] == 0);
  /* With every queue in use, gaspi_queue_create is GASPI_ERROR, as in GPI-2. */
  gaspi_number_t queues, queue_max;
  CHECK(gaspi_queue_num(&queues));
  CHECK(gaspi_queue_max(&queue_max));
  gaspi_queue_id_t made[16];
  for (gaspi_number_t i = queues; i < queue_max; i++) CHECK(gaspi_queue_create(&made[i - queues], TMO));
  EXPECT(gaspi_queue_create(&made[0], TMO), GASPI_ERROR);
  for (gaspi_number_t i = queues; i < queue_max; i++) CHECK(gaspi_queue_delete(made[i - queues]));
  EXPECT(gaspi_proc_kill(me, TMO), GASPI_ERR_INV_RANK);
  EXPECT(gaspi_proc_ping(n, TMO), GASPI_ERR_INV_RANK);
  EXPECT(gaspi_passive_send(0, 0, me, 0, TMO), GASPI_ERR_INV_COMMSIZE);
  EXPECT(gaspi_passive_send(0, 0, me, 70000, TMO), GASPI_ERR_INV_COMMSIZE);
  EXPECT(gaspi_passive_receive(0, 0, &from, 8, GASPI_TEST), GASPI_TIMEOUT);
  EXPECT(gaspi_queue_delete(15), GASPI_ERR_INV_QUEUE);
  EXPECT(gaspi_statistic_counter_reset(99), GASPI_ERR_INV_NUM);
  /* queue_size_max is 4 (configured above): the fifth outstanding write is refused. */
  for (int i = 0; i < 4; i++) CHECK(gaspi_write(0, 0, me, 0, 64, 8, 1, TMO));
  EXPECT(gaspi_write(0, 0, me, 0, 64, 8, 1, TMO), GASPI_QUEUE_FULL);
  CHECK(gaspi_wait(1, TMO));
  CHECK(gaspi_write(0, 0, me, 0, 64, 8, 1, TMO));
  CHECK(gaspi_wait(1, TMO));
  /* Past the end is refused whatever the size, 0 included. */
  EXPECT(gaspi_write(0, 4097, me, 0, 0, 0, 0, TMO), GASPI_ERR_INV_LOC_OFF);
  CHECK(gaspi_wait(0, TMO));
}

int main(void) {
  gaspi_rank_t me, n;
  not_initialized();
  configuration();
  CHECK(gaspi_proc_init(TMO));
  EXPECT(gaspi_proc_init(TMO), GASPI_ERR_INITED);
  gaspi_config_t cfg;
  CHECK(gaspi_config_get(&cfg));
  ASSERT(cfg.queue_size_max == 4);
  EXPECT(gaspi_config_set(cfg), GASPI_ERR_INITED);
  CHECK(gaspi_proc_rank(&me));
  CHECK(gaspi_proc_num(&n));
  null_pointers();
  bad_arguments(me, n);
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, TMO));
  CHECK(gaspi_proc_term(TMO));
  EXPECT(gaspi_proc_term(TMO), GASPI_ERR_NOINIT);
  EXPECT(gaspi_barrier(GASPI_GROUP_ALL, TMO), GASPI_ERR_NOINIT);
  gaspi_printf("errors ok\n");
  return 0;
}
