//! Copies that bypass the cache on the way out (non-temporal stores), for the single-copy
//! allreduce's gather of finished blocks.
//!
//! A plain copy into memory that is not in cache first reads every destination line (the
//! "read for ownership") and then writes it back: three bytes of memory traffic per byte
//! copied. Once the vector is larger than the caches, the single-copy allreduce is bound by
//! memory bandwidth (every rank reads each peer's finished block and writes it into its
//! own buffer), so streaming stores, which write whole lines without reading them, cut the
//! gather's traffic by a third. Small copies keep the plain path: their destination is
//! likely in cache, and the application reads the result right after the run.

/// Copies of at least this many bytes stream past the cache: above the 1 MiB per-core L2
/// of the machines measured, where the destination is no longer expected in cache.
pub(crate) const STREAM_MIN: usize = 2 << 20;

/// Copies `len` bytes from `src` to `dst`, with streaming stores when `len >= STREAM_MIN`
/// on x86-64 (SSE2, which every x86-64 CPU has). Every store is globally visible when
/// this returns (a store fence follows the streaming stores), so a notification sent
/// afterwards orders after the copied data as with a plain copy.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `len` bytes, the two ranges must
/// not overlap, and nobody may write either range while the copy runs.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if len >= STREAM_MIN {
        // SAFETY: the caller's contract is this function's.
        unsafe { x86::copy_streaming(src, dst, len) };
        return;
    }
    // SAFETY: the caller's contract is `copy_nonoverlapping`'s.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// Streaming copy: a plain copy up to the first 16-byte aligned destination address,
    /// then 64 bytes (a cache line) per step through `movntdq`, then the plain tail, then
    /// `sfence`: streaming stores are weakly ordered, and the peers that read this memory
    /// after our next notification must see them.
    ///
    /// # Safety
    /// As [`super::copy`].
    pub(super) unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
        let head = dst.align_offset(16).min(len);
        // SAFETY: `head <= len`, inside both ranges, which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let body = (len - head) / 64 * 64;
        let mut at = head;
        while at < head + body {
            // SAFETY: `at + 64 <= len`, so the four 16-byte loads and stores are in bounds;
            // `dst + at` is 16-byte aligned (`head` aligned it, and `at - head` is a
            // multiple of 64), as `_mm_stream_si128` requires; loads are unaligned ones.
            unsafe {
                let s = src.add(at) as *const __m128i;
                let d = dst.add(at) as *mut __m128i;
                let (a, b) = (_mm_loadu_si128(s), _mm_loadu_si128(s.add(1)));
                let (c, e) = (_mm_loadu_si128(s.add(2)), _mm_loadu_si128(s.add(3)));
                _mm_stream_si128(d, a);
                _mm_stream_si128(d.add(1), b);
                _mm_stream_si128(d.add(2), c);
                _mm_stream_si128(d.add(3), e);
            }
            at += 64;
        }
        // SAFETY: `[at, len)` is the rest of both ranges. The fence is always safe.
        unsafe {
            std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), len - at);
            _mm_sfence();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the streaming threshold and every misalignment of either side
    /// copies exactly the source bytes and touches nothing around the destination.
    #[test]
    fn copies_exactly_at_any_alignment_and_length() {
        let src: Vec<u8> = (0..STREAM_MIN + 4096)
            .map(|i| (i * 131 + 7) as u8)
            .collect();
        for len in [
            0,
            1,
            63,
            64,
            4095,
            STREAM_MIN - 1,
            STREAM_MIN,
            STREAM_MIN + 129,
        ] {
            for (s_off, d_off) in [(0, 0), (1, 0), (0, 3), (5, 11), (16, 17)] {
                let mut dst = vec![0xEEu8; len + 64];
                // SAFETY: both ranges lie inside their vectors; the vectors are distinct.
                unsafe { copy(src.as_ptr().add(s_off), dst.as_mut_ptr().add(d_off), len) };
                assert_eq!(
                    &dst[d_off..d_off + len],
                    &src[s_off..s_off + len],
                    "len {len}"
                );
                assert!(dst[..d_off].iter().all(|&b| b == 0xEE), "before, len {len}");
                assert!(
                    dst[d_off + len..].iter().all(|&b| b == 0xEE),
                    "after, len {len}"
                );
            }
        }
    }
}
