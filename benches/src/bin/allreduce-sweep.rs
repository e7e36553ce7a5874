//! nccl-tests' `all_reduce_perf` for the tarantella collectives:
//!
//! ```text
//! cargo run --release -p tarantella-benches --bin allreduce-sweep -- -b 8 -e 128M -f 2
//! tarantella --hostfile hosts -- target/release/allreduce-sweep -b 8 -e 1G -f 2
//! ```
//!
//! Run by hand, it starts `--ranks` ranks on this host (this program again, through
//! [`Job`]) and prints rank 0's table. Run by a launcher (`GASPI_RANK` or `GASPI_NRANKS`
//! set, as `tarantella` sets them), it is one of the job's ranks. `--help` lists the flags;
//! [`tarantella_benches::sweep`] describes the table.

use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use gaspi::env::TransportChoice;
use gaspi::env::{JobEnv, NRANKS, RANK};
use gaspi::testing::Job;
use gaspi::Rank;
use tarantella_benches::sweep::binding::bind_to_cpu;
use tarantella_benches::sweep::cli::{SweepArgs, DEFAULT_LOCAL_RANKS};
use tarantella_benches::sweep::run_rank;

/// Exits with clap's usage error (status 2), like any other bad flag.
fn usage_error(message: String) -> ! {
    SweepArgs::command()
        .error(ErrorKind::ValueValidation, message)
        .exit()
}

/// Whether a launcher started this process as one rank of a job.
fn started_by_launcher() -> bool {
    std::env::var_os(RANK).is_some() || std::env::var_os(NRANKS).is_some()
}

fn main() -> ExitCode {
    let args = SweepArgs::parse();
    if let Err(message) = args.validate() {
        usage_error(message);
    }
    if started_by_launcher() {
        run_as_rank(&args)
    } else {
        run_local_job(&args)
    }
}

/// This process is one rank: run the sweep; rank 0 prints.
fn run_as_rank(args: &SweepArgs) -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(env) => env,
        Err(e) => {
            eprintln!("allreduce-sweep: the job environment is not usable: {e}");
            return ExitCode::FAILURE;
        }
    };
    match args.ranks {
        Some(asked) if asked != env.nranks => usage_error(format!(
            "--ranks {asked}, but the launcher started {} ranks: leave --ranks out under a \
             launcher",
            env.nranks
        )),
        _ => {}
    }
    if let Err(message) = args.validate_for_job(env.nranks) {
        usage_error(message);
    }
    let rank = env.rank;
    if let Some(cpu) = args.cpu_for(rank) {
        if let Err(e) = bind_to_cpu(cpu) {
            eprintln!("allreduce-sweep: rank {}: --map-cpu: {e}", rank.0);
            return ExitCode::FAILURE;
        }
    }
    match run_rank(args, env) {
        Ok(summary) => match summary.wrong {
            Some(wrong) if wrong > 0 => {
                if rank.0 == 0 {
                    eprintln!("allreduce-sweep: {wrong} wrong elements");
                }
                ExitCode::FAILURE
            }
            _ => ExitCode::SUCCESS,
        },
        Err(e) => {
            eprintln!("allreduce-sweep: rank {}: {e}", rank.0);
            ExitCode::FAILURE
        }
    }
}

/// No launcher: start the ranks on this host, each running this program with the same
/// flags, and show what they print.
fn run_local_job(args: &SweepArgs) -> ExitCode {
    let ranks = args.ranks.unwrap_or(DEFAULT_LOCAL_RANKS);
    if let Err(message) = args.validate_for_job(ranks) {
        usage_error(message);
    }
    let program = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => {
            eprintln!("allreduce-sweep: cannot find this program to start its ranks: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut job = Job::new(ranks, program);
    // The ranks parse the same flags; the job's variables make them ranks.
    job.args = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    job.transport = args.transport.unwrap_or(TransportChoice::Shm);
    job.timeout = Duration::from_secs(args.timeout);
    let outcome = job.run();
    // Only rank 0 prints the table; the other ranks speak only when something went wrong.
    for rank in &outcome.ranks {
        let failed = !rank.status.is_some_and(|s| s.success());
        if rank.rank == Rank(0) {
            print!("{}", rank.stdout);
            eprint!("{}", rank.stderr);
        } else if failed && !rank.stderr.is_empty() {
            for line in rank.stderr.lines() {
                eprintln!("[rank {}] {line}", rank.rank);
            }
        }
    }
    let all_succeeded = outcome
        .ranks
        .iter()
        .all(|r| r.status.is_some_and(|s| s.success()));
    if outcome.timed_out {
        eprintln!(
            "allreduce-sweep: the ranks did not finish within --timeout {} s and were killed",
            args.timeout
        );
        return ExitCode::FAILURE;
    }
    if all_succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
