//! The GASPI return codes of the C interface (`gaspi_return_t`), with the values of
//! GPI-2's `GASPI.h`: each constant is the standard's name without its `GASPI_` prefix
//! (`ERR_INV_SEG` is `GASPI_ERR_INV_SEG`), and [`error_str`] gives its
//! description. [`Error::code`](super::Error::code) maps every error to one of them.
#![allow(
    missing_docs,
    reason = "the standard's names and values, as the module docs say"
)]

pub const ERROR: i32 = -1;
pub const SUCCESS: i32 = 0;
pub const TIMEOUT: i32 = 1;
pub const ERR_EMFILE: i32 = 2;
pub const ERR_ENV: i32 = 3;
pub const ERR_SN_PORT: i32 = 4;
pub const ERR_CONFIG: i32 = 5;
pub const ERR_NOINIT: i32 = 6;
pub const ERR_INITED: i32 = 7;
pub const ERR_NULLPTR: i32 = 8;
pub const ERR_INV_SEGSIZE: i32 = 9;
pub const ERR_INV_SEG: i32 = 10;
pub const ERR_INV_GROUP: i32 = 11;
pub const ERR_INV_RANK: i32 = 12;
pub const ERR_INV_QUEUE: i32 = 13;
pub const ERR_INV_LOC_OFF: i32 = 14;
pub const ERR_INV_REM_OFF: i32 = 15;
pub const ERR_INV_COMMSIZE: i32 = 16;
pub const ERR_INV_NOTIF_VAL: i32 = 17;
pub const ERR_INV_NOTIF_ID: i32 = 18;
pub const ERR_INV_NUM: i32 = 19;
pub const ERR_INV_SIZE: i32 = 20;
pub const ERR_MANY_SEG: i32 = 21;
pub const ERR_MANY_GRP: i32 = 22;
pub const QUEUE_FULL: i32 = 23;
pub const ERR_UNALIGN_OFF: i32 = 24;
pub const ERR_ACTIVE_COLL: i32 = 25;
pub const ERR_DEVICE: i32 = 26;
pub const ERR_SN: i32 = 27;
pub const ERR_MEMALLOC: i32 = 28;

/// The standard's description of a return code (what `gaspi_error_str` returns).
pub fn error_str(code: i32) -> &'static str {
    match code {
        ERROR => "general error",
        SUCCESS => "success",
        TIMEOUT => "timeout",
        ERR_EMFILE => "too many open files",
        ERR_ENV => "incorrect environment vars",
        ERR_SN_PORT => "sn port already in use",
        ERR_CONFIG => "invalid parameter in configuration (gaspi_config_t)",
        ERR_NOINIT => "invalid function before initialization",
        ERR_INITED => "invalid function after initialization",
        ERR_NULLPTR => "null pointer reference",
        ERR_INV_SEGSIZE => "invalid segment size",
        ERR_INV_SEG => "invalid segment",
        ERR_INV_GROUP => "invalid group",
        ERR_INV_RANK => "invalid rank",
        ERR_INV_QUEUE => "invalid queue",
        ERR_INV_LOC_OFF => "invalid local offset",
        ERR_INV_REM_OFF => "invalid remote offset",
        ERR_INV_COMMSIZE => "invalid size for communication",
        ERR_INV_NOTIF_VAL => "invalid notification value",
        ERR_INV_NOTIF_ID => "invalid notification id",
        ERR_INV_NUM => "invalid number count",
        ERR_INV_SIZE => "invalid size",
        ERR_MANY_SEG => "too many segments",
        ERR_MANY_GRP => "too many groups",
        QUEUE_FULL => "queue is full",
        ERR_UNALIGN_OFF => "unaligned (8 bytes) offset",
        ERR_ACTIVE_COLL => "other collective is still active",
        ERR_DEVICE => "device operation error",
        ERR_SN => "sn operation failed",
        ERR_MEMALLOC => "memory allocation failed",
        _ => "unknown error code",
    }
}
