//! The GPU gradient path and device selection.
//!
//! Without a GPU: `--device cuda` fails clearly, `--device auto` trains on the CPU, and the
//! device path's staging (hooks pack each bucket into a flat buffer, copy it into the
//! allreduce's segment, the sum comes back through the same buffer) runs with CPU tensors
//! standing in (`--debug-device-staging`), in f32 and bf16, against one rank (its overlap with
//! backward is checked in `hooks_overlap.rs`). `--channels-last` trains as the default layout
//! does, on both staging paths, and its checkpoints save.
//!
//! With a GPU (skipped with a printed reason otherwise): 2 ranks on one GPU give the weights of
//! 1 rank, bucket allreduces start before backward ends, and GPU memory does not grow over 20
//! steps.
//!
//! Tolerances: f32 as in `equivalence.rs` (summation order only). bf16 gradients carry 8
//! significant bits (relative rounding up to 2^-9 per element, once when packed and once per
//! pairwise sum), so after 5 SGD steps at lr 0.05 weights must satisfy |w_p - w_1| <=
//! 2e-3 + 1e-2 |w_1| and losses |l_p - l_1| <= 1e-2 |l_1|; observed: 1.5e-4 absolute.

mod common;

use common::*;

const F32: Tolerance = Tolerance {
    loss_rtol: 1e-4,
    weight_atol: 1e-5,
    weight_rtol: 1e-4,
};

const BF16: Tolerance = Tolerance {
    loss_rtol: 1e-2,
    weight_atol: 2e-3,
    weight_rtol: 1e-2,
};

/// Global batch 10 (5+5 on 2 ranks, 4+3+3 on 3), 5 steps; at a 4 KiB fusion threshold most
/// tensors get a bucket of their own, so several buckets travel per step.
const STEPS: &[&str] = &[
    "--batch-size",
    "10",
    "--samples",
    "50",
    "--max-steps",
    "5",
    "--lr",
    "0.05",
    "--fusion-threshold",
    "4",
];

/// MLP 784-64-32-10.
const MLP: &[&str] = &["--model", "mlp", "--hidden", "64,32"];

/// LeNet-5 (two convolutions), for the channels-last layout.
const LENET: &[&str] = &["--model", "lenet5"];

/// `model`'s arguments, [`STEPS`], then `extra`.
fn with(model: &[&'static str], extra: &[&'static str]) -> Vec<&'static str> {
    model.iter().chain(STEPS).chain(extra).copied().collect()
}

#[test]
fn device_staging_with_cpu_tensors_matches_one_rank() {
    let one = train_recorded("staging-1", 1, &with(MLP, &["--device", "cpu"]));
    for n in [2, 3] {
        let args = with(MLP, &["--device", "cpu", "--debug-device-staging"]);
        let run = train_recorded(&format!("staging-{n}"), n, &args);
        assert_close(&run, &one, &F32, &format!("{n} ranks, device staging"));
    }
}

#[test]
fn channels_last_trains_as_the_default_layout_on_both_staging_paths() {
    let default = train_recorded("lenet-1", 1, &with(LENET, &["--device", "cpu"]));
    let nhwc_args = with(LENET, &["--device", "cpu", "--channels-last"]);
    let nhwc = train_recorded("lenet-nhwc-1", 1, &nhwc_args);
    // The convolutions add in another order (observed: 6e-8): F32's summation-order bound.
    assert_close(&nhwc, &default, &F32, "channels-last, 1 rank");
    let host = train_recorded("lenet-nhwc-2", 2, &nhwc_args);
    assert_close(&host, &nhwc, &F32, "channels-last, 2 ranks");
    let staged = with(
        LENET,
        &[
            "--device",
            "cpu",
            "--channels-last",
            "--debug-device-staging",
        ],
    );
    let device = train_recorded("lenet-nhwc-3-staged", 3, &staged);
    assert_close(
        &device,
        &nhwc,
        &F32,
        "channels-last, 3 ranks, device staging",
    );
}

#[test]
fn bf16_gradients_stay_within_their_tolerance_of_one_rank() {
    let one = train_recorded("bf16-1", 1, &with(MLP, &["--device", "cpu"]));
    for (name, extra) in [
        ("bf16-host", &["--grad-dtype", "bf16"][..]),
        (
            "bf16-staged",
            &["--grad-dtype", "bf16", "--debug-device-staging"][..],
        ),
    ] {
        let args = with(MLP, &[&["--device", "cpu"][..], extra].concat());
        let run = train_recorded(name, 2, &args);
        assert_close(&run, &one, &BF16, name);
        // bf16 really travelled: not bit-equal to the f32 path.
        let f32_run = train_recorded(&format!("{name}-f32"), 2, &with(MLP, &["--device", "cpu"]));
        assert_ne!(
            run.records.last().unwrap().checksum,
            f32_run.records.last().unwrap().checksum,
            "{name}: bf16 gave the f32 result bit for bit"
        );
    }
}

#[test]
fn cuda_without_a_gpu_is_a_clear_error_and_auto_uses_the_cpu() {
    if tch::Cuda::is_available() {
        println!("skipped: this machine has a GPU");
        return;
    }
    let out = run_train(2, &["--device", "cuda", "--max-steps", "1"]);
    for r in 0..2 {
        assert_eq!(code(&out, r), Some(1), "{}", out.report());
        let err = &out.ranks[r].stderr;
        assert!(
            err.contains("--device cuda: no CUDA GPU is available"),
            "{}",
            out.report()
        );
    }
    let out = run_train_env(
        2,
        &[
            "--device",
            "auto",
            "--max-steps",
            "2",
            "--samples",
            "128",
            "--cudnn-benchmark",
        ],
        &[(tnt_env::LOG, "info")],
    );
    out.assert_success();
    let err = &out.ranks[0].stderr;
    assert!(err.contains("training on the CPU"), "{}", out.report());
    assert!(
        err.contains("--cudnn-benchmark on the CPU: no effect"),
        "{}",
        out.report()
    );
}

/// Skips (with the reason on stdout) unless libtorch sees a GPU.
fn cuda_or_skip() -> bool {
    if tch::Cuda::is_available() {
        return true;
    }
    println!("skipped: no CUDA GPU (libtorch sees none); runs on a GPU machine");
    false
}

#[test]
fn cuda_two_ranks_on_one_gpu_match_one_rank() {
    if !cuda_or_skip() {
        return;
    }
    let one = train_recorded("cuda-1", 1, &with(MLP, &["--device", "cuda"]));
    let two = train_recorded("cuda-2", 2, &with(MLP, &["--device", "cuda"]));
    assert_close(&two, &one, &F32, "2 ranks on one GPU");
    let bf16 = train_recorded(
        "cuda-2-bf16",
        2,
        &with(MLP, &["--device", "cuda", "--grad-dtype", "bf16"]),
    );
    assert_close(&bf16, &one, &BF16, "2 ranks on one GPU, bf16 gradients");
    let nhwc_args = with(LENET, &["--device", "cuda", "--channels-last"]);
    let nhwc_one = train_recorded("cuda-nhwc-1", 1, &nhwc_args);
    let nhwc_two = train_recorded("cuda-nhwc-2", 2, &nhwc_args);
    assert_close(
        &nhwc_two,
        &nhwc_one,
        &F32,
        "2 ranks on one GPU, channels-last",
    );
}

#[test]
fn cuda_buckets_start_during_backward_and_memory_is_stable() {
    if !cuda_or_skip() {
        return;
    }
    // ResNet-50 at batch 16 per rank: backward takes milliseconds on a GPU, and its 161
    // tensors make many buckets at 64 KiB. `--profile` makes each step wait for the GPU to
    // finish backward before noting its end (`backward_returned_ns`): the hooks run when the
    // host queues the work, well before the GPU has done it, so the last hook's time says
    // nothing about when backward ended on the GPU.
    let args = [
        "--model",
        "resnet50",
        "--batch-size",
        "32",
        "--samples",
        "1024",
        "--max-steps",
        "22",
        "--fusion-threshold",
        "64",
        "--device",
        "cuda",
        "--profile",
    ];
    let run = train_recorded("cuda-resnet50", 2, &args);
    let early = run
        .records
        .iter()
        .filter(|r| r.list("start_ns").into_iter().min().unwrap() < r.num("backward_returned_ns"))
        .count();
    assert!(
        early >= 10,
        "only {early} of 22 steps started a bucket before the GPU finished backward"
    );
    let bytes: Vec<u64> = run.records.iter().map(|r| r.num("device_bytes")).collect();
    assert!(bytes[1] > 0, "no GPU memory recorded");
    assert!(
        bytes[2..].iter().all(|&b| b <= bytes[1]),
        "GPU memory grew after step 2: {bytes:?}"
    );
}
