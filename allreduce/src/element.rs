//! Element types and the reduction kernels.
//!
//! The kernels are plain loops over slices with the operation inlined, which the compiler
//! turns into SIMD code (checked with the `reduce-kernel` bench: a SUM over f32 runs at
//! memory speed, like `copy_from_slice`). Half-precision types go through f32 element by
//! element (branch-free conversions, vectorized too):
//! each element is widened, combined and rounded back once, so the result of one combine
//! is the correctly rounded f32 result narrowed to the type.
//!
//! Every combine takes its two operands in a fixed order (`src_first` says which comes
//! first), so that algorithms in which two ranks combine the same pair of values get the
//! same bits on both sides even for operations that are not bitwise commutative (MIN/MAX
//! of `-0.0` and `+0.0`, NaN payloads).

use half::{bf16, f16};

use crate::reduction::{max_of, min_of, zip_apply, Reduction};
use crate::{simd, widen};

/// The element types the collectives reduce, as a value: what [`Element::DATA_TYPE`] tags
/// each type with, so that code chosen at run time (a benchmark's `-d` flag, the setup
/// signature the members compare) can name a type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `f32`, IEEE single precision.
    F32,
    /// `f64`, IEEE double precision.
    F64,
    /// [`half::f16`], IEEE half precision (combined in `f32`, rounded once).
    F16,
    /// [`half::bf16`], bfloat16: the upper half of an `f32` (combined in `f32`, rounded
    /// once).
    Bf16,
    /// `i32`, wrapping on overflow.
    I32,
    /// `i64`, wrapping on overflow.
    I64,
    /// `u32`, wrapping on overflow.
    U32,
    /// `u64`, wrapping on overflow.
    U64,
}

impl DataType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DataType::F16 | DataType::Bf16 => 2,
            DataType::F32 | DataType::I32 | DataType::U32 => 4,
            DataType::F64 | DataType::I64 | DataType::U64 => 8,
        }
    }

    /// Whether the type is a floating-point one.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::F32 | DataType::F64 | DataType::F16 | DataType::Bf16
        )
    }

    /// The name nccl-tests prints (`float`, `half`, `int32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "float",
            DataType::F64 => "double",
            DataType::F16 => "half",
            DataType::Bf16 => "bfloat16",
            DataType::I32 => "int32",
            DataType::I64 => "int64",
            DataType::U32 => "uint32",
            DataType::U64 => "uint64",
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type the collectives can reduce: `f32`, `f64`, [`half::f16`], [`half::bf16`], `i32`,
/// `i64`, `u32`, `u64`. Integer SUM/PROD wrap on overflow.
pub trait Element:
    bytemuck::Pod + PartialOrd + Send + Sync + std::fmt::Debug + sealed::Sealed + 'static
{
    /// The runtime tag of the type.
    const DATA_TYPE: DataType;

    /// `dst[i] = reduction(src[i], dst[i])` when `src_first`, else
    /// `reduction(dst[i], src[i])`. AVG combines as SUM; the division comes once at the end
    /// ([`Element::divide`]).
    #[doc(hidden)]
    fn combine(reduction: Reduction, dst: &mut [Self], src: &[Self], src_first: bool);

    /// `data[i] /= ranks`: the final step of AVG.
    #[doc(hidden)]
    fn divide(data: &mut [Self], ranks: usize);
}

/// Native types: SUM and PROD as given (`+`/`*` for floats, wrapping for integers).
macro_rules! native_element {
    ($t:ty, $tag:ident, $add:expr, $mul:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DATA_TYPE: DataType = DataType::$tag;

            fn combine(reduction: Reduction, dst: &mut [Self], src: &[Self], src_first: bool) {
                match reduction {
                    Reduction::Sum | Reduction::Avg => zip_apply(dst, src, src_first, $add),
                    Reduction::Prod => zip_apply(dst, src, src_first, $mul),
                    Reduction::Min => zip_apply(dst, src, src_first, min_of),
                    Reduction::Max => zip_apply(dst, src, src_first, max_of),
                }
            }

            fn divide(data: &mut [Self], ranks: usize) {
                let n = ranks as $t;
                for x in data {
                    *x /= n;
                }
            }
        }
    };
}

/// The 16-bit floats: each element is widened to f32, combined and narrowed again (one
/// rounding per combine). AVX2 kernels ([`crate::simd`]) take the bulk where the CPU has
/// them, the portable ones ([`crate::widen`]) the rest.
macro_rules! half_element {
    ($t:ty, $tag:ident, $simd_combine:path, $simd_divide:path) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DATA_TYPE: DataType = DataType::$tag;

            fn combine(reduction: Reduction, dst: &mut [Self], src: &[Self], src_first: bool) {
                let dst: &mut [u16] = bytemuck::cast_slice_mut(dst);
                let src: &[u16] = bytemuck::cast_slice(src);
                let done = $simd_combine(reduction, dst, src, src_first);
                widen::combine::<$t>(reduction, &mut dst[done..], &src[done..], src_first);
            }

            fn divide(data: &mut [Self], ranks: usize) {
                let data: &mut [u16] = bytemuck::cast_slice_mut(data);
                let done = $simd_divide(data, ranks);
                widen::divide::<$t>(&mut data[done..], ranks);
            }
        }
    };
}

native_element!(f32, F32, |a: f32, b: f32| a + b, |a: f32, b: f32| a * b);
native_element!(f64, F64, |a: f64, b: f64| a + b, |a: f64, b: f64| a * b);
native_element!(i32, I32, i32::wrapping_add, i32::wrapping_mul);
native_element!(i64, I64, i64::wrapping_add, i64::wrapping_mul);
native_element!(u32, U32, u32::wrapping_add, u32::wrapping_mul);
native_element!(u64, U64, u64::wrapping_add, u64::wrapping_mul);
half_element!(f16, F16, simd::combine_f16, simd::divide_f16);
half_element!(bf16, Bf16, simd::combine_bf16, simd::divide_bf16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_on_f32() {
        let src = [1.0f32, -2.0, 3.0];
        for (op, want) in [
            (Reduction::Sum, [3.0f32, 3.0, 3.0]),
            (Reduction::Avg, [3.0, 3.0, 3.0]),
            (Reduction::Prod, [2.0, -10.0, 0.0]),
            (Reduction::Min, [1.0, -2.0, 0.0]),
            (Reduction::Max, [2.0, 5.0, 3.0]),
        ] {
            let mut dst = [2.0f32, 5.0, 0.0];
            f32::combine(op, &mut dst, &src, false);
            assert_eq!(dst, want, "{op:?}");
        }
    }

    #[test]
    fn operand_order_decides_signed_zero() {
        let mut dst = [0.0f32];
        f32::combine(Reduction::Min, &mut dst, &[-0.0], true);
        assert!(dst[0].is_sign_negative(), "src first: min(-0, +0) keeps -0");
        let mut dst = [0.0f32];
        f32::combine(Reduction::Min, &mut dst, &[-0.0], false);
        assert!(dst[0].is_sign_positive(), "dst first: min(+0, -0) keeps +0");
    }

    #[test]
    fn integers_wrap_and_divide() {
        let mut dst = [i32::MAX, 7];
        i32::combine(Reduction::Sum, &mut dst, &[1, 2], false);
        assert_eq!(dst, [i32::MIN, 9]);
        i32::divide(&mut dst[1..], 2);
        assert_eq!(dst[1], 4);
        let mut u = [3u64, 4];
        u64::combine(Reduction::Prod, &mut u, &[5, 6], true);
        assert_eq!(u, [15, 24]);
    }

    #[test]
    fn half_types_round_once_per_combine() {
        let n = 2 * 1024 + 3;
        let mut dst: Vec<f16> = (0..n).map(|i| f16::from_f32(i as f32 * 0.5)).collect();
        let src: Vec<f16> = (0..n).map(|_| f16::from_f32(0.25)).collect();
        f16::combine(Reduction::Sum, &mut dst, &src, false);
        for (i, d) in dst.iter().enumerate() {
            assert_eq!(
                *d,
                f16::from_f32(f16::from_f32(i as f32 * 0.5).to_f32() + 0.25)
            );
        }
        let mut b = [bf16::from_f32(3.0), bf16::from_f32(-1.0)];
        bf16::combine(
            Reduction::Max,
            &mut b,
            &[bf16::from_f32(2.0), bf16::from_f32(4.0)],
            true,
        );
        assert_eq!(b, [bf16::from_f32(3.0), bf16::from_f32(4.0)]);
        bf16::divide(&mut b, 2);
        assert_eq!(b, [bf16::from_f32(1.5), bf16::from_f32(2.0)]);
    }
}
