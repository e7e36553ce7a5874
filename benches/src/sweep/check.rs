//! Inputs whose reduction is known exactly, and the count of wrong elements (`#wrong`).
//!
//! Every input element is a small integer: 0 to 3, or 1 and 2 for PROD. Sums stay small,
//! products are powers of two, so every partial result of any algorithm is exact in every
//! type until a sum outgrows the type's mantissa (bf16 beyond 85 ranks) or a product
//! overflows (integers wrap, floats reach infinity: the same in any order). The expected
//! result is the same reduction done here, rank after rank, with the crate's own kernels;
//! floating-point results may differ from it by the rounding of `nranks` combines.

use allreduce::{bf16, f16, Element, Reduction};

/// An element type the sweep can fill and check.
pub trait Sample: Element {
    /// Relative error one combine may add (0 for integers: they must match exactly).
    const EPSILON: f64;
    /// `v` in this type (exact: `v` is at most 3).
    fn small(v: u8) -> Self;
    /// The value as `f64`, where the expected results are computed and compared.
    fn as_f64(self) -> f64;
}

macro_rules! integer_sample {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            const EPSILON: f64 = 0.0;
            fn small(v: u8) -> Self {
                v.into()
            }
            fn as_f64(self) -> f64 {
                // Only read when EPSILON > 0, i.e. never for integers.
                self as f64
            }
        }
    )*};
}

integer_sample!(i32, i64, u32, u64);

impl Sample for f32 {
    const EPSILON: f64 = f32::EPSILON as f64;
    fn small(v: u8) -> Self {
        v.into()
    }
    fn as_f64(self) -> f64 {
        self.into()
    }
}

impl Sample for f64 {
    const EPSILON: f64 = f64::EPSILON;
    fn small(v: u8) -> Self {
        v.into()
    }
    fn as_f64(self) -> f64 {
        self
    }
}

impl Sample for f16 {
    const EPSILON: f64 = 0.000_976_562_5; // 2^-10
    fn small(v: u8) -> Self {
        f16::from_f32(v.into())
    }
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

impl Sample for bf16 {
    const EPSILON: f64 = 0.007_812_5; // 2^-7
    fn small(v: u8) -> Self {
        bf16::from_f32(v.into())
    }
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

/// Rank `rank`'s element `j` for `op` (`None`: a broadcast's data).
pub fn input_value(op: Option<Reduction>, rank: usize, j: usize) -> u8 {
    match op {
        // 1 or 2: a product over any number of ranks is a power of two.
        Some(Reduction::Prod) => 1 + u8::from((rank + j).is_multiple_of(3)),
        // 0..=3, different on neighbouring ranks and elements, so that MIN and MAX pick
        // different ranks' values along the vector.
        _ => ((rank + 2 * j) % 4) as u8,
    }
}

/// Rank `rank`'s input vector.
pub fn inputs<T: Sample>(op: Option<Reduction>, rank: usize, count: usize) -> Vec<T> {
    (0..count)
        .map(|j| T::small(input_value(op, rank, j)))
        .collect()
}

/// What every rank should hold after the collective: `op` over all ranks' inputs, or the
/// root's input for a broadcast (`op` = `None`).
pub fn expected<T: Sample>(
    op: Option<Reduction>,
    root: usize,
    nranks: usize,
    count: usize,
) -> Vec<T> {
    let Some(op) = op else {
        return inputs(None, root, count);
    };
    let mut acc = inputs::<T>(Some(op), 0, count);
    for rank in 1..nranks {
        T::combine(op, &mut acc, &inputs(Some(op), rank, count), false);
    }
    if op == Reduction::Avg {
        T::divide(&mut acc, nranks);
    }
    acc
}

/// Elements of `got` that are neither equal to `want` nor, for floating-point types, within
/// the rounding `nranks` combines may add.
pub fn count_wrong<T: Sample>(got: &[T], want: &[T], nranks: usize) -> u64 {
    let tolerance = T::EPSILON * nranks as f64;
    let close = |g: T, w: T| {
        g == w || {
            let (g, w) = (g.as_f64(), w.as_f64());
            tolerance > 0.0 && (g - w).abs() <= tolerance * w.abs()
        }
    };
    let missing = want.len().abs_diff(got.len()) as u64;
    missing
        + got
            .iter()
            .zip(want)
            .filter(|(g, w)| !close(**g, **w))
            .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_f64s<T: Sample>(v: &[T]) -> Vec<f64> {
        v.iter().map(|x| x.as_f64()).collect()
    }

    #[test]
    fn sums_are_the_exact_integer_sums_in_every_type() {
        let want: Vec<f64> = (0..8)
            .map(|j| {
                (0..3)
                    .map(|r| f64::from(input_value(Some(Reduction::Sum), r, j)))
                    .sum()
            })
            .collect();
        assert_eq!(
            as_f64s(&expected::<f32>(Some(Reduction::Sum), 0, 3, 8)),
            want
        );
        assert_eq!(
            as_f64s(&expected::<bf16>(Some(Reduction::Sum), 0, 3, 8)),
            want
        );
        assert_eq!(
            as_f64s(&expected::<f16>(Some(Reduction::Sum), 0, 3, 8)),
            want
        );
        assert_eq!(
            as_f64s(&expected::<u64>(Some(Reduction::Sum), 0, 3, 8)),
            want
        );
    }

    #[test]
    fn min_and_max_take_different_ranks_values() {
        let min = expected::<i32>(Some(Reduction::Min), 0, 2, 4);
        let max = expected::<i32>(Some(Reduction::Max), 0, 2, 4);
        assert_eq!(min, [0, 2, 0, 2]);
        assert_eq!(max, [1, 3, 1, 3]);
    }

    #[test]
    fn products_are_powers_of_two_and_wrap_or_overflow_like_the_type() {
        let p = expected::<f32>(Some(Reduction::Prod), 0, 3, 3);
        assert_eq!(p, [2.0, 2.0, 2.0]);
        // 99 ranks: 33 factors of 2 per element.
        assert_eq!(expected::<u32>(Some(Reduction::Prod), 0, 99, 1), [0]);
        assert_eq!(expected::<u64>(Some(Reduction::Prod), 0, 99, 1), [1 << 33]);
        assert!(expected::<f16>(Some(Reduction::Prod), 0, 99, 1)[0].is_infinite());
    }

    #[test]
    fn averages_divide_once() {
        // Sums over 2 ranks of element 0 and 1: 0+1 and 2+3.
        assert_eq!(expected::<f64>(Some(Reduction::Avg), 0, 2, 2), [0.5, 2.5]);
        assert_eq!(expected::<i64>(Some(Reduction::Avg), 0, 2, 2), [0, 2]);
    }

    #[test]
    fn a_broadcast_expects_the_roots_data() {
        assert_eq!(expected::<u32>(None, 1, 4, 3), inputs::<u32>(None, 1, 3));
        assert_ne!(inputs::<u32>(None, 0, 3), inputs::<u32>(None, 1, 3));
    }

    #[test]
    fn wrong_elements_are_counted_with_a_float_tolerance_only() {
        let want = [100.0f32, 200.0, 300.0];
        assert_eq!(count_wrong(&want, &want, 2), 0);
        assert_eq!(count_wrong(&[100.00001f32, 200.0, 301.0], &want, 2), 1);
        assert_eq!(count_wrong(&[1u32, 2, 4], &[1u32, 2, 3], 64), 1);
        assert_eq!(count_wrong(&[1u32], &[1u32, 2, 3], 2), 2);
        assert_eq!(count_wrong(&[f16::INFINITY], &[f16::INFINITY], 2), 0);
        assert_eq!(count_wrong(&[f16::NAN], &[f16::ONE], 2), 1);
    }
}
