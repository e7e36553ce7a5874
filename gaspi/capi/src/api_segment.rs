//! Segments.

use rt::{Alloc, Error, Group, Rank, Result, SegmentId, Timeout};

use crate::ffi::{need, out, with_ctx, write_array};
use crate::gaspi_api;
use crate::types::*;

/// `gaspi_alloc_t`: `GASPI_MEM_UNINITIALIZED` (0) or `GASPI_MEM_INITIALIZED` (1).
fn alloc_policy(p: gaspi_alloc_t) -> Result<Alloc> {
    match p {
        0 => Ok(Alloc::Uninitialized),
        1 => Ok(Alloc::Initialized),
        other => Err(Error::InvalidNumber(format!(
            "allocation policy {other} (GASPI_MEM_UNINITIALIZED or GASPI_MEM_INITIALIZED)"
        ))),
    }
}

gaspi_api! { SEGMENT_API;
    fn gaspi_segment_alloc(segment_id: gaspi_segment_id_t, size: gaspi_size_t, alloc_policy: gaspi_alloc_t) {
        let a = self::alloc_policy(alloc_policy)?;
        with_ctx(|c| c.segment_alloc(SegmentId(segment_id), size, a))
    }

    fn gaspi_segment_delete(segment_id: gaspi_segment_id_t) {
        with_ctx(|c| c.segment_delete(SegmentId(segment_id)))
    }

    fn gaspi_segment_register(segment_id: gaspi_segment_id_t, rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.segment_register(SegmentId(segment_id), Rank(rank), Timeout(timeout_ms)))
    }

    fn gaspi_segment_create(
        segment_id: gaspi_segment_id_t,
        size: gaspi_size_t,
        group: gaspi_group_t,
        timeout_ms: gaspi_timeout_t,
        alloc_policy: gaspi_alloc_t,
    ) {
        let a = self::alloc_policy(alloc_policy)?;
        with_ctx(|c| c.segment_create(SegmentId(segment_id), size, Group(group), Timeout(timeout_ms), a))
    }

    /// `gaspi_segment_bind`: user memory as a segment. `memory_description` is accepted and
    /// ignored (host memory only). A null `pointer` asks the library for the memory, as in
    /// GPI-2 1.5 (`pgaspi_segment_alloc_maybe` in its src/GPI2_SEG.c): the segment is
    /// allocated as by `gaspi_segment_alloc`, so no caller memory is ever dereferenced.
    fn gaspi_segment_bind(
        segment_id: gaspi_segment_id_t,
        pointer: gaspi_pointer_t,
        size: gaspi_size_t,
        memory_description: gaspi_memory_description_t,
    ) {
        let _ = memory_description;
        let seg = SegmentId(segment_id);
        if pointer.is_null() {
            return with_ctx(|c| c.segment_alloc(seg, size, Alloc::Uninitialized));
        }
        // SAFETY: `pointer` is non-null, and the caller promises (as the standard requires)
        // that `pointer..pointer+size` stays valid memory until the segment is deleted.
        with_ctx(|c| unsafe { c.segment_bind(seg, pointer.cast(), size) })
    }

    /// `gaspi_segment_use`: `gaspi_segment_bind`, then registration with `group` and a
    /// barrier of it. A null `pointer` allocates, as for bind (GPI-2 1.5 does the same), which
    /// makes it `gaspi_segment_create` without initialization.
    fn gaspi_segment_use(
        segment_id: gaspi_segment_id_t,
        pointer: gaspi_pointer_t,
        size: gaspi_size_t,
        group: gaspi_group_t,
        timeout: gaspi_timeout_t,
        memory_description: gaspi_memory_description_t,
    ) {
        let _ = memory_description;
        let (seg, group, timeout) = (SegmentId(segment_id), Group(group), Timeout(timeout));
        if pointer.is_null() {
            return with_ctx(|c| c.segment_create(seg, size, group, timeout, Alloc::Uninitialized));
        }
        // SAFETY: as for `gaspi_segment_bind`.
        with_ctx(|c| unsafe { c.segment_use(seg, pointer.cast(), size, group, timeout) })
    }

    fn gaspi_segment_num(segment_num: *mut gaspi_number_t) {
        need(segment_num, "segment_num")?;
        with_ctx(|c| out(segment_num, "segment_num", c.segment_num()))
    }

    /// `gaspi_segment_list`: writes the ids of the local segments (ascending); `num` must be
    /// their number (`gaspi_segment_num`), as GPI-2 requires.
    fn gaspi_segment_list(num: gaspi_number_t, segment_id_list: *mut gaspi_segment_id_t) {
        need(segment_id_list, "segment_id_list")?;
        with_ctx(|c| {
            let ids: Vec<u8> = c.segment_list().iter().map(|s| s.0).collect();
            if ids.len() != num as usize {
                return Err(Error::SegmentCount { asked: num, segments: ids.len() as u32 });
            }
            write_array(segment_id_list, &ids, "segment_id_list")
        })
    }

    fn gaspi_segment_ptr(segment_id: gaspi_segment_id_t, ptr: *mut gaspi_pointer_t) {
        need(ptr, "ptr")?;
        with_ctx(|c| out(ptr, "ptr", c.segment_ptr(SegmentId(segment_id))?.cast()))
    }

    fn gaspi_segment_size(segment_id: gaspi_segment_id_t, rank: gaspi_rank_t, size: *mut gaspi_size_t) {
        need(size, "size")?;
        with_ctx(|c| out(size, "size", c.segment_size(SegmentId(segment_id), Rank(rank))?))
    }

    fn gaspi_segment_max(segment_max: *mut gaspi_number_t) {
        need(segment_max, "segment_max")?;
        with_ctx(|c| out(segment_max, "segment_max", c.segment_max()))
    }

    fn gaspi_segment_avail_local(avail_seg_id: *mut gaspi_segment_id_t) {
        need(avail_seg_id, "avail_seg_id")?;
        with_ctx(|c| out(avail_seg_id, "avail_seg_id", c.segment_avail_local()?.0))
    }
}
