//! Soak benchmark of the launcher and the runtime's start-up and teardown (issue 16; not run
//! in CI): many back-to-back short jobs started under `tarantella`, some of them killed at a
//! random point, and after each one a count of what it left on this host (processes, shared
//! memory files, job records), before and after `tarantella --cleanup`.
//!
//! `cargo build --release -p tarantella-launcher -p tarantella-benches --bins`, then
//! `target/release/soak --jobs 1000 --kill-fraction 0.1` (see `docs/soak.md`).
//!
//! Each job runs `tarantella -n RANKS --output-on-all-devices --job-id ID -- soak-rank ...`
//! with its own job id and `TARANTELLA_RUN_DIR` under the work directory. Its start time is
//! the time from spawning `tarantella` until the last rank's `Context::init` has returned,
//! both read from `CLOCK_MONOTONIC` (the ranks stamp their `ready` line with it). A killed
//! job gets SIGKILL or SIGTERM on its `tarantella`, or SIGKILL, SIGTERM or SIGSTOP on one
//! rank, as a rank starts, during init, or while the ranks run (`plan.rs`). The exit status
//! is 0 when no unkilled job failed, none hung, and nothing was left after cleanup.

mod job;
mod leftovers;
mod plan;
mod report;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use gaspi::env::TransportChoice;

#[derive(Parser, Debug)]
#[command(
    name = "soak",
    about = "Back-to-back short jobs under tarantella, some killed at random points; reports \
             start-time percentiles and what the jobs left behind before and after \
             `tarantella --cleanup`"
)]
struct Args {
    /// Jobs to run, one after the other.
    #[arg(long, default_value_t = 1000)]
    jobs: usize,
    /// Share of the jobs that get killed (rounded to whole jobs).
    #[arg(long, default_value_t = 0.1)]
    kill_fraction: f64,
    /// Ranks per job (2 or more).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(2..))]
    ranks: u16,
    /// How the ranks talk (`tarantella --transport`).
    #[arg(long, value_enum, default_value_t = TransportChoice::Shm)]
    transport: TransportChoice,
    /// Seed of the plan (which jobs are killed, how, when; run times), decimal or 0x-hex
    /// [default: random, printed].
    #[arg(long, value_parser = parse_seed)]
    seed: Option<u64>,
    /// The launcher [default: `tarantella` next to this program, else on PATH].
    #[arg(long)]
    tarantella: Option<PathBuf>,
    /// The rank program [default: `soak-rank` next to this program].
    #[arg(long)]
    rank_program: Option<PathBuf>,
    /// Shortest time a job's ranks play after init, in ms.
    #[arg(long, default_value_t = 10)]
    run_min_ms: u64,
    /// Longest time a job's ranks play after init, in ms.
    #[arg(long, default_value_t = 100)]
    run_max_ms: u64,
    /// Bound on every wait of a rank, in ms (a stopped peer fails the job after this).
    #[arg(long, default_value_t = 5000)]
    op_timeout_ms: u64,
    /// `tarantella --init-timeout`: seconds the ranks wait for each other in init.
    #[arg(long, default_value_t = 10.0)]
    init_timeout: f64,
    /// `tarantella --grace` (and `--cleanup --grace`): seconds from SIGTERM to SIGKILL.
    #[arg(long, default_value_t = 3.0)]
    grace: f64,
    /// Seconds after which a job counts as hung and its tarantella gets SIGKILL.
    #[arg(long, default_value_t = 120.0)]
    job_timeout: f64,
    /// Where the run directories go (default: a fresh `tnt-soak-<run>` in the temp dir,
    /// removed after a run that passed).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Keep the work directory after a run that passed.
    #[arg(long)]
    keep_work_dir: bool,
    /// Write one CSV row per job to this file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Print a line for every job (otherwise: killed and failed jobs, progress every 50).
    #[arg(short, long)]
    verbose: bool,
}

fn parse_seed(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

/// `name` next to this program, if it is there.
fn sibling(name: &str) -> Option<PathBuf> {
    let p = std::env::current_exe().ok()?.parent()?.join(name);
    p.is_file().then_some(p)
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.run_min_ms > args.run_max_ms {
        eprintln!("soak: --run-min-ms is above --run-max-ms");
        return ExitCode::from(2);
    }
    let tarantella = args
        .tarantella
        .clone()
        .or_else(|| sibling("tarantella"))
        .unwrap_or_else(|| PathBuf::from("tarantella"));
    let Some(rank_program) = args.rank_program.clone().or_else(|| sibling("soak-rank")) else {
        eprintln!(
            "soak: no soak-rank next to this program; build it (cargo build --release -p \
             tarantella-benches --bins) or pass --rank-program"
        );
        return ExitCode::from(2);
    };
    let seed = match args.seed {
        Some(s) => s,
        None => match getrandom::u64() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("soak: no random seed: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let run = format!("sk{:08x}", getrandom::u32().unwrap_or(std::process::id()));
    let work = args
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tnt-soak-{run}")));
    let runs = work.join("runs");
    if let Err(e) = std::fs::create_dir_all(&runs) {
        eprintln!("soak: {}: {e}", runs.display());
        return ExitCode::from(2);
    }
    let transport = args.transport.as_str().to_string();
    let setup = job::Setup {
        tarantella,
        rank_program,
        ranks: args.ranks,
        transport,
        init_timeout_s: args.init_timeout,
        grace_s: args.grace,
        op_timeout_ms: args.op_timeout_ms,
        job_timeout: Duration::from_secs_f64(args.job_timeout),
        runs: runs.clone(),
    };
    let plans = plan::plan(
        args.jobs,
        args.kill_fraction,
        args.ranks,
        (args.run_min_ms, args.run_max_ms),
        seed,
    );
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let header = format!(
        "soak: {} jobs of {} ranks over {}, kill fraction {}, seed {seed:#x}, run {}..={} ms, \
         {cores} cores\n  tarantella {} (--init-timeout {} --grace {}), ranks {} (--timeout-ms {}), \
         job ids {run}-N, runs in {}\n\n",
        args.jobs,
        args.ranks,
        setup.transport,
        args.kill_fraction,
        args.run_min_ms,
        args.run_max_ms,
        setup.tarantella.display(),
        args.init_timeout,
        args.grace,
        setup.rank_program.display(),
        args.op_timeout_ms,
        runs.display()
    );
    eprint!("{header}");
    let mut csv = match &args.csv {
        None => None,
        Some(p) => match std::fs::File::create(p) {
            Ok(mut f) => {
                let _ = writeln!(f, "{}", report::CSV_HEADER);
                Some(f)
            }
            Err(e) => {
                eprintln!("soak: {}: {e}", p.display());
                return ExitCode::from(2);
            }
        },
    };
    let ranks = usize::from(args.ranks);
    let t0 = Instant::now();
    if let Err(e) = leftovers::become_subreaper() {
        eprintln!(
            "soak: warning: cannot become a child subreaper ({e}): orphaned ranks go to PID 1"
        );
    }
    let mut inits: Vec<u64> = Vec::new();
    let mut launches: Vec<u64> = Vec::new();
    let mut outcomes = Vec::with_capacity(args.jobs);
    for (i, p) in plans.iter().enumerate() {
        let windows = job::Windows {
            launch_us: (2 * median(&launches, 5_000)).clamp(500, 100_000),
            init_us: (2 * median(&inits, 10_000)).clamp(500, 200_000),
        };
        let o = job::run(&setup, i, &format!("{run}-{i}"), *p, windows);
        if o.unkilled() && !o.failed_unexpectedly(ranks) {
            inits.extend(o.init_us);
            launches.extend(o.launch_us);
        }
        let notable = !o.unkilled()
            || o.failed_unexpectedly(ranks)
            || !o.before.is_empty()
            || !o.after.is_empty();
        if args.verbose || notable {
            eprintln!("{}", report::describe(&o, ranks));
        }
        if (i + 1) % 50 == 0 || i + 1 == args.jobs {
            eprintln!(
                "soak: {} of {} jobs in {:.0} s",
                i + 1,
                args.jobs,
                t0.elapsed().as_secs_f64()
            );
        }
        if let Some(f) = &mut csv {
            let _ = writeln!(f, "{}", report::csv_row(&o, ranks));
        }
        outcomes.push(o);
    }
    let sweep = leftovers::sweep(&format!("{run}-"), &runs);
    let header = format!("{header}total time {:.0} s\n\n", t0.elapsed().as_secs_f64());
    let verdict = report::summary(&header, &outcomes, ranks, &sweep);
    println!("{}", verdict.text);
    if verdict.pass && !args.keep_work_dir && args.work_dir.is_none() {
        remove_work_dir(&work);
    } else {
        eprintln!("soak: run directories kept in {}", runs.display());
    }
    if verdict.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The median of `v`, or `default` when it is empty.
fn median(v: &[u64], default: u64) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    report::percentile(&s, 50.0).unwrap_or(default)
}

fn remove_work_dir(work: &Path) {
    if let Err(e) = std::fs::remove_dir_all(work) {
        eprintln!("soak: could not remove {}: {e}", work.display());
    }
}
