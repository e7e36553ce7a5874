//! The collective's segment memory, seen as typed slices (the kernels that run over them are
//! in `simd.rs` and `stream_copy.rs`).
//!
//! Remote ranks write into this memory while we compute on other parts of it. What keeps
//! the views below from aliasing a concurrent write is the schedule's protocol (see
//! [`crate::schedule`]): a staging range is read only after the notification that ends the
//! write into it, and the data range receives remote writes only while a run is active
//! and only into parts this rank does not touch until the matching notification. Every
//! view is created for exactly the range an action names and dropped before the next
//! action runs.

use std::sync::Arc;

use gaspi::{Context, SegmentId};

use crate::element::Element;
use crate::reduction::Reduction;
use crate::stream_copy;

/// A segment created for one collective, deleted when the last user drops it.
pub(crate) struct OwnedSegment {
    /// The context the segment was created in (and is deleted through).
    pub ctx: Arc<Context>,
    /// The segment's id, the same on every member.
    pub id: SegmentId,
    /// The local mapping.
    seg: gaspi::Segment,
}

impl OwnedSegment {
    /// Takes ownership of segment `id`, just created on this rank.
    pub fn new(ctx: Arc<Context>, id: SegmentId) -> gaspi::Result<Self> {
        let seg = ctx.segment(id)?;
        Ok(OwnedSegment { ctx, id, seg })
    }

    /// Panics unless `[off, off+len)` lies in the mapping and is a whole, aligned number of
    /// `T`s.
    fn check<T>(&self, off: usize, len: usize) {
        // Offsets come from schedules sized for this segment: a miss is a bug here, not a
        // user error, and must never turn into an out-of-bounds access.
        assert!(
            off.checked_add(len)
                .is_some_and(|end| end as u64 <= self.seg.len())
                && off.is_multiple_of(std::mem::align_of::<T>())
                && len.is_multiple_of(std::mem::size_of::<T>()),
            "collective range {off}+{len} outside segment of {} bytes",
            self.seg.len()
        );
    }

    /// `data[dst..] = reduction(staging[src..], data[dst..])` over `len` bytes.
    pub fn reduce<T: Element>(
        &self,
        reduction: Reduction,
        src: usize,
        dst: usize,
        len: usize,
        first: bool,
    ) {
        self.check::<T>(src, len);
        self.check::<T>(dst, len);
        assert!(src + len <= dst || dst + len <= src, "overlapping reduce");
        let n = len / std::mem::size_of::<T>();
        let base = self.seg.as_ptr();
        // SAFETY: both ranges are inside the mapping (checked above), aligned for T (the
        // mapping is page-aligned and offsets are multiples of T's size), and disjoint; the
        // schedule guarantees no remote write into either while the reduce runs.
        let (d, s) = unsafe {
            (
                std::slice::from_raw_parts_mut(base.add(dst) as *mut T, n),
                std::slice::from_raw_parts(base.add(src) as *const T, n),
            )
        };
        T::combine(reduction, d, s, first);
    }

    /// `data[dst..] = reduction(peer[src..], data[dst..])` over `len` bytes, reading a
    /// shared-memory peer's segment in place.
    pub fn reduce_from<T: Element>(
        &self,
        peer: &gaspi::Segment,
        reduction: Reduction,
        src: usize,
        dst: usize,
        len: usize,
        first: bool,
    ) {
        self.check::<T>(dst, len);
        check_peer::<T>(peer, src, len);
        let n = len / std::mem::size_of::<T>();
        // SAFETY: both ranges are inside their mappings (checked above) and aligned for T
        // (page-aligned mappings, offsets multiples of T's size); they are in different
        // mappings of different segments, so disjoint. The schedule guarantees that nobody
        // writes our range, and that the peer does not write its range, while this runs (the
        // peer announced its data and waits for our notification before changing it).
        let (d, s) = unsafe {
            (
                std::slice::from_raw_parts_mut(self.seg.as_ptr().add(dst) as *mut T, n),
                std::slice::from_raw_parts(peer.as_ptr().add(src) as *const T, n),
            )
        };
        T::combine(reduction, d, s, first);
    }

    /// Copies a shared-memory peer's `[src, src+len)` into our `[dst, dst+len)`, with
    /// streaming stores if `stream` (see `stream_copy.rs`).
    pub fn copy_from(
        &self,
        peer: &gaspi::Segment,
        src: usize,
        dst: usize,
        len: usize,
        stream: bool,
    ) {
        self.check::<u8>(dst, len);
        check_peer::<u8>(peer, src, len);
        // SAFETY: in bounds of both mappings (checked above), different segments so not
        // overlapping; the schedule keeps both ranges free of writers while this runs (as in
        // `reduce_from`).
        unsafe {
            stream_copy::copy(
                peer.as_ptr().add(src) as *const u8,
                self.seg.as_ptr().add(dst),
                len,
                stream,
            )
        };
    }

    /// Divides `len` bytes at `off` by `ranks`.
    pub fn divide<T: Element>(&self, off: usize, len: usize, ranks: usize) {
        // SAFETY: see `slice_mut`; the schedule owns this range at this point.
        let d = unsafe { self.slice_mut::<T>(off, len) };
        T::divide(d, ranks);
    }

    /// The first `count` elements (the data range) for the user, between runs.
    ///
    /// # Safety
    /// No run may be active: then no peer writes the data range (see module docs).
    pub unsafe fn data<T: Element>(&self, count: usize) -> &[T] {
        let len = count * std::mem::size_of::<T>();
        self.check::<T>(0, len);
        // SAFETY: in bounds and aligned (checked); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts(self.seg.as_ptr() as *const T, count) }
    }

    /// As [`data`](Self::data), mutable.
    ///
    /// # Safety
    /// As for `data`, and no other view of the range may be alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn data_mut<T: Element>(&self, count: usize) -> &mut [T] {
        // SAFETY: forwarded contract.
        unsafe { self.slice_mut(0, count * std::mem::size_of::<T>()) }
    }

    /// # Safety
    /// The range must not be read or written by anyone else while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice_mut<T: Element>(&self, off: usize, len: usize) -> &mut [T] {
        self.check::<T>(off, len);
        // SAFETY: in bounds and aligned (checked); exclusivity is the caller's contract.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.seg.as_ptr().add(off) as *mut T,
                len / std::mem::size_of::<T>(),
            )
        }
    }
}

/// Panics unless `[off, off+len)` lies in the peer's mapping and is a whole, aligned number
/// of `T`s (as `OwnedSegment::check`: the peer's segment was created with the same size).
fn check_peer<T>(peer: &gaspi::Segment, off: usize, len: usize) {
    assert!(
        off.checked_add(len)
            .is_some_and(|end| end as u64 <= peer.len())
            && off.is_multiple_of(std::mem::align_of::<T>())
            && len.is_multiple_of(std::mem::size_of::<T>()),
        "collective range {off}+{len} outside the peer's segment of {} bytes",
        peer.len()
    );
}

impl Drop for OwnedSegment {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.segment_delete(self.id) {
            tracing::debug!(segment = self.id.0, "deleting collective segment: {e}");
        }
    }
}
