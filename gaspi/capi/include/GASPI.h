/*
 * GASPI.h -- the GASPI C interface of tarantella-rs (libgaspi).
 *
 * Source compatible with the reference implementation GPI-2: same names, integer types,
 * constants and return codes. Link with -lgaspi (see gaspi.pc). Fortran bindings are not
 * provided. Every function returns a gaspi_return_t: GASPI_SUCCESS, GASPI_TIMEOUT (the call
 * may be repeated and resumes) or an error code; the text of a code is gaspi_error_str()
 * and the detailed message of the last failure tnt_gaspi_last_error() (GASPI_Ext.h).
 *
 * Kept in sync with the library by the tests of gaspi/capi (prototypes vs. exports, type
 * sizes and struct offsets vs. the Rust definitions).
 */
#ifndef TARANTELLA_GASPI_H
#define TARANTELLA_GASPI_H

#ifdef __cplusplus
extern "C" {
#endif

/* Scalar types */
typedef char gaspi_char;
typedef unsigned char gaspi_uchar;
typedef short gaspi_short;
typedef unsigned short gaspi_ushort;
typedef int gaspi_int;
typedef unsigned int gaspi_uint;
typedef long gaspi_long;
typedef unsigned long gaspi_ulong;
typedef float gaspi_float;
typedef double gaspi_double;

typedef unsigned long gaspi_timeout_t;        /* milliseconds, or GASPI_BLOCK / GASPI_TEST */
typedef unsigned short gaspi_rank_t;
typedef unsigned char gaspi_group_t;
typedef unsigned int gaspi_number_t;
typedef void *gaspi_pointer_t;
typedef void *gaspi_reduce_state_t;
typedef unsigned char gaspi_queue_id_t;
typedef unsigned long gaspi_size_t;
typedef unsigned long gaspi_alloc_t;
typedef unsigned char gaspi_segment_id_t;
typedef unsigned long gaspi_offset_t;
typedef unsigned long gaspi_atomic_value_t;
typedef float gaspi_time_t;                   /* milliseconds */
typedef unsigned long gaspi_cycles_t;         /* nanoseconds here */
typedef unsigned int gaspi_notification_id_t;
typedef unsigned int gaspi_notification_t;
typedef unsigned int gaspi_statistic_counter_t;
typedef char *gaspi_string_t;
typedef int gaspi_memory_description_t;

/* Typed constants */
static const gaspi_group_t GASPI_GROUP_ALL = 0;
static const gaspi_timeout_t GASPI_BLOCK = 0xffffffffffffffffUL;
static const gaspi_timeout_t GASPI_TEST = 0x0UL;

/* Return codes */
typedef enum {
  GASPI_ERROR = -1,
  GASPI_SUCCESS = 0,
  GASPI_TIMEOUT = 1,
  GASPI_ERR_EMFILE = 2,
  GASPI_ERR_ENV = 3,
  GASPI_ERR_SN_PORT = 4,
  GASPI_ERR_CONFIG = 5,
  GASPI_ERR_NOINIT = 6,
  GASPI_ERR_INITED = 7,
  GASPI_ERR_NULLPTR = 8,
  GASPI_ERR_INV_SEGSIZE = 9,
  GASPI_ERR_INV_SEG = 10,
  GASPI_ERR_INV_GROUP = 11,
  GASPI_ERR_INV_RANK = 12,
  GASPI_ERR_INV_QUEUE = 13,
  GASPI_ERR_INV_LOC_OFF = 14,
  GASPI_ERR_INV_REM_OFF = 15,
  GASPI_ERR_INV_COMMSIZE = 16,
  GASPI_ERR_INV_NOTIF_VAL = 17,
  GASPI_ERR_INV_NOTIF_ID = 18,
  GASPI_ERR_INV_NUM = 19,
  GASPI_ERR_INV_SIZE = 20,
  GASPI_ERR_MANY_SEG = 21,
  GASPI_ERR_MANY_GRP = 22,
  GASPI_QUEUE_FULL = 23,
  GASPI_ERR_UNALIGN_OFF = 24,
  GASPI_ERR_ACTIVE_COLL = 25,
  GASPI_ERR_DEVICE = 26,
  GASPI_ERR_SN = 27,
  GASPI_ERR_MEMALLOC = 28
} gaspi_return_t;

/* Network types (this implementation runs over Ethernet: TCP and shared memory) */
typedef enum {
  GASPI_IB = 0,
  GASPI_ROCE = 1,
  GASPI_ETHERNET = 2,
  GASPI_GEMINI = 3,
  GASPI_ARIES = 4,
  GASPI_OFI = 5
} gaspi_network_t;

/* Device parameters: validated (IB MTU 1024/2048/4096), kept and reported back. */
typedef struct {
  gaspi_network_t network_type;
  struct {
    struct {
      gaspi_int netdev_id;
      gaspi_uint mtu;
      gaspi_uint port_check;
    } ib;
    struct {
      gaspi_uint port;
    } tcp;
    struct {
      gaspi_int use_shm;
      gaspi_int provider_info;
      gaspi_int progress_auto;
    } ofi;
  } params;
} gaspi_dev_config_t;

/* Collective reductions */
typedef enum { GASPI_OP_MIN = 0, GASPI_OP_MAX = 1, GASPI_OP_SUM = 2 } gaspi_operation_t;

typedef enum {
  GASPI_TYPE_INT = 0,
  GASPI_TYPE_UINT = 1,
  GASPI_TYPE_FLOAT = 2,
  GASPI_TYPE_DOUBLE = 3,
  GASPI_TYPE_LONG = 4,
  GASPI_TYPE_ULONG = 5
} gaspi_datatype_t;

/* Health of a rank as seen from this one */
typedef enum { GASPI_STATE_HEALTHY = 0, GASPI_STATE_CORRUPT = 1 } gaspi_state_t;
typedef gaspi_state_t *gaspi_state_vector_t;

/* Segment allocation policy (new memory is zeroed either way) */
enum gaspi_alloc_policy_flags {
  GASPI_MEM_UNINITIALIZED = 0,
  GASPI_MEM_INITIALIZED = 1
};
#define GASPI_ALLOC_DEFAULT GASPI_MEM_UNINITIALIZED

/* Connection set-up at init (connections to all peers are always made at init) */
typedef enum {
  GASPI_TOPOLOGY_NONE = 0,
  GASPI_TOPOLOGY_STATIC = 1,
  GASPI_TOPOLOGY_DYNAMIC = 2
} gaspi_topology_t;

/* Configuration: gaspi_config_get, change fields, gaspi_config_set, then gaspi_proc_init. */
typedef struct gaspi_config {
  gaspi_uint logger;
  gaspi_uint sn_port;
  gaspi_uint net_info;
  gaspi_uint user_net;
  gaspi_int sn_persistent;
  gaspi_timeout_t sn_timeout;
  gaspi_dev_config_t dev_config;
  gaspi_network_t network;
  gaspi_uint queue_size_max;
  gaspi_uint queue_num;
  gaspi_number_t group_max;
  gaspi_number_t segment_max;
  gaspi_size_t transfer_size_max;
  gaspi_number_t notification_num;
  gaspi_number_t passive_queue_size_max;
  gaspi_number_t passive_transfer_size_max;
  gaspi_size_t allreduce_buf_size;
  gaspi_number_t allreduce_elem_max;
  gaspi_number_t rw_list_elem_max;
  gaspi_topology_t build_infrastructure;
  void *user_defined;
} gaspi_config_t;

/* Statistics */
typedef enum {
  GASPI_STATISTIC_ARGUMENT_NONE,
  GASPI_STATISTIC_ARGUMENT_RANK
} gaspi_statistic_argument_t;

/* User reduction of gaspi_allreduce_user: result = op_one (+) op_two, num elements. */
typedef gaspi_return_t (*gaspi_reduce_operation_t)(gaspi_pointer_t const operand_one,
                                                   gaspi_pointer_t const operand_two,
                                                   gaspi_pointer_t const result,
                                                   gaspi_reduce_state_t const state,
                                                   const gaspi_number_t num,
                                                   const gaspi_size_t element_size,
                                                   const gaspi_timeout_t timeout_ms);

/* Configuration and process management */
gaspi_return_t gaspi_config_get(gaspi_config_t *const config);
gaspi_return_t gaspi_config_set(const gaspi_config_t new_config);
gaspi_return_t gaspi_version(float *version);
gaspi_return_t gaspi_proc_init(const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_proc_term(const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_proc_rank(gaspi_rank_t *const rank);
gaspi_return_t gaspi_proc_num(gaspi_rank_t *const proc_num);
gaspi_return_t gaspi_proc_kill(const gaspi_rank_t rank, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_connect(const gaspi_rank_t rank, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_disconnect(const gaspi_rank_t rank, const gaspi_timeout_t timeout_ms);

/* Groups */
gaspi_return_t gaspi_group_create(gaspi_group_t *const group);
gaspi_return_t gaspi_group_delete(const gaspi_group_t group);
/* group_add to a committed group is allowed (as in GPI-2): the group is then refused by its
 * collectives (GASPI_ERR_INV_GROUP) until every member has committed it again. */
gaspi_return_t gaspi_group_add(const gaspi_group_t group, const gaspi_rank_t rank);
gaspi_return_t gaspi_group_commit(const gaspi_group_t group, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_group_num(gaspi_number_t *const group_num);
gaspi_return_t gaspi_group_size(const gaspi_group_t group, gaspi_number_t *const group_size);
gaspi_return_t gaspi_group_ranks(const gaspi_group_t group, gaspi_rank_t *const group_ranks);
gaspi_return_t gaspi_group_max(gaspi_number_t *const group_max);

/* Segments */
gaspi_return_t gaspi_segment_alloc(const gaspi_segment_id_t segment_id, const gaspi_size_t size,
                                   const gaspi_alloc_t alloc_policy);
gaspi_return_t gaspi_segment_delete(const gaspi_segment_id_t segment_id);
gaspi_return_t gaspi_segment_register(const gaspi_segment_id_t segment_id,
                                      const gaspi_rank_t rank, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_segment_create(const gaspi_segment_id_t segment_id, const gaspi_size_t size,
                                    const gaspi_group_t group, const gaspi_timeout_t timeout_ms,
                                    const gaspi_alloc_t alloc_policy);
/* bind/use with pointer == NULL: the library allocates the memory (as GPI-2 1.5 does). */
gaspi_return_t gaspi_segment_bind(gaspi_segment_id_t const segment_id,
                                  gaspi_pointer_t const pointer, gaspi_size_t const size,
                                  gaspi_memory_description_t const memory_description);
gaspi_return_t gaspi_segment_use(gaspi_segment_id_t const segment_id,
                                 gaspi_pointer_t const pointer, gaspi_size_t const size,
                                 gaspi_group_t const group, gaspi_timeout_t const timeout,
                                 gaspi_memory_description_t const memory_description);
gaspi_return_t gaspi_segment_num(gaspi_number_t *const segment_num);
gaspi_return_t gaspi_segment_list(const gaspi_number_t num,
                                  gaspi_segment_id_t *const segment_id_list);
gaspi_return_t gaspi_segment_ptr(const gaspi_segment_id_t segment_id, gaspi_pointer_t *ptr);
gaspi_return_t gaspi_segment_size(const gaspi_segment_id_t segment_id, const gaspi_rank_t rank,
                                  gaspi_size_t *const size);
gaspi_return_t gaspi_segment_max(gaspi_number_t *const segment_max);

/* One-sided communication */
gaspi_return_t gaspi_write(const gaspi_segment_id_t segment_id_local,
                           const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                           const gaspi_segment_id_t segment_id_remote,
                           const gaspi_offset_t offset_remote, const gaspi_size_t size,
                           const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_read(const gaspi_segment_id_t segment_id_local,
                          const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                          const gaspi_segment_id_t segment_id_remote,
                          const gaspi_offset_t offset_remote, const gaspi_size_t size,
                          const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_write_list(const gaspi_number_t num, gaspi_segment_id_t *const segment_id_local,
                                gaspi_offset_t *const offset_local, const gaspi_rank_t rank,
                                gaspi_segment_id_t *const segment_id_remote,
                                gaspi_offset_t *const offset_remote, gaspi_size_t *const size,
                                const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_read_list(const gaspi_number_t num, gaspi_segment_id_t *const segment_id_local,
                               gaspi_offset_t *const offset_local, const gaspi_rank_t rank,
                               gaspi_segment_id_t *const segment_id_remote,
                               gaspi_offset_t *const offset_remote, gaspi_size_t *const size,
                               const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_wait(const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);

/* Collectives */
gaspi_return_t gaspi_barrier(const gaspi_group_t group, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_allreduce(const gaspi_pointer_t buffer_send, gaspi_pointer_t const buffer_receive,
                               const gaspi_number_t num, const gaspi_operation_t operation,
                               const gaspi_datatype_t datatyp, const gaspi_group_t group,
                               const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_allreduce_user(const gaspi_pointer_t buffer_send,
                                    gaspi_pointer_t const buffer_receive, const gaspi_number_t num,
                                    const gaspi_size_t element_size,
                                    gaspi_reduce_operation_t const reduce_operation,
                                    gaspi_reduce_state_t const reduce_state,
                                    const gaspi_group_t group, const gaspi_timeout_t timeout_ms);

/* Atomics (8-byte aligned offsets) */
gaspi_return_t gaspi_atomic_fetch_add(const gaspi_segment_id_t segment_id, const gaspi_offset_t offset,
                                      const gaspi_rank_t rank, const gaspi_atomic_value_t val_add,
                                      gaspi_atomic_value_t *const val_old,
                                      const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_atomic_compare_swap(const gaspi_segment_id_t segment_id,
                                         const gaspi_offset_t offset, const gaspi_rank_t rank,
                                         const gaspi_atomic_value_t comparator,
                                         const gaspi_atomic_value_t val_new,
                                         gaspi_atomic_value_t *const val_old,
                                         const gaspi_timeout_t timeout_ms);

/* Passive communication */
gaspi_return_t gaspi_passive_send(const gaspi_segment_id_t segment_id_local,
                                  const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                                  const gaspi_size_t size, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_passive_receive(const gaspi_segment_id_t segment_id_local,
                                     const gaspi_offset_t offset_local, gaspi_rank_t *const rem_rank,
                                     const gaspi_size_t size, const gaspi_timeout_t timeout_ms);

/* Notifications */
gaspi_return_t gaspi_notify(const gaspi_segment_id_t segment_id_remote, const gaspi_rank_t rank,
                            const gaspi_notification_id_t notification_id,
                            const gaspi_notification_t notification_value,
                            const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_notify_waitsome(const gaspi_segment_id_t segment_id_local,
                                     const gaspi_notification_id_t notification_begin,
                                     const gaspi_number_t num,
                                     gaspi_notification_id_t *const first_id,
                                     const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_notify_reset(const gaspi_segment_id_t segment_id_local,
                                  const gaspi_notification_id_t notification_id,
                                  gaspi_notification_t *const old_notification_val);
gaspi_return_t gaspi_write_notify(const gaspi_segment_id_t segment_id_local,
                                  const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                                  const gaspi_segment_id_t segment_id_remote,
                                  const gaspi_offset_t offset_remote, const gaspi_size_t size,
                                  const gaspi_notification_id_t notification_id,
                                  const gaspi_notification_t notification_value,
                                  const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_write_list_notify(const gaspi_number_t num,
                                       gaspi_segment_id_t *const segment_id_local,
                                       gaspi_offset_t *const offset_local, const gaspi_rank_t rank,
                                       gaspi_segment_id_t *const segment_id_remote,
                                       gaspi_offset_t *const offset_remote,
                                       gaspi_size_t *const size,
                                       const gaspi_segment_id_t segment_id_notification,
                                       const gaspi_notification_id_t notification_id,
                                       const gaspi_notification_t notification_value,
                                       const gaspi_queue_id_t queue,
                                       const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_read_notify(const gaspi_segment_id_t segment_id_local,
                                 const gaspi_offset_t offset_local, const gaspi_rank_t rank,
                                 const gaspi_segment_id_t segment_id_remote,
                                 const gaspi_offset_t offset_remote, const gaspi_size_t size,
                                 const gaspi_notification_id_t notification_id,
                                 const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_read_list_notify(const gaspi_number_t num,
                                      gaspi_segment_id_t *const segment_id_local,
                                      gaspi_offset_t *const offset_local, const gaspi_rank_t rank,
                                      gaspi_segment_id_t *const segment_id_remote,
                                      gaspi_offset_t *const offset_remote,
                                      gaspi_size_t *const size,
                                      const gaspi_segment_id_t segment_id_notification,
                                      const gaspi_notification_id_t notification_id,
                                      const gaspi_queue_id_t queue,
                                      const gaspi_timeout_t timeout_ms);

/* Queues */
gaspi_return_t gaspi_queue_purge(const gaspi_queue_id_t queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_queue_size(const gaspi_queue_id_t queue, gaspi_number_t *const queue_size);
gaspi_return_t gaspi_queue_num(gaspi_number_t *const queue_num);
gaspi_return_t gaspi_queue_size_max(gaspi_number_t *const queue_size_max);
gaspi_return_t gaspi_queue_create(gaspi_queue_id_t *const queue, const gaspi_timeout_t timeout_ms);
gaspi_return_t gaspi_queue_delete(const gaspi_queue_id_t queue);
gaspi_return_t gaspi_queue_max(gaspi_number_t *const queue_max);

/* Limits and information */
gaspi_return_t gaspi_transfer_size_min(gaspi_size_t *const transfer_size_min);
gaspi_return_t gaspi_transfer_size_max(gaspi_size_t *const transfer_size_max);
gaspi_return_t gaspi_notification_num(gaspi_number_t *const notification_num);
gaspi_return_t gaspi_passive_transfer_size_min(gaspi_size_t *const passive_transfer_size_min);
gaspi_return_t gaspi_passive_transfer_size_max(gaspi_size_t *const passive_transfer_size_max);
gaspi_return_t gaspi_atomic_max(gaspi_atomic_value_t *max_value);
gaspi_return_t gaspi_allreduce_buf_size(gaspi_size_t *const buf_size);
gaspi_return_t gaspi_allreduce_elem_max(gaspi_number_t *const elem_max);
gaspi_return_t gaspi_network_type(gaspi_network_t *const network_type);
gaspi_return_t gaspi_build_infrastructure(gaspi_number_t *const build);
gaspi_return_t gaspi_time_ticks(gaspi_cycles_t *const ticks);
gaspi_return_t gaspi_time_get(gaspi_time_t *const wtime);
/* The message is allocated with malloc(); release it with free(). */
gaspi_return_t gaspi_print_error(gaspi_return_t error_code, gaspi_string_t *error_message);
gaspi_return_t gaspi_state_vec_get(gaspi_state_vector_t state_vector);

/* Statistics (counters are kept at every verbosity level) */
gaspi_return_t gaspi_statistic_verbosity_level(gaspi_number_t verbosity_level);
gaspi_return_t gaspi_statistic_counter_max(gaspi_number_t *counter_max);
gaspi_return_t gaspi_statistic_counter_info(gaspi_statistic_counter_t counter,
                                            gaspi_statistic_argument_t *counter_argument,
                                            gaspi_string_t *counter_name,
                                            gaspi_string_t *counter_description,
                                            gaspi_number_t *verbosity_level);
gaspi_return_t gaspi_statistic_counter_get(gaspi_statistic_counter_t counter,
                                           gaspi_number_t argument, unsigned long *value);
gaspi_return_t gaspi_statistic_counter_reset(gaspi_statistic_counter_t counter);

#ifdef __cplusplus
}
#endif

#endif /* TARANTELLA_GASPI_H */
