//! AVX2 (and F16C) kernels for the 16-bit floats, chosen at run time.
//!
//! The portable kernels (`element.rs`) widen and narrow with branch-free integer code
//! ([`crate::widen`]) that the compiler vectorizes for baseline x86-64 (SSE2, 4 lanes, no
//! blends), which reaches only 1-4 GB/s. Where the CPU has AVX2 these kernels do 16 elements
//! per step: f16 through the F16C conversions, bf16 by interleaving each element with a zero
//! half-word (bf16 is the top half of an f32) and packing the rounded upper halves back.
//! Results are bit-identical to the portable kernels, except for which payload a NaN
//! carries when both operands are NaN (unspecified for `f32` arithmetic too).
//!
//! Each entry point returns how many leading elements it handled (a multiple of 16, or 0
//! when the CPU lacks the features); the caller finishes the tail with the portable code.
//! The only `unsafe` is the call into `#[target_feature]` code after the run-time check.

use crate::reduction::Reduction;

/// The entry points of one format: run the vector kernel where the CPU has what it needs
/// (AVX2, and F16C for f16), else do nothing (return 0).
macro_rules! dispatch {
    ($format:literal, $combine:ident, $divide:ident, $module:ident, $has:ident) => {
        #[doc = concat!("Combines `dst[..k]` with `src[..k]` as ", $format, " and returns `k`.")]
        pub(crate) fn $combine(
            op: Reduction,
            dst: &mut [u16],
            src: &[u16],
            src_first: bool,
        ) -> usize {
            #[cfg(target_arch = "x86_64")]
            if x86::$has() {
                // SAFETY: the kernel needs only the CPU features checked just above.
                return unsafe { x86::$module::combine(op, dst, src, src_first) };
            }
            let _ = (op, dst, src, src_first);
            0
        }

        #[doc = concat!("Divides `data[..k]` as ", $format, " by `ranks` and returns `k`.")]
        pub(crate) fn $divide(data: &mut [u16], ranks: usize) -> usize {
            #[cfg(target_arch = "x86_64")]
            if x86::$has() {
                // SAFETY: the kernel needs only the CPU features checked just above.
                return unsafe { x86::$module::divide(data, ranks as f32) };
            }
            let _ = (data, ranks);
            0
        }
    };
}

dispatch!("f16", combine_f16, divide_f16, f16, has_f16c);
dispatch!("bf16", combine_bf16, divide_bf16, bf16, has_avx2);

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use crate::reduction::Reduction;

    pub fn has_avx2() -> bool {
        // The macro caches its answer; this is one relaxed load after the first call.
        is_x86_feature_detected!("avx2")
    }

    pub fn has_f16c() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")
    }

    /// The element-wise operation on widened values; MIN/MAX keep the first operand on
    /// ties and when the second is NaN, like the portable kernels.
    macro_rules! combine_with {
        ($op:expr, $run:ident, $dst:expr, $src:expr, $src_first:expr) => {
            match $op {
                Reduction::Sum | Reduction::Avg => {
                    $run($dst, $src, $src_first, |a, b| _mm256_add_ps(a, b))
                }
                Reduction::Prod => $run($dst, $src, $src_first, |a, b| _mm256_mul_ps(a, b)),
                Reduction::Min => $run($dst, $src, $src_first, |a, b| {
                    _mm256_blendv_ps(a, b, _mm256_cmp_ps::<_CMP_LT_OQ>(b, a))
                }),
                Reduction::Max => $run($dst, $src, $src_first, |a, b| {
                    _mm256_blendv_ps(a, b, _mm256_cmp_ps::<_CMP_GT_OQ>(b, a))
                }),
            }
        };
    }

    pub mod f16 {
        use super::*;

        #[target_feature(enable = "avx2,f16c")]
        fn widen(x: [u16; 8]) -> __m256 {
            _mm256_cvtph_ps(bytemuck::cast(x))
        }

        #[target_feature(enable = "avx2,f16c")]
        fn narrow(x: __m256) -> [u16; 8] {
            bytemuck::cast(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x))
        }

        #[target_feature(enable = "avx2,f16c")]
        fn run(
            dst: &mut [u16],
            src: &[u16],
            src_first: bool,
            f: impl Fn(__m256, __m256) -> __m256,
        ) -> usize {
            let (dst, _) = dst.as_chunks_mut::<8>();
            let (src, _) = src.as_chunks::<8>();
            let n = dst.len().min(src.len()) & !1;
            for (d, s) in dst[..n].iter_mut().zip(&src[..n]) {
                let (a, b) = (widen(*d), widen(*s));
                *d = narrow(if src_first { f(b, a) } else { f(a, b) });
            }
            n * 8
        }

        #[target_feature(enable = "avx2,f16c")]
        pub fn combine(op: Reduction, dst: &mut [u16], src: &[u16], src_first: bool) -> usize {
            combine_with!(op, run, dst, src, src_first)
        }

        #[target_feature(enable = "avx2,f16c")]
        pub fn divide(data: &mut [u16], ranks: f32) -> usize {
            let n = _mm256_set1_ps(ranks);
            let (data, _) = data.as_chunks_mut::<8>();
            let len = data.len() & !1;
            for d in &mut data[..len] {
                *d = narrow(_mm256_div_ps(widen(*d), n));
            }
            len * 8
        }
    }

    pub mod bf16 {
        use super::*;

        /// 16 bf16 values as two vectors of f32, in an interleaved order that
        /// [`narrow`] undoes.
        #[target_feature(enable = "avx2")]
        fn widen(x: [u16; 16]) -> (__m256, __m256) {
            let x: __m256i = bytemuck::cast(x);
            let zero = _mm256_setzero_si256();
            (
                _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),
                _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),
            )
        }

        /// Rounds to nearest even (as the portable `f32_to_bf16`), leaving each result in
        /// the low half of its 32-bit lane; NaNs stay NaN and become quiet.
        #[target_feature(enable = "avx2")]
        fn round(x: __m256) -> __m256i {
            let bits = _mm256_castps_si256(x);
            let upper = _mm256_srli_epi32::<16>(bits);
            let lsb = _mm256_and_si256(upper, _mm256_set1_epi32(1));
            let bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff));
            let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(bits, bias));
            let magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fff_ffff));
            let nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f80_0000));
            let quiet = _mm256_or_si256(upper, _mm256_set1_epi32(0x40));
            _mm256_blendv_epi8(rounded, quiet, nan)
        }

        /// Packs per 128-bit lane, which is exactly the inverse of the unpacks in
        /// [`widen`]; the values fit in 16 bits, so the saturation never triggers.
        #[target_feature(enable = "avx2")]
        fn narrow(lo: __m256, hi: __m256) -> [u16; 16] {
            bytemuck::cast(_mm256_packus_epi32(round(lo), round(hi)))
        }

        #[target_feature(enable = "avx2")]
        fn run(
            dst: &mut [u16],
            src: &[u16],
            src_first: bool,
            f: impl Fn(__m256, __m256) -> __m256,
        ) -> usize {
            let (dst, _) = dst.as_chunks_mut::<16>();
            let (src, _) = src.as_chunks::<16>();
            for (d, s) in dst.iter_mut().zip(src) {
                let ((a_lo, a_hi), (b_lo, b_hi)) = (widen(*d), widen(*s));
                *d = if src_first {
                    narrow(f(b_lo, a_lo), f(b_hi, a_hi))
                } else {
                    narrow(f(a_lo, b_lo), f(a_hi, b_hi))
                };
            }
            dst.len().min(src.len()) * 16
        }

        #[target_feature(enable = "avx2")]
        pub fn combine(op: Reduction, dst: &mut [u16], src: &[u16], src_first: bool) -> usize {
            combine_with!(op, run, dst, src, src_first)
        }

        #[target_feature(enable = "avx2")]
        pub fn divide(data: &mut [u16], ranks: f32) -> usize {
            let n = _mm256_set1_ps(ranks);
            let (data, _) = data.as_chunks_mut::<16>();
            for d in data.iter_mut() {
                let (lo, hi) = widen(*d);
                *d = narrow(_mm256_div_ps(lo, n), _mm256_div_ps(hi, n));
            }
            data.len() * 16
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::widen::{self, HalfBits};
    use half::{bf16, f16};

    /// The vector kernels against the portable ones, on every 16-bit pattern as the first
    /// operand and a spread of second operands, for every op, both operand orders and a
    /// length that leaves a tail.
    fn matches_portable<T: HalfBits>(
        vector: impl Fn(Reduction, &mut [u16], &[u16], bool) -> usize,
        divide: impl Fn(&mut [u16], usize) -> usize,
        is_nan: impl Fn(u16) -> bool,
    ) {
        let len = 1024 + 13;
        // Signed zeros, NaNs and equal values against each other: where operand order and
        // tie-breaking show.
        let special = [
            0x0000u16, 0x8000, 0x7e00, 0xfe01, 0x3c00, 0x3c00, 0x7c00, 0xfc00,
        ];
        let pairs: Vec<(u16, u16)> = special
            .iter()
            .flat_map(|a| special.iter().map(move |b| (*a, *b)))
            .collect();
        for op in [
            Reduction::Sum,
            Reduction::Prod,
            Reduction::Min,
            Reduction::Max,
        ] {
            for src_first in [false, true] {
                for start in (0..=u16::MAX as usize).step_by(len) {
                    let mut a: Vec<u16> = (0..len).map(|i| (start + i) as u16).collect();
                    let mut b: Vec<u16> = (0..len)
                        .map(|i| (i as u16).wrapping_mul(0x9e37) ^ start as u16)
                        .collect();
                    for (i, (x, y)) in pairs.iter().enumerate() {
                        a[i] = *x;
                        b[i] = *y;
                    }
                    let mut want = a.clone();
                    let mut got = a.clone();
                    widen::combine::<T>(op, &mut want, &b, src_first);
                    let done = vector(op, &mut got, &b, src_first);
                    widen::combine::<T>(op, &mut got[done..], &b[done..], src_first);
                    for i in 0..len {
                        let both_nan = is_nan(want[i]) && is_nan(got[i]);
                        assert!(
                            want[i] == got[i] || both_nan,
                            "{op:?} src_first={src_first} a={:#06x} b={:#06x}: {:#06x} != {:#06x}",
                            a[i],
                            b[i],
                            want[i],
                            got[i]
                        );
                    }
                    let mut want = a.clone();
                    let mut got = a.clone();
                    widen::divide::<T>(&mut want, 3);
                    let done = divide(&mut got, 3);
                    widen::divide::<T>(&mut got[done..], 3);
                    assert!(want
                        .iter()
                        .zip(&got)
                        .all(|(w, g)| w == g || (is_nan(*w) && is_nan(*g))));
                }
            }
        }
    }

    #[test]
    fn f16_kernels_match_the_portable_ones() {
        matches_portable::<f16>(combine_f16, divide_f16, |h| f16::from_bits(h).is_nan());
    }

    #[test]
    fn bf16_kernels_match_the_portable_ones() {
        matches_portable::<bf16>(combine_bf16, divide_bf16, |h| bf16::from_bits(h).is_nan());
    }

    #[test]
    fn the_vector_path_runs_where_the_cpu_allows() {
        let mut d = [0u16; 40];
        let done = combine_bf16(Reduction::Sum, &mut d, &[0u16; 40], false);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(done, if x86::has_avx2() { 32 } else { 0 });
        let _ = done;
    }
}
