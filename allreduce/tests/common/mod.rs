//! Helpers shared by the multi-process allreduce tests.

#![allow(dead_code)]

use allreduce::{bf16, f16, Element};
use gaspi::{Context, Group, ReduceOp, Timeout};

/// Test values: small integers, so sums, products and extremes are exact in every type.
pub trait TestElem: Element {
    fn from_small(v: i64) -> Self;
    fn to_f64(self) -> f64;
    /// Relative tolerance against the exact result (only AVG and rounding of halves).
    const TOL: f64;
    const SIGNED: bool;
}

macro_rules! test_elem {
    ($t:ty, $tol:expr, $signed:expr, $from:expr, $to:expr) => {
        impl TestElem for $t {
            fn from_small(v: i64) -> Self {
                let f: fn(i64) -> $t = $from;
                f(v)
            }
            fn to_f64(self) -> f64 {
                let f: fn($t) -> f64 = $to;
                f(self)
            }
            const TOL: f64 = $tol;
            const SIGNED: bool = $signed;
        }
    };
}

test_elem!(f32, 1e-6, true, |v| v as f32, |x| x as f64);
test_elem!(f64, 1e-12, true, |v| v as f64, |x| x);
test_elem!(f16, 1e-3, true, |v| f16::from_f32(v as f32), |x| x.to_f64());
test_elem!(bf16, 8e-3, true, |v| bf16::from_f32(v as f32), |x| x
    .to_f64());
test_elem!(i32, 0.0, true, |v| v as i32, |x| x as f64);
test_elem!(i64, 0.0, true, |v| v, |x| x as f64);
test_elem!(u32, 0.0, false, |v| v as u32, |x| x as f64);
test_elem!(u64, 0.0, false, |v| v as u64, |x| x as f64);

/// FNV-1a over the result's bytes.
pub fn fingerprint<T: Element>(data: &[T]) -> u64 {
    bytemuck::cast_slice::<T, u8>(data)
        .iter()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
        })
}

/// Asserts that every member of `group` holds the same `value`.
pub fn assert_same_everywhere(ctx: &Context, group: Group, value: u64, what: &str) {
    let (mut lo, mut hi) = ([0u64], [0u64]);
    ctx.allreduce(&[value], &mut lo, ReduceOp::Min, group, Timeout::ms(30_000))
        .expect("min");
    ctx.allreduce(&[value], &mut hi, ReduceOp::Max, group, Timeout::ms(30_000))
        .expect("max");
    assert_eq!(lo, hi, "{what}: ranks hold different bits");
}
