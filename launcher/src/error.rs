//! The launcher's error type: one variant per way a job can fail to start or run.

use std::path::PathBuf;

/// `Result` with the launcher's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `tarantella`. Each message is meant for the user.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The program to run (or its interpreter) is neither a path to a file nor found on
    /// `PATH`.
    #[error("program {0:?} not found (not a file, and not on PATH)")]
    ProgramNotFound(String),
    /// The program to run exists but may not be executed (no `x` permission, or not a file).
    #[error("program {0:?} is not executable")]
    ProgramNotExecutable(PathBuf),
    /// The command line names no program for the ranks to run.
    #[error("no program given: use `tarantella [OPTIONS] -- PROGRAM [ARGS...]`")]
    NoProgram,
    /// The hostfile could not be opened or read.
    #[error("cannot read hostfile {path}: {source}")]
    HostfileRead {
        /// The hostfile as given.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The hostfile is a directory, FIFO, device, ...: reading one could block or make no
    /// sense.
    #[error("hostfile {path} is {what}, not a regular file")]
    HostfileNotRegular {
        /// The hostfile as given.
        path: PathBuf,
        /// What kind of file it is instead, for the message ("a directory", ...).
        what: &'static str,
    },
    /// A line of the hostfile is not `name [slots=N] [max_slots=M]` or `name:N`.
    #[error("hostfile {path}, line {line}: {msg}")]
    HostfileSyntax {
        /// The hostfile as given.
        path: PathBuf,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with the line.
        msg: String,
    },
    /// The hostfile holds only comments and blank lines.
    #[error("hostfile {0} lists no hosts")]
    HostfileEmpty(PathBuf),
    /// An item of `-H` is not `host` or `host:N`.
    #[error("-H item {item:?} (in {list:?}): {msg}")]
    HostListItem {
        /// The item in question.
        item: String,
        /// The whole `-H` value it is part of.
        list: String,
        /// What is wrong with the item.
        msg: String,
    },
    /// `-n` asks for more ranks than the hosts have slots.
    #[error("-n {requested} is larger than the {available} slots available ({detail})")]
    NotEnoughSlots {
        /// The ranks asked for.
        requested: usize,
        /// The slots of all hosts together.
        available: usize,
        /// Where the slots come from, per host, for the user to see which to raise.
        detail: String,
    },
    /// The ranks per host (`--n-per-node` or `--devices-per-node`) exceed a host's slots:
    /// refused rather than quietly lowered, which would run fewer ranks than asked.
    #[error("{flag} {per_node} is more than the {limit} {limit_name} of host {host}; lower {flag} or give the host more {limit_name}")]
    PerNodeAboveSlots {
        /// The option as the user spelled it.
        flag: &'static str,
        /// The ranks per host asked for.
        per_node: usize,
        /// The first host too small for them.
        host: String,
        /// That host's limit.
        limit: usize,
        /// `slots` or `max_slots`: which of the host's counts is the limit.
        limit_name: &'static str,
    },
    /// An option's value is out of range or malformed (the message says which and why).
    #[error("invalid value: {0}")]
    Invalid(String),
    /// A `-x` that is neither `VAR=VALUE` nor `VAR` with a valid variable name.
    #[error("bad -x {0:?}: expected VAR=VALUE or VAR, with VAR made of letters, digits and '_' (not starting with a digit)")]
    BadExport(String),
    /// A `-x VAR` (no value) for a variable `tarantella`'s own environment lacks.
    #[error("-x {0}: {0} is not set in tarantella's environment; set it, or give the value with -x {0}=VALUE")]
    ExportUnset(String),
    /// A `-x` for a variable `tarantella` sets itself; the value is left out of the message,
    /// since it may be a token.
    #[error("-x {var}=...: tarantella sets {var} on every rank itself, it cannot be overridden ({instead})")]
    LauncherVariable {
        /// The variable.
        var: &'static str,
        /// What to do instead (the option that sets it, or why nothing can).
        instead: &'static str,
    },
    /// Pinning to sockets was asked for, and `numactl`, which does it, is not on `PATH`.
    #[error(
        "{what} needs `numactl`, which is not installed on this host (apt-get install numactl)"
    )]
    NumactlMissing {
        /// The option that asked for pinning, as the user spelled it.
        what: &'static str,
    },
    /// A rank, its ssh client or `srun` could not be started.
    #[error("cannot start {what}: {source}")]
    Spawn {
        /// What was being started ("rank 3 (./train)", "srun", ...).
        what: String,
        /// Why it could not be.
        source: std::io::Error,
    },
    /// The job's run directory (record, PIDs, logs) could not be created or written.
    #[error("run directory {path}: {source}")]
    RunDir {
        /// The run directory.
        path: PathBuf,
        /// What failed there.
        source: std::io::Error,
    },
    /// The PID of a started process could not be written to the run directory, where
    /// `--cleanup` finds the job's processes should `tarantella` die.
    #[error("cannot record the PID of rank {rank} in {path} (which --cleanup reads): {source}")]
    PidRecord {
        /// The rank the process runs (or connects to, for an ssh client).
        rank: usize,
        /// The file of PIDs.
        path: PathBuf,
        /// Why it could not be written.
        source: std::io::Error,
    },
    /// Rank 0's host, which is asked for free ports before any rank starts, could not be
    /// reached by ssh (or refused the login).
    #[error("host {host} could not be reached by ssh (status 255): {said}")]
    SshUnreachable {
        /// The host, as the hostfile or `-H` names it.
        host: String,
        /// ssh's own message (its last line on stderr), such as "Connection refused".
        said: String,
    },
    /// No free port could be found on rank 0's (remote) host for the rendezvous.
    #[error("no free port for the rendezvous on {host}: {msg}")]
    NoPort {
        /// Rank 0's host.
        host: String,
        /// Why no port was found (ssh failed, every candidate taken, ...).
        msg: String,
    },
    /// The handlers of SIGINT/SIGTERM/SIGHUP, which stop the job cleanly, could not be
    /// installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// `--cleanup --job-id` names a job no run directory records.
    #[error("job {0:?} is unknown: no run directory records it")]
    UnknownJob(String),
    /// `--cleanup --job-id` names a job whose `tarantella` still runs (without `--force`).
    #[error("job {job:?} is still supervised by tarantella (pid {pid}); stop that first, or use `--cleanup --force`")]
    JobStillRunning {
        /// The job id.
        job: String,
        /// The PID of the job's `tarantella`.
        pid: i32,
    },
    /// An error of the GASPI runtime's helpers (drawing a token, the job environment).
    #[error("{0}")]
    Env(#[from] gaspi::Error),
    /// Any other I/O error, e.g. binding a local port for the rendezvous.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
