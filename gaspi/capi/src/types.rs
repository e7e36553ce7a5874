//! The C types of `GASPI.h`, with the same names, widths and values (LP64). A test compiles
//! the header and compares sizes and field offsets with these definitions.

use std::ffi::{c_char, c_int, c_void};

pub type gaspi_char = c_char;
pub type gaspi_uchar = u8;
pub type gaspi_short = i16;
pub type gaspi_ushort = u16;
pub type gaspi_int = c_int;
pub type gaspi_uint = u32;
pub type gaspi_long = i64;
pub type gaspi_ulong = u64;
pub type gaspi_float = f32;
pub type gaspi_double = f64;

pub type gaspi_timeout_t = u64;
pub type gaspi_rank_t = u16;
pub type gaspi_group_t = u8;
pub type gaspi_number_t = u32;
pub type gaspi_pointer_t = *mut c_void;
pub type gaspi_reduce_state_t = *mut c_void;
pub type gaspi_queue_id_t = u8;
pub type gaspi_size_t = u64;
pub type gaspi_alloc_t = u64;
pub type gaspi_segment_id_t = u8;
pub type gaspi_offset_t = u64;
pub type gaspi_atomic_value_t = u64;
pub type gaspi_time_t = f32;
pub type gaspi_cycles_t = u64;
pub type gaspi_notification_id_t = u32;
pub type gaspi_notification_t = u32;
pub type gaspi_statistic_counter_t = u32;
pub type gaspi_string_t = *mut c_char;
pub type gaspi_memory_description_t = c_int;

/// C enums are `int`.
pub type gaspi_return_t = c_int;
pub type gaspi_network_t = c_int;
pub type gaspi_operation_t = c_int;
pub type gaspi_datatype_t = c_int;
pub type gaspi_state_t = c_int;
pub type gaspi_state_vector_t = *mut gaspi_state_t;
pub type gaspi_topology_t = c_int;
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

pub const GASPI_BLOCK: gaspi_timeout_t = u64::MAX;
pub const GASPI_TEST: gaspi_timeout_t = 0;
pub const GASPI_GROUP_ALL: gaspi_group_t = 0;

pub const GASPI_STATE_HEALTHY: gaspi_state_t = 0;
pub const GASPI_STATE_CORRUPT: gaspi_state_t = 1;
pub const GASPI_TOPOLOGY_NONE: gaspi_topology_t = 0;
pub const GASPI_TOPOLOGY_STATIC: gaspi_topology_t = 1;
pub const GASPI_TOPOLOGY_DYNAMIC: gaspi_topology_t = 2;
pub const GASPI_STATISTIC_ARGUMENT_NONE: gaspi_statistic_argument_t = 0;

/// `params.ib` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_ib_t {
    pub netdev_id: gaspi_int,
    pub mtu: gaspi_uint,
    pub port_check: gaspi_uint,
}

/// `params.tcp` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_tcp_t {
    pub port: gaspi_uint,
}

/// `params.ofi` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_ofi_t {
    pub use_shm: gaspi_int,
    pub provider_info: gaspi_int,
    pub progress_auto: gaspi_int,
}

/// `params` of `gaspi_dev_config_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_params_t {
    pub ib: gaspi_dev_ib_t,
    pub tcp: gaspi_dev_tcp_t,
    pub ofi: gaspi_dev_ofi_t,
}

/// `gaspi_dev_config_t`: device parameters (kept and reported; the TCP/shared-memory
/// runtime has no device to configure).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_dev_config_t {
    pub network_type: gaspi_network_t,
    pub params: gaspi_dev_params_t,
}

/// `gaspi_config_t`, field for field as in the reference header.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct gaspi_config_t {
    pub logger: gaspi_uint,
    pub sn_port: gaspi_uint,
    pub net_info: gaspi_uint,
    pub user_net: gaspi_uint,
    pub sn_persistent: gaspi_int,
    pub sn_timeout: gaspi_timeout_t,
    pub dev_config: gaspi_dev_config_t,
    pub network: gaspi_network_t,
    pub queue_size_max: gaspi_uint,
    pub queue_num: gaspi_uint,
    pub group_max: gaspi_number_t,
    pub segment_max: gaspi_number_t,
    pub transfer_size_max: gaspi_size_t,
    pub notification_num: gaspi_number_t,
    pub passive_queue_size_max: gaspi_number_t,
    pub passive_transfer_size_max: gaspi_number_t,
    pub allreduce_buf_size: gaspi_size_t,
    pub allreduce_elem_max: gaspi_number_t,
    pub rw_list_elem_max: gaspi_number_t,
    pub build_infrastructure: gaspi_topology_t,
    pub user_defined: *mut c_void,
}

// SAFETY: `user_defined` is an opaque value the runtime stores and hands back; it is never
// dereferenced, so sharing the struct between threads cannot cause a data race through it.
unsafe impl Send for gaspi_config_t {}
