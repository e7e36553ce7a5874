//! Every algorithm × type × op × count, on 1–5 ranks over TCP and shared memory, checked
//! against a serial reference on every rank, with bit-identical results across ranks and
//! across two runs of the same collective.

mod common;

use std::sync::Arc;

use allreduce::{bf16, f16, Algorithm, Allreduce, Options, Reduction};
use common::{assert_same_everywhere, fingerprint, TestElem};
use gaspi::{Context, Group, Timeout};

const COUNTS: [usize; 6] = [0, 1, 7, 1000, 1003, (1 << 20) + 3];
const OPS: [Reduction; 5] = [
    Reduction::Sum,
    Reduction::Min,
    Reduction::Max,
    Reduction::Prod,
    Reduction::Avg,
];
const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::Ring,
    Algorithm::RecursiveDoubling,
    Algorithm::Rabenseifner,
    Algorithm::OneShot,
];

/// Rank `r`'s element `j` in run `run`: small values, and only 1s and 2s for PROD so that
/// products stay exact even in half precision.
fn input(op: Reduction, signed: bool, r: usize, j: usize, run: usize) -> i64 {
    let h = (r * 7 + j * 13 + run * 5) % 17;
    match op {
        Reduction::Prod => 1 + (h % 2) as i64,
        _ if signed => h as i64 - 8,
        _ => h as i64,
    }
}

fn reference(op: Reduction, signed: bool, p: usize, j: usize, run: usize) -> f64 {
    let vals = (0..p).map(|r| input(op, signed, r, j, run));
    match op {
        Reduction::Sum => vals.sum::<i64>() as f64,
        Reduction::Prod => vals.product::<i64>() as f64,
        Reduction::Min => vals.min().unwrap() as f64,
        Reduction::Max => vals.max().unwrap() as f64,
        Reduction::Avg => vals.sum::<i64>() as f64 / p as f64,
    }
}

fn check_type<T: TestElem>(ctx: &Arc<Context>, alg: Algorithm) {
    let p = ctx.num_ranks() as usize;
    let me = ctx.rank().0 as usize;
    for count in COUNTS {
        for op in OPS {
            let options = Options {
                algorithm: alg,
                ..Options::default()
            };
            let mut ar = Allreduce::<T>::new(ctx, Group::ALL, count, op, options)
                .unwrap_or_else(|e| panic!("setup {alg:?} {op:?} n={count}: {e}"));
            let mut first = None;
            for _run in 0..2 {
                // The second run repeats the first run's input: its bits must not change.
                let gen = 0;
                for (j, x) in ar.input_mut().unwrap().iter_mut().enumerate() {
                    *x = T::from_small(input(op, T::SIGNED, me, j, gen));
                }
                ar.start().unwrap();
                let out = ar.wait(Timeout::ms(60_000)).unwrap_or_else(|e| {
                    panic!(
                        "{} {alg:?} {op:?} n={count}: {e}",
                        std::any::type_name::<T>()
                    )
                });
                for (j, got) in out.iter().enumerate() {
                    let want = reference(op, T::SIGNED, p, j, gen);
                    let want = if T::TOL == 0.0 { want.trunc() } else { want };
                    let got = got.to_f64();
                    assert!(
                        (got - want).abs() <= T::TOL * want.abs().max(1.0),
                        "{} {alg:?} {op:?} p={p} n={count}: element {j} is {got}, want {want}",
                        std::any::type_name::<T>()
                    );
                }
                let fp = fingerprint(out);
                assert_eq!(*first.get_or_insert(fp), fp, "run-to-run bits differ");
                assert_same_everywhere(ctx, Group::ALL, fp, "allreduce result");
            }
        }
    }
}

fn all_types(ctx: Context) {
    let ctx = Arc::new(ctx);
    // Single-copy needs every member on this host, reached through shared memory.
    let one_host = (0..ctx.num_ranks())
        .map(gaspi::Rank)
        .all(|r| r == ctx.rank() || ctx.uses_shm_to(r));
    let single_copy = one_host.then_some(Algorithm::SingleCopy);
    for alg in ALGORITHMS.into_iter().chain(single_copy) {
        check_type::<f32>(&ctx, alg);
        check_type::<f64>(&ctx, alg);
        check_type::<f16>(&ctx, alg);
        check_type::<bf16>(&ctx, alg);
        check_type::<i32>(&ctx, alg);
        check_type::<i64>(&ctx, alg);
        check_type::<u32>(&ctx, alg);
        check_type::<u64>(&ctx, alg);
    }
}

macro_rules! cases {
    ($($case:ident = ($n:expr, $t:ident)),+ $(,)?) => {$(
        #[test]
        fn $case() {
            gaspi::testing::spmd_with(
                concat!(stringify!($case)),
                $n,
                gaspi::env::TransportChoice::$t,
                gaspi::Config::default(),
                std::time::Duration::from_secs(300),
                all_types,
            );
        }
    )+};
}

cases!(
    tcp_1 = (1, Tcp),
    tcp_2 = (2, Tcp),
    tcp_3 = (3, Tcp),
    tcp_4 = (4, Tcp),
    tcp_5 = (5, Tcp),
    shm_1 = (1, Shm),
    shm_2 = (2, Shm),
    shm_3 = (3, Shm),
    shm_4 = (4, Shm),
    shm_5 = (5, Shm),
);
