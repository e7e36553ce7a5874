//! The environment of the ranks: gaspi's own variables, the names other launchers give the
//! same facts (torchrun's `RANK`, `WORLD_SIZE`, ..., GPI-2's `GASPI_SOCKET`, `GASPI_MFILE`,
//! `GASPI_MASTER`), the settings of the options, and what the user adds with `-x`, which may
//! not replace any variable tarantella sets.
//!
//! Nothing here is secret: the job token is not part of these lists. It reaches each rank
//! apart from them, by a way only its user can read (see the spawners), and `--dry-run`
//! shows it [redacted](REDACTED).

use std::path::PathBuf;

use gaspi::env::torchrun::{
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
};
use gaspi::env::{self as genv, JobEnv, JobToken, TransportChoice};
use gaspi::Rank;

use super::placement::{host_address, RankPlan};
use crate::cli::Cli;
use crate::error::{Error, Result};

/// torchrun's index of the rank's host among the hosts of the job. The runtime has no use
/// for it (so `gaspi::env::torchrun` does not name it); programs written for torchrun do.
pub const NODE_RANK: &str = "NODE_RANK";
/// All of torchrun's variables that every rank gets, in torchrun's order. PyTorch programs
/// read them (`torch.distributed`'s `env://`, Lightning, ...). Our own bootstrap uses
/// `GASPI_RENDEZVOUS`: `MASTER_ADDR` and `MASTER_PORT` are for the program's own use, a
/// free port of their own.
pub const TORCHRUN_VARIABLES: [&str; 7] = [
    RANK,
    WORLD_SIZE,
    LOCAL_RANK,
    LOCAL_WORLD_SIZE,
    NODE_RANK,
    MASTER_ADDR,
    MASTER_PORT,
];

/// Set with `-N`: a GPI-2 program binds itself to the CPUs of socket `GASPI_SOCKET`.
pub const GASPI_SET_NUMA_SOCKET: &str = "GASPI_SET_NUMA_SOCKET";

/// The GPUs a CUDA program may use. Set (empty) on every rank by `--no-gpu`; never set
/// otherwise, so that the ranks see the GPUs their host's value exposes.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// What `--dry-run` shows instead of the job token.
pub const REDACTED: &str = "<redacted>";

/// The options that set the same variables on every rank.
#[derive(Debug)]
pub struct Settings {
    /// `GASPI_INIT_TIMEOUT_MS`, from `--init-timeout`.
    pub init_timeout_ms: u64,
    /// `GASPI_TRANSPORT`, from `--transport`.
    pub transport: TransportChoice,
    /// `GASPI_HEARTBEAT_TIMEOUT_MS`, from `--heartbeat-timeout` (`None`: not set, off).
    pub heartbeat_timeout_ms: Option<u64>,
    /// The log level of rank 0 (of every rank with `--log-on-all-devices`).
    pub log_level: &'static str,
    /// `--log-on-all-devices`: every rank logs at `log_level`, not only rank 0.
    pub log_on_all: bool,
    /// `TNT_FUSION_THRESHOLD_KB`, from `--fusion-threshold`.
    pub fusion_kb: u64,
    /// `--no-gpu`. Otherwise `CUDA_VISIBLE_DEVICES` is left as the ranks inherit it.
    pub hide_gpus: bool,
    /// `-N`: `GASPI_SET_NUMA_SOCKET=1`, GPI-2 programs bind themselves to their socket.
    pub gpi2_binds_sockets: bool,
    /// `-x`: the user's variables, in the order given (applied last, so they win).
    pub exports: Vec<(String, String)>,
}

impl Settings {
    /// The settings of `cli`, whose values have been checked, with its `-x` variables
    /// already parsed (see [`parse_export`]).
    pub fn from_cli(cli: &Cli, exports: Vec<(String, String)>) -> Settings {
        Settings {
            init_timeout_ms: (cli.init_timeout * 1000.0).round() as u64,
            transport: cli.transport,
            heartbeat_timeout_ms: cli.heartbeat_timeout_ms(),
            log_level: cli.effective_log_level().as_str(),
            log_on_all: cli.log_on_all_devices,
            fusion_kb: cli.fusion_threshold,
            hide_gpus: cli.no_gpu,
            gpi2_binds_sockets: cli.numa,
            exports,
        }
    }

    /// The value `-x` gives `var` (the last one, as applied), if any.
    pub fn exported(&self, var: &str) -> Option<&str> {
        self.exports
            .iter()
            .rev()
            .find(|(k, _)| k == var)
            .map(|(_, v)| v.as_str())
    }

    /// The variables these settings give every rank; `loud` ranks log at the chosen level,
    /// the others errors only.
    fn common_vars(&self, job_id: &str, loud: bool) -> Vec<(String, String)> {
        let mut vars = Vec::new();
        let mut push = |k: &str, v: String| vars.push((k.to_string(), v));
        // One level for the runtime (GASPI_LOG) and the trainer (TNT_LOG).
        let level = if loud { self.log_level } else { "error" };
        push(genv::LOG, level.to_string());
        push(tnt_env::LOG, level.to_string());
        push(tnt_env::FUSION_THRESHOLD_KB, self.fusion_kb.to_string());
        // No per-rank GPU here: every rank of a host sees the same GPUs and the program
        // picks its own by local rank, as with torchrun. A per-rank CUDA_VISIBLE_DEVICES
        // would replace the one the user chose (e.g. `3,5`).
        if self.hide_gpus {
            push(CUDA_VISIBLE_DEVICES, String::new());
        }
        if self.gpi2_binds_sockets {
            push(GASPI_SET_NUMA_SOCKET, "1".to_string());
        }
        push(tnt_env::JOB_ID, job_id.to_string());
        vars.extend(self.exports.iter().cloned());
        vars
    }
}

/// The facts of a local or ssh job that its ranks' environment states.
pub struct JobFacts<'a> {
    /// The job id (`GASPI_JOB_ID`, `TARANTELLA_JOB_ID`).
    pub job_id: &'a str,
    /// The job token: needed to describe the job to gaspi, left out of every list here.
    pub token: JobToken,
    /// N, the number of ranks.
    pub nranks: usize,
    /// `host:port` of rank 0's bootstrap listener, once known (`GASPI_RENDEZVOUS`).
    pub rendezvous: Option<&'a str>,
    /// Rank 0's host as the ranks reach it (`MASTER_ADDR`).
    pub master_addr: String,
    /// A free port on rank 0's host for the program's own use, once known (`MASTER_PORT`).
    pub master_port: Option<u16>,
    /// Rank 0's host as the machine file names it (`GASPI_MASTER`).
    pub gpi2_master: Option<&'a str>,
    /// The machine file on this host (`GASPI_MFILE`), for ranks on this host. For an ssh
    /// rank the file must be on its own host: its wrapper writes a copy there and sets
    /// `GASPI_MFILE` itself (see `spawn::ssh`).
    pub machine_file: Option<PathBuf>,
    /// What the options set on every rank.
    pub settings: &'a Settings,
}

/// The environment of rank `r` of `job`, in the order it is applied (later entries win).
/// Without the job token: it may be shown and put on a command line.
pub fn rank_vars(job: &JobFacts, r: &RankPlan) -> Vec<(String, String)> {
    let gaspi_job = JobEnv {
        rank: Rank(r.rank as u16),
        nranks: job.nranks as u16,
        local_rank: r.local_rank as u16,
        local_nranks: r.local_nranks as u16,
        rendezvous: job.rendezvous.map(str::to_string),
        token: job.token,
        job_id: job.job_id.to_string(),
        init_timeout_ms: job.settings.init_timeout_ms,
        transport: job.settings.transport,
        addr: None,
        heartbeat_timeout_ms: job.settings.heartbeat_timeout_ms,
    };
    let mut vars: Vec<(String, String)> = gaspi_job
        .to_vars()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    // The token reaches each rank by a way that only its user can read (see the spawners);
    // a job of one rank has no one to meet.
    vars.retain(|(k, _)| k != genv::JOB_TOKEN && !(job.nranks == 1 && k == genv::RENDEZVOUS));
    vars.extend(convention_vars(job, r));
    let loud = r.rank == 0 || job.settings.log_on_all;
    vars.extend(job.settings.common_vars(job.job_id, loud));
    vars
}

/// Slurm mode: the variables that are the same on every rank (srun passes them on; the
/// rank-specific ones are mapped from `SLURM_*` on each rank). Without the job token, as
/// [`rank_vars`].
pub fn slurm_step_vars(job_id: &str, settings: &Settings) -> Vec<(String, String)> {
    let mut vars = vec![
        (genv::JOB_ID.to_string(), job_id.to_string()),
        (
            genv::INIT_TIMEOUT_MS.to_string(),
            settings.init_timeout_ms.to_string(),
        ),
        (genv::TRANSPORT.to_string(), settings.transport.to_string()),
    ];
    if let Some(ms) = settings.heartbeat_timeout_ms {
        vars.push((genv::HEARTBEAT_TIMEOUT_MS.to_string(), ms.to_string()));
    }
    vars.extend(settings.common_vars(job_id, true));
    vars
}

/// The variables other launchers set, under their names, so that programs written for
/// them run unchanged.
fn convention_vars(job: &JobFacts, r: &RankPlan) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = [
        (RANK, r.rank),
        (WORLD_SIZE, job.nranks),
        (LOCAL_RANK, r.local_rank),
        (LOCAL_WORLD_SIZE, r.local_nranks),
        (NODE_RANK, r.node_rank),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    vars.push((MASTER_ADDR.to_string(), job.master_addr.clone()));
    if let Some(port) = job.master_port {
        vars.push((MASTER_PORT.to_string(), port.to_string()));
    }
    // GPI-2's `gaspi_run` numbers the ranks of a host 0..k-1 in GASPI_SOCKET (the socket
    // they bind to under -N). GPI-2 allows at most 256 ranks per host, and gaspi reads
    // it as a byte: a rank beyond gets none rather than one that fails its start.
    if let Ok(socket) = u8::try_from(r.local_rank) {
        vars.push((genv::SOCKET.to_string(), socket.to_string()));
    }
    if let Some(master) = job.gpi2_master {
        vars.push((genv::MASTER.to_string(), master.to_string()));
    }
    if let Some(path) = &job.machine_file {
        vars.push((genv::MFILE.to_string(), path.to_string_lossy().into_owned()));
    }
    vars
}

/// The job token's variable as `--dry-run` shows it: `GASPI_JOB_TOKEN=<redacted>`.
pub fn redacted_token_var() -> String {
    format!("{}={REDACTED}", genv::JOB_TOKEN)
}

/// The machine file of `ranks`: rank r's host on line r, as GPI-2's `gaspi_run` passes it in
/// `GASPI_MFILE`. Ranks on this host get its name (what `hostname` prints), as `gaspi_run`
/// names the host it runs on; ranks on other hosts their hostfile name, without `user@`.
pub fn machine_file(ranks: &[RankPlan]) -> Vec<String> {
    let here = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    ranks
        .iter()
        .map(|r| {
            r.host
                .as_deref()
                .map_or(here.clone(), |h| host_address(h).to_string())
        })
        .collect()
}

/// The variables tarantella sets on every rank that `-x` must not replace, each with what to
/// do instead. They wire the job together (rank numbers, sizes, rendezvous, token, id,
/// timeout, transport) or mark its processes for `--cleanup`: a value from `-x` would break
/// the job or its teardown, or put the token on a command line. The other launchers' names
/// for the same facts are refused too: a rank whose `RANK` disagrees with its `GASPI_RANK`
/// is a job at odds with itself. `GASPI_LOG` stays open to `-x`: it only filters the
/// runtime's log, finer than `--log-level` can.
const LAUNCHER_VARIABLES: &[(&str, &str)] = &[
    (genv::RANK, "tarantella numbers the ranks"),
    (genv::NRANKS, "use -n"),
    (
        genv::LOCAL_RANK,
        "tarantella numbers the ranks on each host",
    ),
    (genv::LOCAL_NRANKS, "use --n-per-node"),
    (
        genv::RENDEZVOUS,
        "tarantella picks a free port on the first host",
    ),
    (genv::JOB_TOKEN, "tarantella draws a random one per run"),
    (genv::JOB_ID, "use --job-id"),
    (genv::INIT_TIMEOUT_MS, "use --init-timeout"),
    (genv::TRANSPORT, "use --transport"),
    (genv::HEARTBEAT_TIMEOUT_MS, "use --heartbeat-timeout"),
    (tnt_env::JOB_ID, "use --job-id"),
    (RANK, "tarantella numbers the ranks"),
    (WORLD_SIZE, "use -n"),
    (LOCAL_RANK, "tarantella numbers the ranks on each host"),
    (LOCAL_WORLD_SIZE, "use --n-per-node"),
    (NODE_RANK, "tarantella numbers the hosts"),
    (MASTER_ADDR, "it is rank 0's host"),
    (MASTER_PORT, "tarantella picks a free port on rank 0's host"),
    (genv::SOCKET, "tarantella numbers the ranks on each host"),
    (genv::MASTER, "it is rank 0's host"),
    (genv::MFILE, "tarantella writes the machine file of the job"),
    (GASPI_SET_NUMA_SOCKET, "use -N"),
];

/// One `-x`: `VAR=VALUE`, or `VAR` for the value `lookup` (tarantella's environment) gives
/// it, as mpirun's `-x VAR` forwards the launcher's value.
pub fn parse_export(x: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<(String, String)> {
    let (var, value) = match x.split_once('=') {
        Some((var, value)) => (var, Some(value.to_string())),
        None => (x, None),
    };
    let ok = !var.is_empty()
        && !var.as_bytes()[0].is_ascii_digit()
        && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(Error::BadExport(x.to_string()));
    }
    if let Some(&(var, instead)) = LAUNCHER_VARIABLES.iter().find(|(name, _)| *name == var) {
        return Err(Error::LauncherVariable { var, instead });
    }
    let value = match value {
        Some(v) => v,
        None => lookup(var).ok_or_else(|| Error::ExportUnset(var.to_string()))?,
    };
    Ok((var.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_environment(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn exports_are_validated() {
        assert_eq!(
            parse_export("A_1=x=y", no_environment).unwrap(),
            ("A_1".into(), "x=y".into())
        );
        assert_eq!(
            parse_export("E=", no_environment).unwrap(),
            ("E".into(), String::new())
        );
        for bad in ["=v", "1A=v", "A-B=v", "", "A-B"] {
            assert!(
                matches!(parse_export(bad, no_environment), Err(Error::BadExport(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bare_name_exports_the_launchers_value_or_says_it_is_unset() {
        let shell = |var: &str| (var == "OMP_NUM_THREADS").then(|| "4".to_string());
        assert_eq!(
            parse_export("OMP_NUM_THREADS", shell).unwrap(),
            ("OMP_NUM_THREADS".into(), "4".into())
        );
        let err = parse_export("NOT_SET_HERE", shell).unwrap_err().to_string();
        assert_eq!(
            err,
            "-x NOT_SET_HERE: NOT_SET_HERE is not set in tarantella's environment; \
             set it, or give the value with -x NOT_SET_HERE=VALUE"
        );
        // The launcher's own variables are refused in this form too, before any lookup.
        let err = parse_export("GASPI_RANK", |_| panic!("looked up")).unwrap_err();
        assert!(matches!(err, Error::LauncherVariable { .. }), "{err}");
    }
}
