//! What runs where: the ranks of a job, their hosts, environment and command line. Built
//! once from the options, printed by `--dry-run` and executed by the spawners.

use std::path::PathBuf;
use std::time::Duration;

use gaspi::env::{self as genv, JobEnv, JobToken};
use gaspi::Rank;

use crate::cli::{Cli, MapBy};
use crate::error::{Error, Result};
use crate::{hostfile, hostlist, rundir, shell};

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

/// One rank of a local or ssh job.
#[derive(Clone, Debug)]
pub struct RankPlan {
    pub rank: usize,
    /// `None` for this host (local mode).
    pub host: Option<String>,
    pub local_rank: usize,
    pub local_nranks: usize,
    /// Index of the rank's host among the hosts that run ranks, in host order.
    pub node_rank: usize,
}

/// The whole job.
#[derive(Debug)]
pub struct Plan {
    pub mode: Mode,
    pub job_id: String,
    pub token: JobToken,
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
    /// numactl binding per local rank: `Some(sockets)` when pinning is asked for.
    pub pin: Option<Pinning>,
    pub run_dir: PathBuf,
    /// Where `run_dir` and the run directories of earlier jobs are.
    pub run_layout: rundir::Layout,
    /// `--keep-runs`: how many run directories (this job's among them) to keep.
    pub keep_runs: usize,
    pub show_all_output: bool,
    pub grace: Duration,
    /// Printed once on stderr before the job starts (or before the dry run's text).
    pub warnings: Vec<String>,
    cli_env: CommonEnv,
}

/// `--pin-to-socket` / `--pin-memory-to-socket`.
#[derive(Clone, Copy, Debug)]
pub struct Pinning {
    pub cpus: bool,
    pub memory: bool,
    /// NUMA nodes per host (this host's count; hosts are assumed alike).
    pub sockets: usize,
}

#[derive(Debug)]
struct CommonEnv {
    init_timeout_ms: u64,
    transport: genv::TransportChoice,
    log_level: &'static str,
    log_on_all: bool,
    fusion_kb: u64,
    /// `--no-gpu`. Otherwise `CUDA_VISIBLE_DEVICES` is left as the ranks inherit it.
    hide_gpus: bool,
    /// `-N`: `GASPI_SET_NUMA_SOCKET=1`, GPI-2 programs bind themselves to their socket.
    gpi2_binds_sockets: bool,
    exports: Vec<(String, String)>,
}

/// What `--dry-run` shows instead of the job token.
pub const REDACTED: &str = "<redacted>";

/// Set on every rank by `--no-gpu`; never set otherwise.
const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

impl Plan {
    /// Builds the plan from the options and what this host offers.
    pub fn new(cli: &Cli) -> Result<Plan> {
        let in_slurm_allocation = std::env::var_os("SLURM_JOB_ID").is_some();
        Plan::for_host(cli, in_slurm_allocation, count_gpus)
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
        if !(cli.timeout.is_finite() && cli.timeout > 0.0) {
            return Err(Error::Invalid(format!(
                "--timeout {} must be positive",
                cli.timeout
            )));
        }
        if !(cli.grace.is_finite() && cli.grace >= 0.0) {
            return Err(Error::Invalid(format!(
                "--grace {} must not be negative",
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
            Some(id) => validate_job_id(id)?,
            None => JobToken::random()?.to_hex()[..12].to_string(),
        };
        let mode = if cli.names_hosts() {
            Mode::Ssh
        } else if in_slurm_allocation {
            Mode::Slurm
        } else {
            Mode::Local
        };
        let (ranks, nranks) = match mode {
            Mode::Local => {
                // Like torchrun's nproc_per_node: one rank unless asked for more, whether or
                // not this host has GPUs.
                let n = cli.nranks.or(per_node).unwrap_or(1);
                if let Some(k) = per_node.filter(|&k| k < n) {
                    return Err(Error::NotEnoughSlots {
                        requested: n,
                        available: k,
                        detail: format!(
                            "{} {k} on this host, no --hostfile",
                            cli.ranks_per_node_flag()
                        ),
                    });
                }
                (place(&[(None, n)], n, cli.map_by), n)
            }
            Mode::Ssh => {
                let hosts = match &cli.hostfile {
                    Some(path) => hostfile::read(path)?,
                    None => hostlist::parse(&cli.hosts)?,
                };
                // More ranks per host than a host's slots is a mistake to report, not a
                // request to quietly lower (the job would run with fewer ranks than asked).
                if let Some(k) = per_node {
                    if let Some(h) = hosts.iter().find(|h| h.limit().is_some_and(|l| l < k)) {
                        return Err(Error::PerNodeAboveSlots {
                            flag: cli.ranks_per_node_flag(),
                            per_node: k,
                            host: h.name.clone(),
                            limit: h.limit().unwrap_or_default(),
                            limit_name: if h.max_slots.is_some() {
                                "max_slots"
                            } else {
                                "slots"
                            },
                        });
                    }
                }
                let caps: Vec<(Option<String>, usize)> = hosts
                    .iter()
                    .map(|h| (Some(h.name.clone()), per_node.or(h.slots).unwrap_or(1)))
                    .collect();
                let total: usize = caps.iter().map(|c| c.1).sum();
                let n = cli.nranks.unwrap_or(total);
                if n > total {
                    let detail = caps
                        .iter()
                        .map(|(h, c)| format!("{}: {c}", h.as_deref().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(Error::NotEnoughSlots {
                        requested: n,
                        available: total,
                        detail,
                    });
                }
                (place(&caps, n, cli.map_by), n)
            }
            Mode::Slurm => (Vec::new(), cli.nranks.unwrap_or(0)),
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
        let pin = (cli.pins_cpus() || cli.pin_memory_to_socket).then(|| Pinning {
            cpus: cli.pins_cpus(),
            memory: cli.pin_memory_to_socket,
            sockets: count_numa_nodes(),
        });
        if pin.is_some() && mode == Mode::Local && find_on_path("numactl").is_none() {
            return Err(Error::NumactlMissing {
                what: if cli.pin_to_socket {
                    "--pin-to-socket"
                } else if cli.numa {
                    "-N/--NUMA"
                } else {
                    "--pin-memory-to-socket"
                },
            });
        }
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
            pin,
            show_all_output: cli.shows_all_output(),
            grace: Duration::from_secs_f64(cli.grace),
            warnings,
            cli_env: CommonEnv {
                init_timeout_ms: (cli.timeout * 1000.0).round() as u64,
                transport: cli.transport.into(),
                log_level: cli.effective_log_level().as_str(),
                log_on_all: cli.log_on_all_devices,
                fusion_kb: cli.fusion_threshold,
                hide_gpus: cli.no_gpu,
                gpi2_binds_sockets: cli.numa,
                exports,
            },
        })
    }

    /// Rank 0's host as the ranks reach it: `127.0.0.1` when the ranks run here, else its
    /// name or address from the hostfile (without a `user@`).
    pub fn master_addr(&self) -> String {
        match self.ranks.first().and_then(|r| r.host.as_deref()) {
            Some(host) => host_address(host).to_string(),
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
    pub fn rank_env(&self, r: &RankPlan) -> Vec<(String, String)> {
        let e = JobEnv {
            rank: Rank(r.rank as u16),
            nranks: self.nranks as u16,
            local_rank: r.local_rank as u16,
            local_nranks: r.local_nranks as u16,
            rendezvous: self.rendezvous.clone(),
            token: self.token,
            job_id: self.job_id.clone(),
            init_timeout_ms: self.cli_env.init_timeout_ms,
            transport: self.cli_env.transport,
            addr: None,
        };
        let mut vars: Vec<(String, String)> = e
            .to_vars()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        // The token reaches each rank by a way that only its user can read (see the spawners).
        vars.retain(|(k, _)| k != genv::JOB_TOKEN && !(self.nranks == 1 && k == genv::RENDEZVOUS));
        vars.extend(self.convention_vars(r));
        let loud = r.rank == 0 || self.cli_env.log_on_all;
        self.common_vars(&mut vars, loud);
        vars
    }

    /// The job token, as the variable the ranks read it from. Secret: never to be shown or
    /// put on a command line (which every user of a host can read in `/proc`).
    pub fn token_var(&self) -> (&'static str, String) {
        (genv::JOB_TOKEN, self.token.to_hex())
    }

    /// The token's variable as `--dry-run` shows it.
    pub fn redacted_token_var() -> String {
        format!("{}={REDACTED}", genv::JOB_TOKEN)
    }

    /// Slurm mode: the variables that are the same on every rank (srun passes them on; the
    /// rank-specific ones are mapped from SLURM_* on each rank). Without the job token, as
    /// [`Plan::rank_env`].
    pub fn slurm_env(&self) -> Vec<(String, String)> {
        let mut vars = vec![
            (genv::JOB_ID.to_string(), self.job_id.clone()),
            (
                genv::INIT_TIMEOUT_MS.to_string(),
                self.cli_env.init_timeout_ms.to_string(),
            ),
            (
                genv::TRANSPORT.to_string(),
                self.cli_env.transport.to_string(),
            ),
        ];
        self.common_vars(&mut vars, true);
        vars
    }

    fn common_vars(&self, vars: &mut Vec<(String, String)>, loud: bool) {
        let c = &self.cli_env;
        let mut push = |k: &str, v: String| vars.push((k.to_string(), v));
        // One level for the runtime (GASPI_LOG) and the trainer (TNT_LOG); quiet ranks log
        // errors only.
        let level = if loud { c.log_level } else { "error" };
        push(genv::LOG, level.to_string());
        push(tnt_env::LOG, level.to_string());
        push(tnt_env::FUSION_THRESHOLD_KB, c.fusion_kb.to_string());
        // No per-rank GPU here: every rank of a host sees the same GPUs and the program
        // picks its own by local rank, as with torchrun. A per-rank CUDA_VISIBLE_DEVICES
        // would replace the one the user chose (e.g. `3,5`).
        if c.hide_gpus {
            push(CUDA_VISIBLE_DEVICES, String::new());
        }
        if c.gpi2_binds_sockets {
            push(env::GASPI_SET_NUMA_SOCKET, "1".to_string());
        }
        push(tnt_env::JOB_ID, self.job_id.clone());
        vars.extend(c.exports.iter().cloned());
    }

    /// The full command line of `rank`: numactl prefix, interpreter, program, arguments.
    pub fn rank_argv(&self, r: &RankPlan) -> Vec<String> {
        let mut argv = Vec::new();
        if let Some(p) = self.pin {
            let node = r.local_rank % p.sockets.max(1);
            argv.push("numactl".to_string());
            if p.cpus {
                argv.push(format!("--cpunodebind={node}"));
            }
            if p.memory {
                argv.push(format!("--membind={node}"));
            }
        }
        argv.extend(self.argv.iter().cloned());
        argv
    }

    /// `--dry-run`: what would run on each host.
    pub fn describe(&self, ssh_base: &[String]) -> String {
        let mut out = String::new();
        let mode = match self.mode {
            Mode::Local => "local",
            Mode::Ssh => "ssh",
            Mode::Slurm => "slurm",
        };
        out += &format!(
            "# tarantella dry run: job {} ({mode}), {} rank(s); run directory {}\n",
            self.job_id,
            self.nranks,
            self.run_dir.display()
        );
        out += "# GASPI_JOB_TOKEN is random per run and never shown: ranks get it in their \
                environment (ssh ranks through the ssh connection, not its command line).\n\
                # GASPI_RENDEZVOUS and MASTER_PORT get free ports on rank 0's host at start.\n";
        out += &self.describe_gpus();
        if self.mode == Mode::Slurm {
            out += &crate::spawn::slurm::describe(self);
            return out;
        }
        out += &format!(
            "# machine file (GASPI_MFILE, rank r's host on line r): {}\n",
            self.machine_file.join(" ")
        );
        if self.mode == Mode::Ssh {
            out += &format!(
                "# each ssh rank's wrapper writes it on the rank's host, as \
                 $TMPDIR/tnt-{}-machines.XXXXXX, and sets GASPI_MFILE\n",
                self.job_id
            );
        }
        for r in &self.ranks {
            let host = r.host.as_deref().unwrap_or("localhost (this host)");
            out += &format!(
                "# rank {} on {host} (local rank {} of {})\n",
                r.rank, r.local_rank, r.local_nranks
            );
            let mut words: Vec<String> = Vec::new();
            if let Some(h) = &r.host {
                words.extend(ssh_base.iter().cloned());
                words.push(h.clone());
                words.push("--".into());
            }
            words.push("env".into());
            for (k, v) in self.rank_env(r) {
                words.push(format!("{k}={v}"));
            }
            words.push(Plan::redacted_token_var());
            words.extend(self.rank_argv(r));
            out += &shell::join(&words);
            out.push('\n');
        }
        out
    }

    /// The dry run's line on GPUs: hidden, or which ones every rank sees (tarantella assigns
    /// none; the trainer picks one by local rank).
    fn describe_gpus(&self) -> String {
        // -x is applied after --no-gpu's empty value, so it wins over --no-gpu too.
        let exported = self
            .cli_env
            .exports
            .iter()
            .rev()
            .find(|(k, _)| k == CUDA_VISIBLE_DEVICES)
            .map(|(_, v)| v);
        if self.cli_env.hide_gpus && exported.is_none() {
            return format!("# GPUs: hidden by --no-gpu ({CUDA_VISIBLE_DEVICES}= on every rank)\n");
        }
        let seen = match (exported, self.mode) {
            (Some(v), _) => format!("gets {CUDA_VISIBLE_DEVICES}={v} from -x"),
            (None, Mode::Local) => match std::env::var_os(CUDA_VISIBLE_DEVICES) {
                Some(v) => format!("inherits {CUDA_VISIBLE_DEVICES}={}", v.to_string_lossy()),
                None => format!("sees all GPUs ({CUDA_VISIBLE_DEVICES} unset)"),
            },
            (None, Mode::Ssh) => format!("sees what its host's {CUDA_VISIBLE_DEVICES} exposes"),
            (None, Mode::Slurm) => "sees the GPUs srun gives it".to_string(),
        };
        format!(
            "# GPUs: none assigned by tarantella; every rank {seen}; the trainer uses visible \
             GPU number ({} mod their count)\n",
            genv::LOCAL_RANK
        )
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

/// The host of an ssh destination: `node1` of `user@node1`.
pub fn host_address(destination: &str) -> &str {
    destination.rsplit('@').next().unwrap_or(destination)
}

/// Checks a job id against the characters gaspi allows.
pub fn validate_job_id(id: &str) -> Result<String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !id.starts_with('.');
    if ok {
        Ok(id.to_string())
    } else {
        Err(Error::Invalid(format!(
            "job id {id:?}: use 1 to 64 letters, digits, '-', '_' or '.' (not starting with '.')"
        )))
    }
}

/// NVIDIA GPUs on this host (0 when none or no driver).
fn count_gpus() -> usize {
    if let Ok(rd) = std::fs::read_dir("/proc/driver/nvidia/gpus") {
        return rd.count();
    }
    std::fs::read_dir("/dev")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.strip_prefix("nvidia")
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0)
}

fn count_numa_nodes() -> usize {
    std::fs::read_dir("/sys/devices/system/node")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name();
                    let n = n.to_string_lossy();
                    n.strip_prefix("node")
                        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

mod env;

pub use env::TORCHRUN_VARIABLES;
mod placement;
mod program;
use placement::place;
pub use program::find_on_path;

#[cfg(test)]
mod tests;
