//! The nccl-tests table for allreduce over gaspi:
//!
//! ```text
//! cargo run --release -p tarantella-benches --bin allreduce-sweep -- -n 4 --transport shm
//! ```
//!
//! prints `size count type time_us algbw busbw maxerr` for f32 SUM over a size sweep, with
//! `algbw = bytes / time` and `busbw = algbw * 2(n-1)/n`. `time_us` is the maximum over
//! ranks of each rank's median batch. `--collective broadcast` times broadcast from rank 0
//! (busbw = algbw, as nccl-tests reports it).

use std::sync::Arc;
use std::time::Duration;

use allreduce::Algorithm;
use clap::{Parser, ValueEnum};
use gaspi::env::TransportChoice;
use gaspi::testing::Job;
use gaspi::Context;
use tarantella_benches::{
    allreduce_bw, iterations, parse_size, time_allreduce, time_broadcast, ROLE,
};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Transport {
    Tcp,
    Shm,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Algo {
    Auto,
    Ring,
    Rd,
    Rabenseifner,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Collective {
    Allreduce,
    Broadcast,
}

#[derive(Parser, Debug)]
#[command(about = "nccl-tests style sweep of tarantella collectives")]
struct Args {
    /// Ranks (processes on this host).
    #[arg(short = 'n', long, default_value_t = 2)]
    ranks: u16,
    #[arg(long, value_enum, default_value_t = Transport::Shm)]
    transport: Transport,
    #[arg(long, value_enum, default_value_t = Algo::Auto)]
    algorithm: Algo,
    #[arg(long, value_enum, default_value_t = Collective::Allreduce)]
    collective: Collective,
    /// Smallest message (bytes; K/M/G suffixes).
    #[arg(short = 'b', long, default_value = "4K", value_parser = parse_size)]
    min_bytes: usize,
    /// Largest message.
    #[arg(short = 'e', long, default_value = "64M", value_parser = parse_size)]
    max_bytes: usize,
    /// Size factor between steps.
    #[arg(short = 'f', long, default_value_t = 4)]
    factor: usize,
    /// Bytes of traffic per timed batch (sets the iteration count per size).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    budget: usize,
    /// Timed batches per size (the median is reported).
    #[arg(long, default_value_t = 5)]
    batches: usize,
}

fn rank_main(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Arc::new(Context::init()?);
    let algorithm = match args.algorithm {
        Algo::Auto => Algorithm::Auto,
        Algo::Ring => Algorithm::Ring,
        Algo::Rd => Algorithm::RecursiveDoubling,
        Algo::Rabenseifner => Algorithm::Rabenseifner,
    };
    let n = ctx.num_ranks() as usize;
    let master = ctx.rank().0 == 0;
    if master {
        println!(
            "# {:?} f32 sum, {n} ranks, transport {:?}, algorithm {:?}",
            args.collective, args.transport, args.algorithm
        );
        println!(
            "{:>12} {:>10} {:>6} {:>10} {:>8} {:>8} {:>8}",
            "size", "count", "type", "time_us", "algbw", "busbw", "maxerr"
        );
    }
    let mut bytes = args.min_bytes.max(4);
    while bytes <= args.max_bytes {
        let count = bytes / 4;
        let iters = iterations(bytes, args.budget);
        let (us, algbw, busbw, err) = match args.collective {
            Collective::Allreduce => {
                let t = time_allreduce(&ctx, count, algorithm, iters, args.batches)?;
                let (a, b) = allreduce_bw(count * 4, t.secs, n);
                (t.secs * 1e6, a, b, format!("{:.0e}", t.max_err))
            }
            Collective::Broadcast => {
                let secs = time_broadcast(&ctx, count, iters)?;
                let a = (count * 4) as f64 / secs / 1e9;
                (secs * 1e6, a, a, "-".into())
            }
        };
        if master {
            println!(
                "{:>12} {:>10} {:>6} {:>10.1} {:>8.2} {:>8.2} {:>8}",
                count * 4,
                count,
                "float",
                us,
                algbw,
                busbw,
                err
            );
        }
        bytes *= args.factor.max(2);
    }
    ctx.barrier(gaspi::Group::ALL, gaspi::Timeout::BLOCK)?;
    Ok(())
}

fn main() {
    let args = Args::parse();
    if std::env::var(ROLE).is_ok() {
        if let Err(e) = rank_main(&args) {
            eprintln!("rank failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut job = Job::new(args.ranks, std::env::current_exe().expect("own path"));
    job.args = std::env::args().skip(1).collect();
    job.transport = match args.transport {
        Transport::Tcp => TransportChoice::Tcp,
        Transport::Shm => TransportChoice::Shm,
    };
    job.env.push((ROLE.into(), "rank".into()));
    job.timeout = Duration::from_secs(3600);
    let out = job.run();
    let master = out.ranks.iter().find(|r| r.rank == 0);
    if let Some(m) = master {
        print!("{}", m.stdout);
    }
    if out.timed_out
        || out
            .ranks
            .iter()
            .any(|r| !r.status.is_some_and(|s| s.success()))
    {
        eprintln!("{}", out.report());
        std::process::exit(1);
    }
}
