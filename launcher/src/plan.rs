//! What runs where: the ranks of a job, their hosts, environment and command line. Built
//! once from the options and what this host offers, then printed by `--dry-run` or carried
//! out by the spawners.
//!
//! The parts of a plan have modules of their own, which know nothing of [`Plan`]:
//! [`placement`] (which rank on which host), [`pinning`] (which socket, through `numactl`),
//! [`env`](mod@env) (each rank's environment) and [`program`] (the command each rank runs).

pub mod env;
pub mod pinning;
pub mod placement;
pub mod program;

use std::path::PathBuf;
use std::time::Duration;

use gaspi::env::{self as genv, JobToken};

use crate::cli::{Cli, MapBy};
use crate::error::{Error, Result};
use crate::{hardware, job_id, rundir};

pub use env::TORCHRUN_VARIABLES;
pub use pinning::Pinning;
pub use placement::RankPlan;

/// The longest `--grace`: ranks that need more than an hour to stop are not stopping.
const MAX_GRACE_SECONDS: f64 = 3600.0;
/// Set by Slurm in a job allocation: `tarantella` inside one starts its ranks with `srun`.
const SLURM_JOB_ID: &str = "SLURM_JOB_ID";

/// How ranks are started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// All ranks are children of `tarantella` on this host.
    Local,
    /// Ranks are started through `ssh` on the hosts of `--hostfile` or `-H`.
    Ssh,
    /// One `srun` starts all ranks inside a Slurm allocation.
    Slurm,
}

impl Mode {
    /// The mode's name, as `--dry-run` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Local => "local",
            Mode::Ssh => "ssh",
            Mode::Slurm => "slurm",
        }
    }
}

/// The whole job.
#[derive(Debug)]
pub struct Plan {
    /// How the ranks are started.
    pub mode: Mode,
    /// The job id (`--job-id` or random), see [`crate::job_id`].
    pub job_id: String,
    /// The secret the ranks present to each other, random per job.
    pub token: JobToken,
    /// N, the number of ranks; for Slurm, 0 leaves it to the allocation.
    pub nranks: usize,
    /// Local and ssh modes: every rank. Slurm mode: empty (srun places the ranks).
    pub ranks: Vec<RankPlan>,
    /// Slurm mode: `--ntasks-per-node`.
    pub slurm_per_node: Option<usize>,
    /// `--map-by`: how the ranks were (or, for Slurm, are to be) spread over the hosts.
    pub map_by: MapBy,
    /// `host:port` of rank 0's bootstrap listener, once known.
    pub rendezvous: Option<String>,
    /// `MASTER_PORT`: a free port on rank 0's host for the program's own use, once known.
    pub master_port: Option<u16>,
    /// Command line of each rank before the per-rank numactl prefix.
    pub argv: Vec<String>,
    /// The machine file (`GASPI_MFILE`): rank r's host on line r, as GPI-2 programs read it.
    /// Local and ssh modes; empty for Slurm (each rank writes its own from `SLURM_*`).
    pub machine_file: Vec<String>,
    /// The numactl binding of the ranks, when pinning is asked for.
    pub pinning: Option<Pinning>,
    /// The job's run directory: its record, PIDs and rank logs.
    pub run_dir: PathBuf,
    /// Where `run_dir` and the run directories of earlier jobs are.
    pub run_layout: rundir::Layout,
    /// `--keep-runs`: how many run directories (this job's among them) to keep.
    pub keep_runs: usize,
    /// Whether every rank's output goes to the terminal (else only rank 0's does).
    pub show_all_output: bool,
    /// `--grace`: how long the ranks get between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// `--timeout`: how long the job may run before it is stopped; `None`: no limit.
    pub time_limit: Option<Duration>,
    /// Printed once on stderr before the job starts (or before the dry run's text).
    pub warnings: Vec<String>,
    /// What the options set on every rank.
    pub settings: env::Settings,
}

impl Plan {
    /// Builds the plan from the options and what this host offers.
    pub fn new(cli: &Cli) -> Result<Plan> {
        let in_slurm_allocation = std::env::var_os(SLURM_JOB_ID).is_some();
        Plan::for_host(cli, in_slurm_allocation, hardware::count_gpus)
    }

    /// [`Plan::new`] with the host's facts passed in; `gpus_here` is called only when the
    /// answer matters (for the CPU fallback warning).
    fn for_host(cli: &Cli, in_slurm_allocation: bool, gpus_here: fn() -> usize) -> Result<Plan> {
        if cli.command.is_empty() {
            return Err(Error::NoProgram);
        }
        let exports = cli
            .export
            .iter()
            .map(|x| env::parse_export(x, |var| std::env::var(var).ok()))
            .collect::<Result<Vec<_>>>()?;
        if !(cli.init_timeout.is_finite() && cli.init_timeout > 0.0) {
            return Err(Error::Invalid(format!(
                "--init-timeout {} must be positive",
                cli.init_timeout
            )));
        }
        let time_limit = match cli.timeout {
            None => None,
            Some(secs) => match Duration::try_from_secs_f64(secs) {
                Ok(limit) if !limit.is_zero() => Some(limit),
                _ => {
                    return Err(Error::Invalid(format!(
                        "--timeout {secs} must be a positive number of seconds"
                    )))
                }
            },
        };
        if !(cli.grace.is_finite() && cli.grace >= 0.0) {
            return Err(Error::Invalid(format!(
                "--grace {} must not be negative",
                cli.grace
            )));
        }
        if cli.grace > MAX_GRACE_SECONDS {
            return Err(Error::Invalid(format!(
                "--grace {} is more than {MAX_GRACE_SECONDS} seconds (an hour)",
                cli.grace
            )));
        }
        let per_node = cli.ranks_per_node();
        if cli.nranks == Some(0) || per_node == Some(0) {
            return Err(Error::Invalid(format!(
                "-n and {} must be at least 1",
                cli.ranks_per_node_flag()
            )));
        }
        let job_id = match &cli.job_id {
            Some(id) => job_id::validate(id)?,
            None => job_id::random()?,
        };
        let mode = if cli.names_hosts() {
            Mode::Ssh
        } else if in_slurm_allocation {
            Mode::Slurm
        } else {
            Mode::Local
        };
        let ranks = match mode {
            Mode::Local => placement::on_this_host(cli)?,
            Mode::Ssh => placement::on_hosts(cli)?,
            Mode::Slurm => Vec::new(),
        };
        let nranks = match mode {
            Mode::Local | Mode::Ssh => ranks.len(),
            // srun places the ranks; without -n, as many as the allocation has tasks.
            Mode::Slurm => cli.nranks.unwrap_or(0),
        };
        if nranks > usize::from(u16::MAX) {
            return Err(Error::Invalid(format!(
                "-n {nranks} is more than 65535 ranks"
            )));
        }

        let argv = program::command_line(cli.interpreter.as_deref(), &cli.command)?;
        if mode == Mode::Local {
            program::check(&argv, &cli.command)?;
        }
        let pinning = Pinning::from_cli(cli, mode == Mode::Local)?;
        // Only in local mode do the ranks run on the host whose GPUs we can look at.
        let asked_for_gpus = cli.devices_per_node.is_some() && !cli.no_gpu;
        let warnings = if asked_for_gpus && mode == Mode::Local && gpus_here() == 0 {
            vec![cpu_fallback_warning(nranks)]
        } else {
            Vec::new()
        };
        let machine_file = env::machine_file(&ranks);
        let run_layout = match mode {
            Mode::Slurm => rundir::Layout::slurm(),
            Mode::Local | Mode::Ssh => rundir::Layout::on_this_host(),
        };
        Ok(Plan {
            mode,
            run_dir: run_layout.job_dir(&job_id),
            run_layout,
            keep_runs: cli.keep_runs,
            job_id,
            token: JobToken::random()?,
            nranks,
            ranks,
            slurm_per_node: per_node,
            map_by: cli.map_by,
            rendezvous: None,
            master_port: None,
            argv,
            machine_file,
            pinning,
            show_all_output: cli.shows_all_output(),
            grace: Duration::from_secs_f64(cli.grace),
            time_limit,
            warnings,
            settings: env::Settings::from_cli(cli, exports),
        })
    }

    /// Rank 0's host as the ranks reach it: `127.0.0.1` when the ranks run here, else its
    /// name or address from the hostfile (without a `user@`).
    pub fn master_addr(&self) -> String {
        match self.ranks.first().and_then(|r| r.host.as_deref()) {
            Some(host) => placement::host_address(host).to_string(),
            None => "127.0.0.1".to_string(),
        }
    }

    /// Distinct hosts in rank order (`None` = this host).
    pub fn hosts(&self) -> Vec<Option<String>> {
        let mut out: Vec<Option<String>> = Vec::new();
        for r in &self.ranks {
            if !out.contains(&r.host) {
                out.push(r.host.clone());
            }
        }
        out
    }

    /// The environment of `rank`, in the order it is applied (later entries win). It holds
    /// no secret, so it may be shown and put on a command line: the job token is apart, in
    /// [`Plan::token_var`].
    pub fn rank_env(&self, rank: &RankPlan) -> Vec<(String, String)> {
        let machine_file =
            (self.mode == Mode::Local).then(|| self.run_dir.join(rundir::MACHINE_FILE));
        let job = env::JobFacts {
            job_id: &self.job_id,
            token: self.token,
            nranks: self.nranks,
            rendezvous: self.rendezvous.as_deref(),
            master_addr: self.master_addr(),
            master_port: self.master_port,
            gpi2_master: self.machine_file.first().map(String::as_str),
            machine_file,
            settings: &self.settings,
        };
        env::rank_vars(&job, rank)
    }

    /// The job token, as the variable the ranks read it from. Secret: never to be shown or
    /// put on a command line (which every user of a host can read in `/proc`).
    pub fn token_var(&self) -> (&'static str, String) {
        (genv::JOB_TOKEN, self.token.to_hex())
    }

    /// Slurm mode: the variables that are the same on every rank, see
    /// [`env::slurm_step_vars`].
    pub fn slurm_env(&self) -> Vec<(String, String)> {
        env::slurm_step_vars(&self.job_id, &self.settings)
    }

    /// The full command line of `rank`: numactl prefix, interpreter, program, arguments.
    pub fn rank_argv(&self, rank: &RankPlan) -> Vec<String> {
        let mut argv = match &self.pinning {
            Some(p) => p.numactl_prefix(rank.local_rank),
            None => Vec::new(),
        };
        argv.extend(self.argv.iter().cloned());
        argv
    }
}

/// What `--devices-per-node` on a host without GPUs gets: the job still runs, on CPU.
fn cpu_fallback_warning(ranks: usize) -> String {
    let ranks = match ranks {
        1 => "the rank runs".to_string(),
        n => format!("the {n} ranks run"),
    };
    format!("no GPU found on this host; {ranks} on CPU")
}

#[cfg(test)]
mod tests;
