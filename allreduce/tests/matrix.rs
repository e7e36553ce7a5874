//! Every algorithm × type × op × count, on 1–5 ranks over TCP and shared memory, checked
//! against a serial reference on every rank, with bit-identical results across ranks and
//! across two runs of the same collective.

mod common;

use std::sync::Arc;

use allreduce::{bf16, f16, Algorithm, Allreduce, Options, Reduction};
use common::{assert_same_everywhere, check_output, fill_input, fingerprint, TestElem};
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

fn check_type<T: TestElem>(ctx: &Arc<Context>, options: &Options) {
    let p = ctx.num_ranks() as usize;
    let me = ctx.rank().0 as usize;
    let alg = match options.cache_bytes {
        Some(c) => format!("{:?} (cache {c} bytes)", options.algorithm),
        None => format!("{:?}", options.algorithm),
    };
    for count in COUNTS {
        for op in OPS {
            let mut ar = Allreduce::<T>::new(ctx, Group::ALL, count, op, options.clone())
                .unwrap_or_else(|e| panic!("setup {alg} {op:?} n={count}: {e}"));
            let mut first = None;
            for _run in 0..2 {
                // The second run repeats the first run's input: its bits must not change.
                fill_input(ar.input_mut().unwrap(), op, me);
                ar.start().unwrap();
                let name = std::any::type_name::<T>();
                let out = ar
                    .wait(Timeout::ms(60_000))
                    .unwrap_or_else(|e| panic!("{name} {alg} {op:?} n={count}: {e}"));
                if let Err(wrong) = check_output(out, op, p) {
                    panic!("{name} {alg} {op:?} p={p} n={count}: {wrong}");
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
    let mut cases: Vec<Options> = ALGORITHMS
        .into_iter()
        .chain(single_copy)
        .map(|algorithm| Options {
            algorithm,
            ..Options::default()
        })
        .collect();
    // Single-copy as it runs on a host whose cache holds every vector (each rank writes its
    // finished block into the peers' buffers) and as past the cache (the peers copy it,
    // with streaming stores), whatever the cache of the host running the tests.
    for cache_bytes in [usize::MAX, 0] {
        cases.extend(single_copy.map(|algorithm| Options {
            algorithm,
            cache_bytes: Some(cache_bytes),
            ..Options::default()
        }));
    }
    for options in &cases {
        check_type::<f32>(&ctx, options);
        check_type::<f64>(&ctx, options);
        check_type::<f16>(&ctx, options);
        check_type::<bf16>(&ctx, options);
        check_type::<i32>(&ctx, options);
        check_type::<i64>(&ctx, options);
        check_type::<u32>(&ctx, options);
        check_type::<u64>(&ctx, options);
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

/// The check the cases rely on finds a wrong element wherever it lies, in the period it
/// compares with the reference or past it, for exact results and for `f16` averages
/// (divided first).
#[test]
fn the_check_finds_a_wrong_element_anywhere() {
    fn check<T: TestElem>(op: Reduction, from: fn(f32) -> T, divide_first: bool) {
        let (p, n) = (3, 1000);
        let mut out = vec![0f32; n];
        let mut part = vec![T::from_small(0); n];
        for r in 0..p {
            fill_input(&mut part, op, r);
            for (o, x) in out.iter_mut().zip(&part) {
                *o += x.to_f64() as f32 / if divide_first { p as f32 } else { 1.0 };
            }
        }
        let out: Vec<T> = out.into_iter().map(from).collect();
        assert_eq!(check_output(&out, op, p), Ok(()), "{op:?}");
        for j in [3, common::PERIOD, 500, n - 1] {
            let mut wrong = out.clone();
            wrong[j] = from(wrong[j].to_f64() as f32 + 1.0);
            let message = check_output(&wrong, op, p).unwrap_err();
            assert!(
                message.starts_with(&format!("element {j} ")),
                "{op:?}: {message}"
            );
        }
    }
    check::<f32>(Reduction::Sum, |x| x, false);
    check::<f16>(Reduction::Avg, f16::from_f32, true);
}
