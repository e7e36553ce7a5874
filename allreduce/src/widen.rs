//! Conversions between the 16-bit float formats and `f32`, written without branches so that a
//! loop over a slice vectorizes on baseline x86-64 (SSE2) and aarch64. The `half` crate's
//! slice conversions fall back to a per-element scalar loop when F16C is not compiled in,
//! which held the f16/bf16 reduce kernels to 3-4 GB/s; these reach memory speed.
//!
//! The portable 16-bit kernels ([`combine`], [`divide`]) are built on them; `simd.rs`
//! has faster ones for AVX2 machines.
//!
//! Results are bit-identical to `half`'s `to_f32`/`from_f32` (round to nearest even,
//! overflow to infinity, subnormals kept, NaNs quiet with their payload), which the tests
//! check exhaustively on the 16-bit side and on a dense sweep of `f32`s.

use crate::reduction::{zip_apply, Reduction};

/// `bf16` bits to `f32`: bf16 is the upper half of an f32.
#[inline(always)]
pub(crate) fn bf16_to_f32(h: u16) -> f32 {
    let bits = u32::from(h) << 16;
    // `half` quiets signalling NaNs.
    let nan = (bits & 0x7fff_ffff) > 0x7f80_0000;
    f32::from_bits(if nan { bits | 0x0040_0000 } else { bits })
}

/// `f32` to `bf16` bits, rounding to nearest even.
#[inline(always)]
pub(crate) fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    let nan = (bits & 0x7fff_ffff) > 0x7f80_0000;
    // Adding 0x7fff plus the lowest kept bit rounds ties to even; a carry into the exponent
    // is the correct rounding up (to infinity at the top).
    let rounded = (bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16) as u16;
    let quiet = ((bits >> 16) | 0x0040) as u16;
    if nan {
        quiet
    } else {
        rounded
    }
}

/// `f16` bits to `f32` (exact).
#[inline(always)]
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    const SHIFTED_EXP: u32 = 0x7c00 << 13;
    // 2^-14, the smallest normal f16, as an f32.
    const DENORM_MAGIC: f32 = f32::from_bits(113 << 23);
    let h = u32::from(h);
    let body = (h & 0x7fff) << 13;
    let exp = body & SHIFTED_EXP;
    let rebased = body + ((127 - 15) << 23);
    // Inf/NaN: exponent all ones in f32 too; NaNs made quiet as `half` does.
    let mantissa = body & 0x007f_e000;
    let special = (rebased + ((128 - 16) << 23)) | if mantissa != 0 { 0x0040_0000 } else { 0 };
    // Zero and subnormals: renormalize by letting the FPU subtract the implicit bit.
    let subnormal = (f32::from_bits(rebased + (1 << 23)) - DENORM_MAGIC).to_bits();
    let magnitude = if exp == SHIFTED_EXP {
        special
    } else if exp == 0 {
        subnormal
    } else {
        rebased
    };
    f32::from_bits(magnitude | ((h & 0x8000) << 16))
}

/// `f32` to `f16` bits, rounding to nearest even.
#[inline(always)]
pub(crate) fn f32_to_f16(x: f32) -> u16 {
    const F32_INF: u32 = 255 << 23;
    // The first f32 that rounds to infinity in f16 is 65520; anything at or above 2^16
    // certainly overflows, and the normal path below handles 65504..65536.
    const F16_OVERFLOW: u32 = (127 + 16) << 23;
    // Below 2^-14 the result is subnormal (or zero).
    const F16_MIN_NORMAL: u32 = 113 << 23;
    // Adding 2^-1 (as f32 0.5) shifts a subnormal's bits into place with the FPU rounding
    // to nearest even.
    const DENORM_MAGIC: u32 = ((127 - 15) + (23 - 10) + 1) << 23;
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;

    let nan = (0x7c00 | 0x0200 | ((abs >> 13) & 0x03ff)) as u16;
    let overflow = if abs > F32_INF { nan } else { 0x7c00 };
    let subnormal = (f32::from_bits(abs) + f32::from_bits(DENORM_MAGIC))
        .to_bits()
        .wrapping_sub(DENORM_MAGIC) as u16;
    let odd = (abs >> 13) & 1;
    let normal = (abs
        .wrapping_add(((15u32.wrapping_sub(127)) << 23).wrapping_add(0xfff))
        .wrapping_add(odd)
        >> 13) as u16;
    let magnitude = if abs >= F16_OVERFLOW {
        overflow
    } else if abs < F16_MIN_NORMAL {
        subnormal
    } else {
        normal
    };
    magnitude | sign
}

/// A 16-bit float format, seen as its raw bits.
pub(crate) trait HalfBits {
    fn widen(h: u16) -> f32;
    fn narrow(x: f32) -> u16;
}

impl HalfBits for half::f16 {
    #[inline(always)]
    fn widen(h: u16) -> f32 {
        f16_to_f32(h)
    }
    #[inline(always)]
    fn narrow(x: f32) -> u16 {
        f32_to_f16(x)
    }
}

impl HalfBits for half::bf16 {
    #[inline(always)]
    fn widen(h: u16) -> f32 {
        bf16_to_f32(h)
    }
    #[inline(always)]
    fn narrow(x: f32) -> u16 {
        f32_to_bf16(x)
    }
}

/// The portable kernel: widen, combine in f32, narrow, in one fused loop. MIN/MAX compare
/// the widened values and keep the original bits (the same choice as for native types).
pub(crate) fn combine<H: HalfBits>(op: Reduction, dst: &mut [u16], src: &[u16], src_first: bool) {
    let (w, n) = (H::widen, H::narrow);
    match op {
        Reduction::Sum | Reduction::Avg => zip_apply(dst, src, src_first, |a, b| n(w(a) + w(b))),
        Reduction::Prod => zip_apply(dst, src, src_first, |a, b| n(w(a) * w(b))),
        Reduction::Min => zip_apply(dst, src, src_first, |a, b| if w(b) < w(a) { b } else { a }),
        Reduction::Max => zip_apply(dst, src, src_first, |a, b| if w(b) > w(a) { b } else { a }),
    }
}

/// `data[i] /= ranks` with one rounding.
pub(crate) fn divide<H: HalfBits>(data: &mut [u16], ranks: usize) {
    let r = ranks as f32;
    for x in data {
        *x = H::narrow(H::widen(*x) / r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// Every 16-bit pattern widens exactly as `half` does.
    #[test]
    fn widening_matches_half_on_every_value() {
        for h in 0..=u16::MAX {
            assert_eq!(
                f16_to_f32(h).to_bits(),
                f16::from_bits(h).to_f32().to_bits(),
                "f16 {h:#06x}"
            );
            assert_eq!(
                bf16_to_f32(h).to_bits(),
                bf16::from_bits(h).to_f32().to_bits(),
                "bf16 {h:#06x}"
            );
        }
    }

    fn check_narrowing(bits: u32) {
        let x = f32::from_bits(bits);
        assert_eq!(
            f32_to_f16(x),
            f16::from_f32(x).to_bits(),
            "f16 of {bits:#010x}"
        );
        assert_eq!(
            f32_to_bf16(x),
            bf16::from_f32(x).to_bits(),
            "bf16 of {bits:#010x}"
        );
    }

    /// Narrowing agrees with `half` around every 16-bit value (where the rounding decisions
    /// are: exact, one ulp of f32 either side, the halfway points and their neighbours) and
    /// on a dense sweep of all f32 patterns.
    #[test]
    fn narrowing_matches_half() {
        for hi in 0..=u16::MAX as u32 {
            let base = hi << 16;
            for lo in [
                0u32, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x7fff, 0x8000, 0x8001, 0xffff,
            ] {
                check_narrowing(base | lo);
            }
            // f16 keeps 10 mantissa bits: its halfway points sit at bit 12 of the f32.
            for lo in [
                0x0000_1000u32,
                0x0000_0fff,
                0x0000_1001,
                0x0000_3000,
                0x0000_2000,
            ] {
                check_narrowing(base.wrapping_add(lo));
            }
        }
        // A stride coprime with 2^32 visits every residue class; 2^24 samples.
        let mut bits = 0u32;
        for _ in 0..1 << 24 {
            check_narrowing(bits);
            bits = bits.wrapping_add(0x0000_0101 * 0x9e37);
        }
    }

    /// Every f16 pattern and every f16 halfway point (the values narrowing must break ties
    /// on) across the subnormal and normal range.
    #[test]
    fn f16_ties_round_to_even() {
        for h in 0..0x7c00u16 {
            let lo = f16_to_f32(h);
            let hi = f16_to_f32(h + 1);
            let mid = (f64::from(lo) + f64::from(hi)) / 2.0;
            let mid = mid as f32;
            check_narrowing(lo.to_bits());
            check_narrowing(mid.to_bits());
            check_narrowing(mid.to_bits() + 1);
            check_narrowing(mid.to_bits() - 1);
            check_narrowing((-mid).to_bits());
        }
    }
}
