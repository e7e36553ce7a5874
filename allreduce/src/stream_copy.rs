//! Copies that bypass the cache on the way out (non-temporal stores), for the single-copy
//! allreduce's gather of finished blocks, and when they pay.
//!
//! A plain copy into memory that is not in cache first reads every destination line (the
//! "read for ownership") and then writes it back: three bytes of memory traffic per byte
//! copied. Once the vectors are larger than the cache, the single-copy allreduce is bound by
//! memory bandwidth (every rank reads each peer's finished block and writes it into its
//! own buffer), so streaming stores, which write whole lines without reading them, cut the
//! gather's traffic by a third. While the vectors fit, the same stores cost: they push the
//! result out to memory, from where the next run (and the application, which reads the
//! result right after the run) must fetch it again.

/// Whether a collective's gather should stream: once the data ranges of the `host_ranks`
/// ranks on this host (each holds the whole vector of `vector_bytes`) no longer fit their
/// last-level cache (`cache_bytes`, all instances they may use) together.
///
/// Measured on the 2-core VM (one 32 MiB L3; single-copy pulling, in-place, session 24),
/// streaming every copy of 2 MiB or more against none, medians of 3 alternating rounds:
/// 1.65× slower at 4 MiB on 2 ranks, 1.8× at 8 MiB and 1.24× at 16 MiB (32 MiB of
/// vectors), 1.14–1.18× slower at 8 MiB on 3 and 4 ranks (24 and 32 MiB), 1.25–1.4× faster
/// from 32 MiB on 2 ranks and 16 MiB on 3 and 4 (48 MiB of vectors and more). A second
/// run, streaming forced against this rule, 7 rounds: 1.58×, 1.07×, 1.03× and 1.03×
/// slower where the rule does not stream, a tie where it does (docs/allreduce.md).
pub(crate) fn worth_streaming(vector_bytes: usize, host_ranks: usize, cache_bytes: usize) -> bool {
    vector_bytes.saturating_mul(host_ranks) > cache_bytes
}

/// Copies `len` bytes from `src` to `dst`, with streaming stores when `stream` holds and
/// the CPU is x86-64 (SSE2, which every x86-64 CPU has). Every store is globally visible
/// when this returns (a store fence follows the streaming stores), so a notification sent
/// afterwards orders after the copied data as with a plain copy.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `len` bytes, the two ranges must
/// not overlap, and nobody may write either range while the copy runs.
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize, stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream {
        // SAFETY: the caller's contract is this function's.
        unsafe { x86::copy_streaming(src, dst, len) };
        return;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = stream;
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

    /// Every length around a cache line and a page and every misalignment of either side
    /// copies exactly the source bytes and touches nothing around the destination, in both
    /// modes.
    #[test]
    fn copies_exactly_at_any_alignment_and_length() {
        const LONGEST: usize = (64 << 10) + 129;
        let src: Vec<u8> = (0..LONGEST + 64).map(|i| (i * 131 + 7) as u8).collect();
        for stream in [false, true] {
            for len in [0, 1, 15, 63, 64, 65, 4095, 4096, LONGEST] {
                for (s_off, d_off) in [(0, 0), (1, 0), (0, 3), (5, 11), (16, 17)] {
                    let mut dst = vec![0xEEu8; len + 64];
                    // SAFETY: both ranges lie inside their vectors; the vectors are distinct.
                    unsafe {
                        copy(
                            src.as_ptr().add(s_off),
                            dst.as_mut_ptr().add(d_off),
                            len,
                            stream,
                        )
                    };
                    let what = format!("len {len}, stream {stream}");
                    assert_eq!(&dst[d_off..d_off + len], &src[s_off..s_off + len], "{what}");
                    assert!(dst[..d_off].iter().all(|&b| b == 0xEE), "before, {what}");
                    assert!(
                        dst[d_off + len..].iter().all(|&b| b == 0xEE),
                        "after, {what}"
                    );
                }
            }
        }
    }

    /// The measured cases on one 32 MiB cache.
    #[test]
    fn streams_only_once_the_vectors_leave_the_cache() {
        const MIB: usize = 1 << 20;
        for (vector, ranks) in [(4 * MIB, 2), (16 * MIB, 2), (8 * MIB, 3), (8 * MIB, 4)] {
            assert!(
                !worth_streaming(vector, ranks, 32 * MIB),
                "{vector} x {ranks}"
            );
        }
        for (vector, ranks) in [(32 * MIB, 2), (16 * MIB, 3), (16 * MIB, 4)] {
            assert!(
                worth_streaming(vector, ranks, 32 * MIB),
                "{vector} x {ranks}"
            );
        }
        assert!(worth_streaming(usize::MAX, 2, 1 << 40), "no overflow");
        assert!(worth_streaming(1, 1, 0));
    }
}
