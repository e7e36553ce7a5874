//! Groups, collectives, atomics and passive communication.

use std::ffi::c_void;

use rt::{ElementType, Error, Group, Rank, ReduceOp, Result, SegmentId, Timeout};

use crate::ffi::{need, out, with_ctx, write_array};
use crate::gaspi_api;
use crate::types::*;

fn op_from_c(op: gaspi_operation_t) -> Result<ReduceOp> {
    match op {
        0 => Ok(ReduceOp::Min),
        1 => Ok(ReduceOp::Max),
        2 => Ok(ReduceOp::Sum),
        other => Err(Error::InvalidNumber(format!(
            "reduction operation {other} (GASPI_OP_MIN, GASPI_OP_MAX or GASPI_OP_SUM)"
        ))),
    }
}

fn type_from_c(t: gaspi_datatype_t) -> Result<ElementType> {
    Ok(match t {
        0 => ElementType::I32,
        1 => ElementType::U32,
        2 => ElementType::F32,
        3 => ElementType::F64,
        4 => ElementType::I64,
        5 => ElementType::U64,
        other => {
            return Err(Error::InvalidNumber(format!(
                "element type {other} (GASPI_TYPE_INT .. GASPI_TYPE_ULONG)"
            )))
        }
    })
}

/// Runs `f` with the `len` bytes at `send` and at `recv`. When the two ranges overlap (an
/// in-place reduction) the input is copied first, so the slices never alias.
fn with_buffers(
    send: *const c_void,
    recv: *mut c_void,
    len: usize,
    f: impl FnOnce(&[u8], &mut [u8]) -> Result<()>,
) -> Result<()> {
    need(send, "buffer_send")?;
    need(recv, "buffer_receive")?;
    let (s, r) = (send as usize, recv as usize);
    let overlap = s < r.saturating_add(len) && r < s.saturating_add(len);
    // SAFETY: both pointers are non-null and, by the contract of the exported function,
    // valid for `len` bytes. `input` is only borrowed while `output` does not overlap it;
    // otherwise it is copied out before `output` is created.
    unsafe {
        let output = std::slice::from_raw_parts_mut(recv.cast::<u8>(), len);
        if overlap {
            let copy = std::slice::from_raw_parts(send.cast::<u8>(), len).to_vec();
            f(&copy, output)
        } else {
            f(std::slice::from_raw_parts(send.cast::<u8>(), len), output)
        }
    }
}

gaspi_api! { COLL_API;
    fn gaspi_group_create(group: *mut gaspi_group_t) {
        need(group, "group")?;
        with_ctx(|c| out(group, "group", c.group_create()?.0))
    }

    fn gaspi_group_delete(group: gaspi_group_t) {
        with_ctx(|c| c.group_delete(Group(group)))
    }

    /// `gaspi_group_add`: also to a committed group, as in GPI-2; the group then answers its
    /// collectives and segment creation with `GASPI_ERR_INV_GROUP` until every member has
    /// called `gaspi_group_commit` again (`rt::Error::GroupChanged`).
    fn gaspi_group_add(group: gaspi_group_t, rank: gaspi_rank_t) {
        with_ctx(|c| c.group_add(Group(group), Rank(rank)))
    }

    fn gaspi_group_commit(group: gaspi_group_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.group_commit(Group(group), Timeout(timeout_ms)))
    }

    fn gaspi_group_num(group_num: *mut gaspi_number_t) {
        need(group_num, "group_num")?;
        with_ctx(|c| out(group_num, "group_num", c.group_num()))
    }

    fn gaspi_group_size(group: gaspi_group_t, group_size: *mut gaspi_number_t) {
        need(group_size, "group_size")?;
        with_ctx(|c| out(group_size, "group_size", c.group_size(Group(group))?))
    }

    /// `gaspi_group_ranks`: writes the group's ranks, ascending (`gaspi_group_size` many).
    fn gaspi_group_ranks(group: gaspi_group_t, group_ranks: *mut gaspi_rank_t) {
        need(group_ranks, "group_ranks")?;
        with_ctx(|c| {
            let ranks: Vec<u16> = c.group_members(Group(group))?.iter().map(|r| r.0).collect();
            write_array(group_ranks, &ranks, "group_ranks")
        })
    }

    fn gaspi_group_max(group_max: *mut gaspi_number_t) {
        need(group_max, "group_max")?;
        with_ctx(|c| out(group_max, "group_max", c.group_max()))
    }

    fn gaspi_barrier(group: gaspi_group_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.barrier(Group(group), Timeout(timeout_ms)))
    }

    fn gaspi_allreduce(
        buffer_send: gaspi_pointer_t,
        buffer_receive: gaspi_pointer_t,
        num: gaspi_number_t,
        operation: gaspi_operation_t,
        datatyp: gaspi_datatype_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let op = op_from_c(operation)?;
        let ty = type_from_c(datatyp)?;
        let len = (num as usize).saturating_mul(ty.size());
        with_ctx(|c| {
            // Before the buffers become slices of `len` bytes.
            if num > c.allreduce_elem_max() {
                return Err(Error::InvalidNumber(format!(
                    "allreduce of {num} elements (at most {})", c.allreduce_elem_max()
                )));
            }
            with_buffers(buffer_send, buffer_receive, len, |i, o| {
                c.allreduce_raw(i, o, ty, op, Group(group), Timeout(timeout_ms))
            })
        })
    }

    /// `gaspi_allreduce_user`: `reduce_operation(a, b, result, reduce_state, num,
    /// element_size, timeout)` combines two partial results; a non-zero return fails the
    /// reduction.
    fn gaspi_allreduce_user(
        buffer_send: gaspi_pointer_t,
        buffer_receive: gaspi_pointer_t,
        num: gaspi_number_t,
        element_size: gaspi_size_t,
        reduce_operation: gaspi_reduce_operation_t,
        reduce_state: gaspi_reduce_state_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let f = reduce_operation.ok_or(Error::NullPointer("reduce_operation"))?;
        let elem = usize::try_from(element_size)
            .map_err(|_| Error::InvalidSize(format!("element size {element_size}")))?;
        with_ctx(|c| {
            let len = (num as u64).saturating_mul(element_size);
            // Before the buffers become slices of `len` bytes.
            if num > c.allreduce_elem_max() {
                return Err(Error::InvalidNumber(format!(
                    "allreduce_user of {num} elements (at most {})",
                    c.allreduce_elem_max()
                )));
            }
            if len > c.allreduce_buf_size() {
                return Err(Error::InvalidSize(format!(
                    "allreduce_user of {len} bytes (at most allreduce_buf_size, {})",
                    c.allreduce_buf_size()
                )));
            }
            let mut reduce = |a: &[u8], b: &[u8], r: &mut [u8]| -> Result<()> {
                let n = (a.len() / elem.max(1)) as u32;
                // SAFETY: `f` is the caller's reduction with the documented prototype; the
                // three buffers hold `n` elements of `element_size` bytes each. The inputs
                // are passed as `void*` as the prototype demands; reductions only read them.
                let rc = unsafe {
                    f(a.as_ptr() as *mut c_void, b.as_ptr() as *mut c_void, r.as_mut_ptr().cast(),
                      reduce_state, n, element_size, timeout_ms)
                };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(Error::UserReduction { code: rc })
                }
            };
            with_buffers(buffer_send, buffer_receive, len as usize, |i, o| {
                c.allreduce_user(i, o, elem, &mut reduce, Group(group), Timeout(timeout_ms))
            })
        })
    }

    fn gaspi_allreduce_buf_size(buf_size: *mut gaspi_size_t) {
        need(buf_size, "buf_size")?;
        with_ctx(|c| out(buf_size, "buf_size", c.allreduce_buf_size()))
    }

    fn gaspi_allreduce_elem_max(elem_max: *mut gaspi_number_t) {
        need(elem_max, "elem_max")?;
        with_ctx(|c| out(elem_max, "elem_max", c.allreduce_elem_max()))
    }

    fn gaspi_atomic_fetch_add(
        segment_id: gaspi_segment_id_t,
        offset: gaspi_offset_t,
        rank: gaspi_rank_t,
        val_add: gaspi_atomic_value_t,
        val_old: *mut gaspi_atomic_value_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        need(val_old, "val_old")?;
        with_ctx(|c| {
            let v = c.atomic_fetch_add(SegmentId(segment_id), offset, Rank(rank), val_add, Timeout(timeout_ms))?;
            out(val_old, "val_old", v)
        })
    }

    fn gaspi_atomic_compare_swap(
        segment_id: gaspi_segment_id_t,
        offset: gaspi_offset_t,
        rank: gaspi_rank_t,
        comparator: gaspi_atomic_value_t,
        val_new: gaspi_atomic_value_t,
        val_old: *mut gaspi_atomic_value_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        need(val_old, "val_old")?;
        with_ctx(|c| {
            let v = c.atomic_compare_swap(
                SegmentId(segment_id), offset, Rank(rank), comparator, val_new, Timeout(timeout_ms),
            )?;
            out(val_old, "val_old", v)
        })
    }

    fn gaspi_atomic_max(max_value: *mut gaspi_atomic_value_t) {
        need(max_value, "max_value")?;
        with_ctx(|c| out(max_value, "max_value", c.atomic_max()))
    }

    fn gaspi_passive_send(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        with_ctx(|c| c.passive_send(SegmentId(segment_id_local), offset_local, Rank(rank), size, Timeout(timeout_ms)))
    }

    fn gaspi_passive_receive(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rem_rank: *mut gaspi_rank_t,
        size: gaspi_size_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        need(rem_rank, "rem_rank")?;
        with_ctx(|c| {
            let (from, _) = c.passive_receive(SegmentId(segment_id_local), offset_local, size, Timeout(timeout_ms))?;
            out(rem_rank, "rem_rank", from.0)
        })
    }

    fn gaspi_passive_transfer_size_min(passive_transfer_size_min: *mut gaspi_size_t) {
        need(passive_transfer_size_min, "passive_transfer_size_min")?;
        with_ctx(|c| out(passive_transfer_size_min, "passive_transfer_size_min", c.passive_transfer_size_min()))
    }

    fn gaspi_passive_transfer_size_max(passive_transfer_size_max: *mut gaspi_size_t) {
        need(passive_transfer_size_max, "passive_transfer_size_max")?;
        with_ctx(|c| out(passive_transfer_size_max, "passive_transfer_size_max", c.passive_transfer_size_max()))
    }
}
