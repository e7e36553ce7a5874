//! How fast this machine runs right now, beside a measurement: `benches/sim/measure.sh`
//! records it before each configuration of each round, so that a run measured while the VM was slower throughout can be
//! told from the simulator's own misses (docs/allreduce.md, "Simulator", session 30: one
//! run was 1.24x slower than the ones before at every size and transport).
//!
//! Prints one line, `copy_gbs line_us handoff_us`, each the median of its samples:
//! - `copy_gbs`: one core copying 4 MiB (in the last-level cache) into another buffer;
//! - `line_us`: two threads passing a counter back and forth through one cache line, per
//!   one-way pass;
//! - `handoff_us`: two threads taking turns to rewrite a 256 KiB buffer the other has just
//!   written, per turn (the lines move between the cores' private caches).
//!
//! With two cores and nothing else running, the two spinning threads run on both cores.
//!
//! `--by-size` prints instead, per buffer size, one core's copy and reduction (f32 sum into
//! a second buffer) in GB/s of the buffer, the best of its samples: where the private
//! cache, the last-level cache and memory begin (the simulator's `private_bytes`,
//! `cache_bytes` and their rates; docs/allreduce.md, "Simulator", session 32).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use tarantella_benches::median;

/// Far longer than a turn takes between two cores (the 256 KiB buffer's: 5-13 µs here).
/// Why not shorter: yielding at 50 µs made every fourth probe read about 60 µs a turn.
const OVERDUE: Duration = Duration::from_millis(1);

#[derive(Parser, Debug)]
#[command(
    name = "vm-speed",
    about = "This machine's speed now: one core's in-cache copy (GB/s), a cache line's and \
             a 256 KiB buffer's trip between two threads (us); one line, medians"
)]
struct Args {
    /// Samples of each measurement.
    #[arg(long, default_value_t = 15)]
    samples: usize,
    /// One core's copy and reduction by buffer size, 32 KiB to 256 MiB, instead.
    #[arg(long)]
    by_size: bool,
}

/// GB/s of copying `bytes` within one core's reach, 8 copies a sample.
fn copy_gbs(bytes: usize, samples: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.copy_from_slice(&src);
    let samples = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..8 {
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
            }
            8.0 * bytes as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    median(samples)
}

/// Two threads take turns: each waits for `turn` to reach its value, rewrites every word
/// of `buffer` (read the other's value, write its own), and passes the turn on. Returns the
/// median over `samples` samples of `turns` turns each of the µs per turn.
fn take_turns(words: usize, turns: u64, samples: usize) -> f64 {
    let turn = AtomicU64::new(0);
    let buffer: Vec<AtomicU64> = (0..words).map(|_| AtomicU64::new(0)).collect();
    let rewrite = |t: u64| {
        for w in &buffer {
            let v = w.load(Ordering::Relaxed);
            w.store(v.wrapping_add(t), Ordering::Relaxed);
        }
    };
    let run = |first: u64| {
        let mut per_turn = Vec::with_capacity(samples);
        for s in 0..samples as u64 {
            let base = s * turns * 2;
            let t = Instant::now();
            for i in 0..turns {
                let mine = base + 2 * i + first;
                let waiting = Instant::now();
                while turn.load(Ordering::Acquire) != mine {
                    // Spin, but yield once the turn is overdue: where other load puts both
                    // threads on one core, spinning would hold it a time slice per turn.
                    if waiting.elapsed() < OVERDUE {
                        std::hint::spin_loop();
                    } else {
                        thread::yield_now();
                    }
                }
                rewrite(mine);
                turn.store(mine + 1, Ordering::Release);
            }
            per_turn.push(t.elapsed().as_secs_f64() * 1e6 / (2 * turns) as f64);
        }
        per_turn
    };
    // The other thread's samples are the same turns seen from its side.
    let mine = thread::scope(|scope| {
        scope.spawn(|| run(1));
        run(0)
    });
    median(mine)
}

/// GB/s of one core copying `bytes` into another buffer and of adding one buffer of f32
/// into another, the best of `samples` samples of about 0.1 s each.
fn copy_and_reduce_gbs(bytes: usize, samples: usize) -> (f64, f64) {
    let n = bytes / 4;
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let passes = (400_000_000 / bytes).max(2);
    let best = |pass: &mut dyn FnMut()| {
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..passes {
                    pass();
                }
                (passes * bytes) as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .fold(0.0, f64::max)
    };
    let copy = best(&mut || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    });
    let reduce = best(&mut || {
        for (d, s) in dst.iter_mut().zip(black_box(&src)) {
            *d += *s;
        }
        black_box(&mut dst);
    });
    (copy, reduce)
}

fn main() {
    let args = Args::parse();
    let samples = args.samples.max(1);
    if args.by_size {
        println!("# bytes copy_gbs reduce_gbs (one core, best of {samples})");
        for kib in [
            32, 128, 512, 768, 1024, 1536, 2048, 4096, 16384, 32768, 49152, 131072,
        ] {
            let (copy, reduce) = copy_and_reduce_gbs(kib << 10, samples);
            println!("{} {copy:.1} {reduce:.1}", kib << 10);
        }
        return;
    }
    let copy = copy_gbs(4 << 20, samples);
    let line = take_turns(0, 500, samples);
    let handoff = take_turns((256 << 10) / 8, 20, samples);
    println!("{copy:.1} {line:.3} {handoff:.1}");
}
