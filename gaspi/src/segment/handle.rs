//! [`Segment`]: typed, bounds-checked access to a local segment's memory.

use std::sync::Arc;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::types::SegmentId;

/// A handle to a local segment's memory with typed, bounds-checked access.
///
/// Peers may write into a segment at any time (that is the point of one-sided
/// communication), so the safe accessors copy; the zero-copy views are `unsafe` and need the
/// caller's protocol (notifications, barriers) to rule out concurrent remote writes.
#[derive(Clone)]
pub struct Segment {
    id: SegmentId,
    mem: Arc<SegmentMemory>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("id", &self.id)
            .field("len", &self.len())
            .finish()
    }
}

impl Segment {
    pub(crate) fn new(id: SegmentId, mem: Arc<SegmentMemory>) -> Self {
        Segment { id, mem }
    }

    /// The segment id this handle was obtained for ([`Context::segment`](crate::Context::segment)).
    pub fn id(&self) -> SegmentId {
        self.id
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.mem.len() as u64
    }

    /// Whether the segment has no data bytes. Never true for a segment the API created
    /// (GASPI segments are at least 1 byte); here for the `len`/`is_empty` convention.
    pub fn is_empty(&self) -> bool {
        self.mem.len() == 0
    }

    fn range(&self, offset: u64, bytes: usize) -> Result<usize> {
        match offset.checked_add(bytes as u64) {
            Some(end) if end <= self.len() => Ok(offset as usize),
            _ => Err(Error::LocalOutOfBounds {
                segment: self.id,
                offset,
                len: bytes as u64,
                size: self.len(),
            }),
        }
    }

    /// Copies `src` into the segment at byte `offset`.
    pub fn write<T: Pod>(&self, offset: u64, src: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        let off = self.range(offset, bytes.len())?;
        self.mem.copy_in(off, bytes);
        Ok(())
    }

    /// Copies from the segment at byte `offset` into `dst`.
    pub fn read<T: Pod>(&self, offset: u64, dst: &mut [T]) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let off = self.range(offset, bytes.len())?;
        self.mem.copy_out(off, bytes);
        Ok(())
    }

    /// Reads one value at byte `offset`.
    pub fn get<T: Pod>(&self, offset: u64) -> Result<T> {
        let mut v = [T::zeroed()];
        self.read(offset, &mut v)?;
        Ok(v[0])
    }

    /// Fills `[offset, offset+len)` with `byte`.
    pub fn fill(&self, offset: u64, len: u64, byte: u8) -> Result<()> {
        let off = self.range(offset, len as usize)?;
        let chunk = vec![byte; (len as usize).min(1 << 20)];
        let mut done = 0;
        while done < len as usize {
            let n = chunk.len().min(len as usize - done);
            self.mem.copy_in(off + done, &chunk[..n]);
            done += n;
        }
        Ok(())
    }

    /// Start of the segment's data.
    pub fn as_ptr(&self) -> *mut u8 {
        self.mem.data_addr()
    }

    /// The whole segment as a slice of `T`.
    ///
    /// # Panics
    /// When the segment's data is not aligned for `T` (memory bound with `segment_bind` at an
    /// address not aligned for `T`; the runtime's own segments are page-aligned).
    ///
    /// # Safety
    /// No peer (or other thread) may write the viewed memory while the slice lives, and the
    /// segment must not be deleted. The segment's size must be a multiple of `size_of::<T>()`.
    pub unsafe fn as_slice<T: Pod>(&self) -> &[T] {
        self.check_alignment::<T>();
        // SAFETY: the data is aligned for `T` (checked above) and valid for `len` bytes while
        // `self.mem` lives; exclusivity is the caller's contract.
        unsafe {
            std::slice::from_raw_parts(
                self.as_ptr() as *const T,
                self.mem.len() / std::mem::size_of::<T>(),
            )
        }
    }

    /// The whole segment as a mutable slice of `T`.
    ///
    /// # Panics
    /// As [`as_slice`](Self::as_slice).
    ///
    /// # Safety
    /// As for [`as_slice`](Self::as_slice), and no other view of the segment may be alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice<T: Pod>(&self) -> &mut [T] {
        self.check_alignment::<T>();
        // SAFETY: aligned (checked above) and valid as in `as_slice`; uniqueness is the
        // caller's contract.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.as_ptr() as *mut T,
                self.mem.len() / std::mem::size_of::<T>(),
            )
        }
    }

    fn check_alignment<T>(&self) {
        let addr = self.as_ptr() as usize;
        assert!(
            addr.is_multiple_of(std::mem::align_of::<T>()),
            "segment {} starts at {addr:#x}, not aligned for a {}-byte-aligned type",
            self.id,
            std::mem::align_of::<T>()
        );
    }
}
