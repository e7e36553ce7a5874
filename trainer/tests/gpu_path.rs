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
//! 1 rank (SGD and AdamW), bucket allreduces start before backward ends, GPU memory does not
//! grow over 20 steps, and the multi-tensor updates of SGD, Adam and AdamW on GPU tensors give
//! the CPU's.
//!
//! Tolerances: f32 as in `equivalence.rs` (summation order only). bf16 gradients carry 8
//! significant bits (relative rounding up to 2^-9 per element, once when packed and once per
//! pairwise sum), so after 5 SGD steps at lr 0.05 weights must satisfy |w_p - w_1| <=
//! 2e-3 + 1e-2 |w_1| and losses |l_p - l_1| <= 1e-2 |l_1|; observed: 1.5e-4 absolute.

mod common;

use common::*;
use trainer::{Optimizer, OptimizerKind};

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

/// Adam and AdamW scale each element's update by that element's own running gradient RMS,
/// so where an element's gradient nearly cancels over the batch, the rounding of the
/// summation order is not scaled down with the gradient: 2 ranks against 1 on an H200
/// differed by 8.3e-5 after 5 steps at lr 0.05. A bucket summed wrongly moves its elements
/// by about the learning rate each step, 100 times this tolerance.
const ADAM: Tolerance = Tolerance {
    loss_rtol: 1e-3,
    weight_atol: 5e-4,
    weight_rtol: 1e-3,
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
    let adamw_args = with(MLP, &["--device", "cuda", "--optimizer", "adamw"]);
    let adamw_one = train_recorded("cuda-adamw-1", 1, &adamw_args);
    let adamw_two = train_recorded("cuda-adamw-2", 2, &adamw_args);
    assert_close(&adamw_two, &adamw_one, &ADAM, "2 ranks on one GPU, AdamW");
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

/// Parameters of many shapes (libtorch's multi-tensor kernels split long lists and large
/// tensors into chunks), one left without a gradient, and a constant gradient for the rest:
/// `(parameters, gradients)` on the CPU, from a fixed seed.
fn optimizer_problem() -> (Vec<tch::Tensor>, Vec<tch::Tensor>) {
    tch::manual_seed(7);
    let shapes: Vec<Vec<i64>> = (0..40)
        .map(|i| match i % 4 {
            0 => vec![i + 1],
            1 => vec![3, i + 2],
            2 => vec![8, 4, 3, 3],
            _ => vec![1 << 16],
        })
        .chain([vec![1 << 21]])
        .collect();
    let kind = (tch::Kind::Float, tch::Device::Cpu);
    let params = shapes.iter().map(|s| tch::Tensor::randn(s, kind)).collect();
    let grads = shapes.iter().map(|s| tch::Tensor::randn(s, kind)).collect();
    (params, grads)
}

/// `steps` updates of `kind` on `device` from the parameters `initial` with the constant
/// gradients `grads` (both left as they are); the parameters after them, on the CPU.
/// Parameter 5 gets no gradient.
fn optimized(
    kind: OptimizerKind,
    device: tch::Device,
    initial: &[tch::Tensor],
    grads: &[tch::Tensor],
    steps: usize,
) -> Vec<tch::Tensor> {
    // A copy even on the CPU, where moving to the device would alias `initial`.
    let params: Vec<tch::Tensor> = initial
        .iter()
        .map(|p| p.to_device(device).copy().set_requires_grad(true))
        .collect();
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        if i != 5 {
            (p * g.to_device(device)).sum(tch::Kind::Float).backward();
        }
    }
    let mut opt = Optimizer::new(kind, &params, 0.01).unwrap();
    for _ in 0..steps {
        opt.step().unwrap();
    }
    params
        .iter()
        .map(|p| p.detach().to_device(tch::Device::Cpu))
        .collect()
}

#[test]
fn cuda_optimizer_updates_equal_the_cpu_updates() {
    if !cuda_or_skip() {
        return;
    }
    let (beta1, beta2, eps, weight_decay) = (0.9, 0.999, 1e-8, 0.1);
    let kinds = [
        OptimizerKind::Sgd {
            momentum: 0.9,
            weight_decay,
        },
        OptimizerKind::Adam {
            beta1,
            beta2,
            eps,
            weight_decay,
        },
        OptimizerKind::AdamW {
            beta1,
            beta2,
            eps,
            weight_decay,
        },
    ];
    let (initial, grads) = optimizer_problem();
    for kind in kinds {
        let cpu = optimized(kind, tch::Device::Cpu, &initial, &grads, 5);
        let gpu = optimized(kind, tch::Device::Cuda(0), &initial, &grads, 5);
        assert!(
            gpu[5].equal(&initial[5]),
            "{}: a parameter without a gradient changed",
            kind.name()
        );
        // The same float32 arithmetic in another order (fused kernels): a few ulps of the
        // weights; a wrong formula or a skipped tensor moves them by the learning rate.
        for (i, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
            let diff = (g - c).abs().max().double_value(&[]);
            let moved = (c - &initial[i]).abs().max().double_value(&[]);
            assert!(
                diff <= 1e-5,
                "{}: parameter {i} differs by {diff:e} between the GPU and the CPU (moved {moved:e})",
                kind.name()
            );
            assert!(
                i == 5 || moved > 0.0,
                "{}: parameter {i} moved only {moved:e}",
                kind.name()
            );
        }
        println!("{}: GPU and CPU updates agree within 1e-5", kind.name());
    }
}
