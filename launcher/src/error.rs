//! The launcher's error type: one variant per way a job can fail to start or run.

use std::path::PathBuf;

/// `Result` with the launcher's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `tarantella`. Each message is meant for the user.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("program {0:?} not found (not a file, and not on PATH)")]
    ProgramNotFound(String),
    #[error("program {0:?} is not executable")]
    ProgramNotExecutable(PathBuf),
    #[error("no program given: use `tarantella [OPTIONS] -- PROGRAM [ARGS...]`")]
    NoProgram,
    #[error("cannot read hostfile {path}: {source}")]
    HostfileRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("hostfile {path} is {what}, not a regular file")]
    HostfileNotRegular { path: PathBuf, what: &'static str },
    #[error("hostfile {path}, line {line}: {msg}")]
    HostfileSyntax {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("hostfile {0} lists no hosts")]
    HostfileEmpty(PathBuf),
    #[error("-H item {item:?} (in {list:?}): {msg}")]
    HostListItem {
        item: String,
        list: String,
        msg: String,
    },
    #[error("-n {requested} is larger than the {available} slots available ({detail})")]
    NotEnoughSlots {
        requested: usize,
        available: usize,
        detail: String,
    },
    #[error("{flag} {per_node} is more than the {limit} {limit_name} of host {host}; lower {flag} or give the host more {limit_name}")]
    PerNodeAboveSlots {
        flag: &'static str,
        per_node: usize,
        host: String,
        limit: usize,
        /// `slots` or `max_slots`: which of the host's counts is the limit.
        limit_name: &'static str,
    },
    #[error("invalid value: {0}")]
    Invalid(String),
    #[error("bad -x {0:?}: expected VAR=VALUE or VAR, with VAR made of letters, digits and '_' (not starting with a digit)")]
    BadExport(String),
    #[error("-x {0}: {0} is not set in tarantella's environment; set it, or give the value with -x {0}=VALUE")]
    ExportUnset(String),
    // The value is left out of the message: it may be a token.
    #[error("-x {var}=...: tarantella sets {var} on every rank itself, it cannot be overridden ({instead})")]
    LauncherVariable {
        var: &'static str,
        instead: &'static str,
    },
    #[error(
        "{what} needs `numactl`, which is not installed on this host (apt-get install numactl)"
    )]
    NumactlMissing { what: &'static str },
    #[error("cannot start {what}: {source}")]
    Spawn {
        what: String,
        source: std::io::Error,
    },
    #[error("run directory {path}: {source}")]
    RunDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no free port for the rendezvous on {host}: {msg}")]
    NoPort { host: String, msg: String },
    #[error("cannot install signal handlers: {0}")]
    Signals(nix::Error),
    #[error("job {0:?} is unknown: no run directory records it")]
    UnknownJob(String),
    #[error("job {job:?} is still supervised by tarantella (pid {pid}); stop that first, or use `--cleanup --force`")]
    JobStillRunning { job: String, pid: i32 },
    #[error("{0}")]
    Env(#[from] gaspi::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
