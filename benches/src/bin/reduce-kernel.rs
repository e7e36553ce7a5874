//! Speed of the allreduce reduction kernels alone against `copy_from_slice`, over buffers
//! that fit in cache (256 KiB, a ring chunk) and that do not (64 MiB):
//! `cargo run --release -p tarantella-benches --bin reduce-kernel`.
//! GB/s counts the bytes of the destination once (as a copy of the same size would).

use std::time::Instant;

use allreduce::{bf16, f16, Element, Reduction};
use clap::Parser;
use tarantella_benches::median;

/// No options yet: parsing still gives `--help` and rejects unknown flags instead of
/// silently running a minute-long benchmark.
#[derive(Parser, Debug)]
#[command(
    name = "reduce-kernel",
    about = "Speed of the allreduce reduction kernels (SUM, MAX) against copy_from_slice, \
             for f32, f64, i32, f16 and bf16 on 256 KiB (in cache) and 64 MiB buffers"
)]
struct Args {}

fn rate(bytes: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let samples = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    median(samples)
}

fn kernel<T: Element>(name: &str, bytes: usize, reps: usize, one: T) {
    let n = bytes / std::mem::size_of::<T>();
    let src = vec![one; n];
    let mut dst = vec![one; n];
    let sum = rate(bytes, reps, || {
        T::combine(Reduction::Sum, &mut dst, &src, true);
        std::hint::black_box(&mut dst);
    });
    let max = rate(bytes, reps, || {
        T::combine(Reduction::Max, &mut dst, &src, false);
        std::hint::black_box(&mut dst);
    });
    let copy = rate(bytes, reps, || {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
    });
    println!(
        "{name:>5} {:>9} sum {sum:6.1} GB/s  max {max:6.1} GB/s  copy {copy:6.1} GB/s  sum/copy {:.2}",
        format!("{} KiB", bytes >> 10),
        sum / copy
    );
}

fn main() {
    Args::parse();
    for (bytes, reps) in [(256 << 10, 2000), (64 << 20, 21)] {
        kernel("f32", bytes, reps, 1.0f32);
        kernel("f64", bytes, reps, 1.0f64);
        kernel("i32", bytes, reps, 1i32);
        kernel("f16", bytes, reps, f16::ONE);
        kernel("bf16", bytes, reps, bf16::ONE);
    }
}
