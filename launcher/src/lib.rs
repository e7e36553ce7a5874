//! The `tarantella` launcher: starts a program as the N ranks of a GASPI job, supervises them
//! and tears the job down cleanly.
//!
//! ```text
//! tarantella -n 4 -- ./train --epochs 3                 # 4 ranks on this host
//! tarantella -np 4 ./train --epochs 3                   # the same, typed as for mpirun
//! tarantella --hostfile hosts -x OMP_NUM_THREADS=2 -- ./train   # through ssh
//! tarantella -H node1:2,node2:2 train.py                # through ssh, with python3
//! tarantella --dry-run -n 2 -- ./train                  # show what would run
//! tarantella --cleanup --job-id 1a2b3c4d5e6f            # stop a crashed job's leftovers
//! ```
//!
//! Each rank gets the variables of [`gaspi::env`] (rank, size, local rank, rendezvous, job
//! token and id, ...), `TNT_*` settings for the trainer, and the names torchrun and GPI-2's
//! `gaspi_run` give the same facts (`docs/launcher.md`). Ranks run locally, through ssh
//! (with `--hostfile` or `-H`) or through `srun` (inside a Slurm allocation). The command
//! line is read as users of mpirun, srun, torchrun and gaspi_run type it ([`argv`]). When a rank fails or
//! `tarantella` gets SIGINT/SIGTERM, every rank's process group gets SIGTERM, then SIGKILL
//! after a grace period, and the job's `/dev/shm/tnt-<job>-*` files are removed.
//!
//! The library API mirrors the binary:
//!
//! ```
//! use clap::Parser;
//! let cli = launcher::cli::Cli::parse_from(["tarantella", "--dry-run", "-n", "2", "--", "true"]);
//! let status = launcher::run(&cli).expect("launch failed");
//! assert_eq!(status, 0);
//! ```

/// `eprintln!` that cannot panic: when stderr is a pipe whose reader is gone (`2>&1 | tee`,
/// after Ctrl-C killed `tee`) or a terminal that hung up, the message is lost but the
/// launcher goes on to stop the ranks.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// `println!` that cannot panic (see `say!`): `tarantella --dry-run | head -1`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

pub mod argv;
pub mod blame;
pub mod cleanup;
pub mod cli;
pub mod dry_run;
pub mod error;
pub mod hardware;
pub mod hostfile;
pub mod hostlist;
pub mod job_id;
pub mod plan;
pub mod prune;
pub mod report;
pub mod rundir;
pub mod shell;
pub mod signals;
pub mod spawn;
pub mod supervise;
pub mod which;

pub use error::{Error, Result};

/// Does what the command line asks; returns the exit status for `tarantella`.
pub fn run(cli: &cli::Cli) -> Result<i32> {
    if cli.cleanup {
        return cleanup::run(cli);
    }
    let mut plan = plan::Plan::new(cli)?;
    for warning in &plan.warnings {
        say!("tarantella: warning: {warning}");
    }
    if cli.dry_run {
        let text = dry_run::text(&plan)?;
        let _ = std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes());
        return Ok(0);
    }
    supervise::run(&mut plan)
}
