//! The C types of `GASPI.h`, with the same names, widths and values (LP64). A test compiles
//! the header and compares sizes and field offsets with these definitions.

use std::ffi::{c_char, c_int, c_void};

/// `char`: the C character type the standard names `gaspi_char`.
pub type gaspi_char = c_char;
/// `unsigned char`, one byte.
pub type gaspi_uchar = u8;
/// `short`, 16 bits, signed.
pub type gaspi_short = i16;
/// `unsigned short`, 16 bits.
pub type gaspi_ushort = u16;
/// `int`, 32 bits, signed.
pub type gaspi_int = c_int;
/// `unsigned int`, 32 bits.
pub type gaspi_uint = u32;
/// `long`, 64 bits on LP64, signed.
pub type gaspi_long = i64;
/// `unsigned long`, 64 bits on LP64.
pub type gaspi_ulong = u64;
/// `float`, IEEE single precision (the type of `gaspi_version`'s result).
pub type gaspi_float = f32;
/// `double`, IEEE double precision.
pub type gaspi_double = f64;

/// How long a blocking call may wait, in milliseconds; [`GASPI_BLOCK`] waits for ever and
/// [`GASPI_TEST`] checks once. A call that runs out returns `GASPI_TIMEOUT` and may be
/// repeated: it resumes where it stopped.
pub type gaspi_timeout_t = u64;
/// A process of the job, `0..gaspi_proc_num`; a rank outside the job is
/// `GASPI_ERR_INV_RANK`.
pub type gaspi_rank_t = u16;
/// A group of ranks for the collectives: [`GASPI_GROUP_ALL`] or one made with
/// `gaspi_group_create`; an unknown or uncommitted group is `GASPI_ERR_INV_GROUP`.
pub type gaspi_group_t = u8;
/// A count (of ranks, groups, segments, queue entries, list elements…) or a small number
/// such as a verbosity level.
pub type gaspi_number_t = u32;
/// An untyped address in this process: the buffers of the collectives, a segment's base
/// (`gaspi_segment_ptr`), user memory given to `gaspi_segment_bind`/`use`.
pub type gaspi_pointer_t = *mut c_void;
/// The caller's opaque state for a user reduction: `gaspi_allreduce_user` passes it to every
/// call of the [`gaspi_reduce_operation_t`] unchanged and never dereferences it.
pub type gaspi_reduce_state_t = *mut c_void;
/// A communication queue, `0..queue_num` (from the configuration, or made with
/// `gaspi_queue_create`); any other is `GASPI_ERR_INV_QUEUE`.
pub type gaspi_queue_id_t = u8;
/// A size in bytes (of a segment, of a transfer, of a buffer).
pub type gaspi_size_t = u64;
/// The allocation policy of a new segment: `GASPI_MEM_UNINITIALIZED` (0) or
/// `GASPI_MEM_INITIALIZED` (1, zero-filled); new memory is zeroed either way here. Any other
/// value is `GASPI_ERR_INV_NUM`.
pub type gaspi_alloc_t = u64;
/// A segment, `0..segment_max` per rank; one that does not exist (or, remotely, is not
/// registered with this rank) is `GASPI_ERR_INV_SEG`.
pub type gaspi_segment_id_t = u8;
/// A byte offset into a segment; a range past its end is `GASPI_ERR_INV_LOC_OFF` (local) or
/// `GASPI_ERR_INV_REM_OFF` (remote), an atomic's offset not a multiple of 8
/// `GASPI_ERR_UNALIGN_OFF`.
pub type gaspi_offset_t = u64;
/// The 8-byte value of the remote atomics (`gaspi_atomic_fetch_add`,
/// `gaspi_atomic_compare_swap`), unsigned and wrapping.
pub type gaspi_atomic_value_t = u64;
/// A time in milliseconds of the process clock (`gaspi_time_get`).
pub type gaspi_time_t = f32;
/// A tick count of the process clock (`gaspi_time_ticks`), `gaspi_cpu_frequency` ticks per
/// microsecond: the time-stamp counter on x86-64, as in GPI-2.
pub type gaspi_cycles_t = u64;
/// A notification slot of a segment, `0..notification_num`; one beyond is
/// `GASPI_ERR_INV_NOTIF_ID`.
pub type gaspi_notification_id_t = u32;
/// The value written into a notification slot; it must not be 0 (0 means "no notification"
/// and is refused with `GASPI_ERR_INV_NOTIF_VAL`).
pub type gaspi_notification_t = u32;
/// A statistics counter, `0..gaspi_statistic_counter_max`.
pub type gaspi_statistic_counter_t = u32;
/// A NUL-terminated C string; who owns it is said by the call that returns it
/// (`gaspi_print_error`: `malloc`'d, the caller frees it; `gaspi_statistic_counter_info`:
/// static, not to be freed).
pub type gaspi_string_t = *mut c_char;
/// Where user memory given to `gaspi_segment_bind`/`use` lives (host or device memory in
/// GPI-2); accepted and ignored here, where all memory is host memory.
pub type gaspi_memory_description_t = c_int;

/// The result of every GASPI call (a C enum, so an `int`): `GASPI_SUCCESS` (0),
/// `GASPI_TIMEOUT` (1: the call may be repeated), `GASPI_ERROR` (-1) or one of the
/// `GASPI_ERR_*` and `GASPI_QUEUE_FULL` codes of `GASPI.h` (see `gaspi_error_str`).
pub type gaspi_return_t = c_int;
/// The network a configuration asks for (`GASPI_IB` 0, `GASPI_ROCE` 1, `GASPI_ETHERNET` 2,
/// `GASPI_GEMINI` 3, `GASPI_ARIES` 4, `GASPI_OFI` 5); another value is `GASPI_ERR_CONFIG`.
/// Transports are still chosen per peer at init.
pub type gaspi_network_t = c_int;
/// The reduction of `gaspi_allreduce`: `GASPI_OP_MIN` (0), `GASPI_OP_MAX` (1) or
/// `GASPI_OP_SUM` (2).
pub type gaspi_operation_t = c_int;
/// The element type of `gaspi_allreduce`: `GASPI_TYPE_INT` (0), `UINT` (1), `FLOAT` (2),
/// `DOUBLE` (3), `LONG` (4) or `ULONG` (5).
pub type gaspi_datatype_t = c_int;
/// The health of a rank as seen from this one: [`GASPI_STATE_HEALTHY`] or
/// [`GASPI_STATE_CORRUPT`] (a call towards it failed, so its data is not to be trusted).
pub type gaspi_state_t = c_int;
/// An array with one [`gaspi_state_t`] per rank, filled by `gaspi_state_vec_get`.
pub type gaspi_state_vector_t = *mut gaspi_state_t;
/// How init builds the connections (`build_infrastructure`): [`GASPI_TOPOLOGY_NONE`],
/// [`GASPI_TOPOLOGY_STATIC`] or [`GASPI_TOPOLOGY_DYNAMIC`]; another value is
/// `GASPI_ERR_CONFIG`.
pub type gaspi_topology_t = c_int;
/// What a statistics counter is indexed by: [`GASPI_STATISTIC_ARGUMENT_NONE`] (a single
/// value) or `GASPI_STATISTIC_ARGUMENT_RANK` (one value per rank).
pub type gaspi_statistic_argument_t = c_int;

/// `gaspi_reduce_operation_t`: the user reduction of `gaspi_allreduce_user`.
pub type gaspi_reduce_operation_t = Option<
    unsafe extern "C" fn(
        gaspi_pointer_t,
        gaspi_pointer_t,
        gaspi_pointer_t,
        gaspi_reduce_state_t,
        gaspi_number_t,
        gaspi_size_t,
        gaspi_timeout_t,
    ) -> gaspi_return_t,
>;

/// The timeout that waits until the call completes.
pub const GASPI_BLOCK: gaspi_timeout_t = u64::MAX;
/// The timeout that checks once and returns at once (`GASPI_TIMEOUT` if not done).
pub const GASPI_TEST: gaspi_timeout_t = 0;
/// The group of every rank of the job, there from init on.
pub const GASPI_GROUP_ALL: gaspi_group_t = 0;

/// The rank is reachable and every call towards it has succeeded.
pub const GASPI_STATE_HEALTHY: gaspi_state_t = 0;
/// A call towards the rank failed (lost connection, dead process): its state is unknown.
pub const GASPI_STATE_CORRUPT: gaspi_state_t = 1;
/// GPI-2 makes no connection at init (and leaves `GASPI_GROUP_ALL` unset): the program calls
/// `gaspi_connect`. Every pair of ranks is connected at init here regardless.
pub const GASPI_TOPOLOGY_NONE: gaspi_topology_t = 0;
/// Init connects every pair of ranks (the default).
pub const GASPI_TOPOLOGY_STATIC: gaspi_topology_t = 1;
/// GPI-2 connects a pair of ranks on its first communication; every pair is connected at
/// init here.
pub const GASPI_TOPOLOGY_DYNAMIC: gaspi_topology_t = 2;
/// The counter is one value (its `argument` is ignored).
pub const GASPI_STATISTIC_ARGUMENT_NONE: gaspi_statistic_argument_t = 0;

/// `params.ib` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_ib_t {
    /// The InfiniBand device GPI-2 uses, by index (-1: chosen automatically). Kept and
    /// reported; unused here.
    pub netdev_id: gaspi_int,
    /// The path MTU in bytes: 0 (the device's), 1024, 2048 or 4096; another value is
    /// `GASPI_ERR_CONFIG`. Kept; the device's MTU is used.
    pub mtu: gaspi_uint,
    /// Non-zero: GPI-2 checks the state of the port at init. Kept and reported; unused here.
    pub port_check: gaspi_uint,
}

/// `params.tcp` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_tcp_t {
    /// The first TCP port of GPI-2's Ethernet device (default 19000; further ranks on a node
    /// take the next ports). Kept and reported; unused here.
    pub port: gaspi_uint,
}

/// `params.ofi` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_ofi_t {
    /// Non-zero: GPI-2's libfabric device may use shared memory between local ranks. Kept and
    /// reported; unused here.
    pub use_shm: gaspi_int,
    /// Non-zero: GPI-2's libfabric device reports the provider it chose. Kept and reported;
    /// unused here.
    pub provider_info: gaspi_int,
    /// Non-zero: GPI-2's libfabric device asks for automatic progress. Kept and reported;
    /// unused here.
    pub progress_auto: gaspi_int,
}

/// `params` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_params_t {
    /// InfiniBand / RoCE parameters.
    pub ib: gaspi_dev_ib_t,
    /// TCP (Ethernet) parameters.
    pub tcp: gaspi_dev_tcp_t,
    /// libfabric (OFI) parameters.
    pub ofi: gaspi_dev_ofi_t,
}

/// `gaspi_dev_config_t`: device parameters (kept and reported; the TCP/shared-memory
/// runtime has no device to configure).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_config_t {
    /// The network these parameters are for.
    pub network_type: gaspi_network_t,
    /// The parameters of each kind of network.
    pub params: gaspi_dev_params_t,
}

/// `gaspi_config_t`, field for field as in the reference header.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_config_t {
    /// Non-zero: GPI-2's logging is on. Kept and reported; unused here.
    pub logger: gaspi_uint,
    /// The TCP port of the service network (job start-up). Kept and reported; the runtime
    /// takes it from `GASPI_SN_PORT` (default 10840).
    pub sn_port: gaspi_uint,
    /// Non-zero: GPI-2 displays network information at init. Kept and reported; unused here.
    pub net_info: gaspi_uint,
    /// Non-zero: the program has set `network` itself. Kept and reported; unused here.
    pub user_net: gaspi_uint,
    /// Non-zero: GPI-2 keeps the service-network connections open after init. Kept and
    /// reported; unused here.
    pub sn_persistent: gaspi_int,
    /// Milliseconds the internal service-network operations may take: here, the connection
    /// set-up at init.
    pub sn_timeout: gaspi_timeout_t,
    /// Device parameters ([`gaspi_dev_config_t`]).
    pub dev_config: gaspi_dev_config_t,
    /// The network to use ([`gaspi_network_t`]); transports are chosen per peer at init.
    pub network: gaspi_network_t,
    /// Requests a queue holds before posting returns `GASPI_QUEUE_FULL` (1..=4096).
    pub queue_size_max: gaspi_uint,
    /// Communication queues created at init (1..=16).
    pub queue_num: gaspi_uint,
    /// Groups there can be, `GASPI_GROUP_ALL` included (0..=256; 0: 32).
    pub group_max: gaspi_number_t,
    /// Segments per rank (1..=255): segment ids are below it.
    pub segment_max: gaspi_number_t,
    /// Bytes of one write or read (0..=1 GiB; 0: 1 GiB).
    pub transfer_size_max: gaspi_size_t,
    /// Notification slots per segment (0: 65536); each takes 4 bytes of every segment.
    pub notification_num: gaspi_number_t,
    /// Passive messages in flight to a rank, which its inbox holds (0: 4096).
    pub passive_queue_size_max: gaspi_number_t,
    /// Bytes of one passive message (0..=65535; 0: 65535).
    pub passive_transfer_size_max: gaspi_number_t,
    /// Bytes of the internal buffer of the collectives: one round of a small allreduce moves
    /// at most this many (clamped to 64 B..=1 MiB when used).
    pub allreduce_buf_size: gaspi_size_t,
    /// Elements of one `gaspi_allreduce(_user)` (0: 255); more run in several rounds.
    pub allreduce_elem_max: gaspi_number_t,
    /// Elements of one list call (`gaspi_write_list` and the like, 1..=255).
    pub rw_list_elem_max: gaspi_number_t,
    /// How init connects the ranks ([`gaspi_topology_t`]; every pair is connected here).
    pub build_infrastructure: gaspi_topology_t,
    /// The program's own value: kept and handed back by `gaspi_config_get`, never
    /// dereferenced.
    pub user_defined: *mut c_void,
}

// SAFETY: `user_defined` is an opaque value the runtime stores and hands back; it is never
// dereferenced, so sharing the struct between threads cannot cause a data race through it.
unsafe impl Send for gaspi_config_t {}
