//! Helpers shared by the multi-process allreduce tests.

#![allow(dead_code)]

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::sync::Arc;
use std::time::Duration;

use allreduce::{bf16, f16, DataType, Element, Reduction};
use gaspi::env::TransportChoice;
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

/// A generous bound on every call of a test (a failure shows long before it).
pub const LONG: Timeout = Timeout::ms(60_000);

/// Runs `body` on `n` rank processes over transport `t` (the test binary started again as
/// each rank), with the context shared; every rank then meets the others in a barrier, so
/// that nobody leaves while a peer may still need its messages.
pub fn spmd(name: &str, n: u16, t: TransportChoice, body: impl FnOnce(Arc<Context>)) {
    gaspi::testing::spmd_with(
        name,
        n,
        t,
        gaspi::Config::default(),
        Duration::from_secs(120),
        |ctx| {
            let ctx = Arc::new(ctx);
            body(Arc::clone(&ctx));
            ctx.barrier(Group::ALL, LONG).unwrap();
        },
    );
}

/// Test `name` as a job of `n` ranks over TCP whose last rank dies on purpose. In the
/// test's own process: runs the job, checks that it did not time out and that every other
/// rank succeeded, and returns `true` (the test is done). In a rank: returns `false`, and
/// the test goes on with its body.
pub fn ran_with_a_dying_last_rank(name: &str, n: u16) -> bool {
    let tcp = TransportChoice::Tcp;
    let Some(out) = gaspi::testing::spmd_job(name, n, tcp, Duration::from_secs(120), |_| {}) else {
        return false;
    };
    assert!(!out.timed_out, "{}", out.report());
    for rank in &out.ranks[..usize::from(n) - 1] {
        assert!(rank.status.is_some_and(|s| s.success()), "{}", out.report());
    }
    true
}

/// A hash of the result's bits, the same in every rank of one build: std's SipHash with
/// fixed keys, which runs optimized even in the tests' unoptimized build (over megabyte
/// results, a byte-by-byte loop compiled here took most of a test's time).
pub fn fingerprint<T: Element>(data: &[T]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytemuck::cast_slice::<T, u8>(data));
    hasher.finish()
}

/// The test inputs repeat every `PERIOD` elements (see [`input`]).
pub const PERIOD: usize = 17;

/// Rank `r`'s element `j`: small values, and only 1s and 2s for PROD so that products stay
/// exact even in half precision. Periodic in `j` with period [`PERIOD`].
pub fn input(op: Reduction, signed: bool, r: usize, j: usize) -> i64 {
    let h = (r * 7 + j * 13) % PERIOD;
    match op {
        Reduction::Prod => 1 + (h % 2) as i64,
        _ if signed => h as i64 - 8,
        _ => h as i64,
    }
}

/// The exact result of `op` over `p` ranks' element `j`.
pub fn reference(op: Reduction, signed: bool, p: usize, j: usize) -> f64 {
    let vals = (0..p).map(|r| input(op, signed, r, j));
    match op {
        Reduction::Sum => vals.sum::<i64>() as f64,
        Reduction::Prod => vals.product::<i64>() as f64,
        Reduction::Min => vals.min().unwrap_or(0) as f64,
        Reduction::Max => vals.max().unwrap_or(0) as f64,
        Reduction::Avg => vals.sum::<i64>() as f64 / p as f64,
    }
}

/// Fills `data` with rank `me`'s input for `op`: one period computed, then copied.
pub fn fill_input<T: TestElem>(data: &mut [T], op: Reduction, me: usize) {
    let period: Vec<T> = (0..PERIOD.min(data.len()))
        .map(|j| T::from_small(input(op, T::SIGNED, me, j)))
        .collect();
    for part in data.chunks_mut(PERIOD) {
        part.copy_from_slice(&period[..part.len()]);
    }
}

/// Checks an allreduce's result `out` of `op` over `p` ranks (inputs from [`fill_input`]):
/// the first period element by element against [`reference`] within `T`'s tolerance, and
/// every later element bit for bit against its counterpart in the first period. The
/// results repeat as the inputs do, bit for bit: sums, products and extremes of the small
/// inputs are exact in every type, whatever the order of reduction, and integer AVG
/// divides the exact sum once. (Compared as bytes, the check stays fast in the unoptimized
/// build.) `f16` AVG: see [`check_rounded_average`].
pub fn check_output<T: TestElem>(out: &[T], op: Reduction, p: usize) -> Result<(), String> {
    if op == Reduction::Avg && T::DATA_TYPE == DataType::F16 {
        return check_rounded_average(out, p);
    }
    for (j, got) in out.iter().take(PERIOD).enumerate() {
        let want = reference(op, T::SIGNED, p, j);
        let want = if T::TOL == 0.0 { want.trunc() } else { want };
        let got = got.to_f64();
        if (got - want).abs() > T::TOL * want.abs().max(1.0) {
            return Err(format!("element {j} is {got}, want {want}"));
        }
    }
    let bytes: &[u8] = bytemuck::cast_slice(out);
    let period_bytes = PERIOD * std::mem::size_of::<T>();
    let (first, rest) = bytes.split_at(period_bytes.min(bytes.len()));
    for (i, part) in rest.chunks(period_bytes).enumerate() {
        if part != &first[..part.len()] {
            let at = part
                .iter()
                .zip(first)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let j = (i + 1) * PERIOD + at / std::mem::size_of::<T>();
            let (got, want) = (out[j].to_f64(), out[j % PERIOD].to_f64());
            return Err(format!(
                "element {j} is {got}, but element {} (the same inputs) is {want}",
                j % PERIOD
            ));
        }
    }
    Ok(())
}

/// `f16` AVG divides each member's vector before the sum (see `Reduction::Avg`),
/// so its terms are rounded and an element's bits depend on the order its terms were added
/// in, which differs between elements. Every element is compared with the exact average,
/// within the rounding of its at most `2p` operations on values up to 8 (`TOL` is about
/// twice the type's unit roundoff).
fn check_rounded_average<T: TestElem>(out: &[T], p: usize) -> Result<(), String> {
    let want: Vec<f64> = (0..PERIOD)
        .map(|j| reference(Reduction::Avg, T::SIGNED, p, j))
        .collect();
    let tol = 8.0 * p as f64 * T::TOL;
    for (j, got) in out.iter().enumerate() {
        let (got, want) = (got.to_f64(), want[j % PERIOD]);
        if (got - want).abs() > tol {
            return Err(format!("element {j} is {got}, want {want}"));
        }
    }
    Ok(())
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
