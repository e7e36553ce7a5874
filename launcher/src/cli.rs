//! Command-line options of `tarantella` (clap).

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use gaspi::env::TransportChoice;

/// Starts PROGRAM as N cooperating ranks (processes) of one GASPI job, supervises them, and
/// stops all of them when one fails or when you press Ctrl-C.
///
/// Without --hostfile or -H all ranks run on this host. With them, ranks are started on the
/// listed hosts through ssh. Inside a Slurm allocation (SLURM_JOB_ID set, no --hostfile or
/// -H) ranks are started with srun.
#[derive(Debug, Parser)]
#[command(
    name = "tarantella",
    version,
    // clap would write `[-- <PROGRAM [ARGS]>...]`, but the `--` is optional (argv.rs).
    override_usage = "tarantella [OPTIONS] [--] PROGRAM [ARGS]...",
    after_help = format!(
        "Examples:\n  \
        tarantella -n 4 -- ./train --epochs 3\n  \
        tarantella -np 4 ./train --epochs 3            (as with mpirun: no `--` needed)\n  \
        tarantella --hostfile hosts --n-per-node 2 -x OMP_NUM_THREADS=4 -- train.py\n  \
        tarantella -H node1:2,node2:2 -x PATH -- ./train\n  \
        tarantella --dry-run -n 2 -- ./train\n  \
        tarantella --cleanup --job-id 1a2b3c4d5e6f\n\n\
        Environment: {} overrides the ssh command (e.g. \"ssh -p 2222 -i key\"),\n\
        {} where job records and rank logs are kept.",
        tnt_env::SSH,
        tnt_env::RUN_DIR
    )
)]
pub struct Cli {
    /// Number of ranks to start [default: hostfile slots, else --devices-per-node, else 1].
    #[arg(short = 'n', long = "np", visible_alias = "ntasks", value_name = "N")]
    pub nranks: Option<usize>,

    /// File with one host per line: `name [slots=N] [max_slots=M]` or `name:N`; `#` starts
    /// a comment; a host on several lines gets a slot per line (GPI-2 machine files).
    #[arg(
        short = 'm',
        long,
        visible_alias = "machinefile",
        value_name = "FILE",
        conflicts_with = "hosts"
    )]
    pub hostfile: Option<PathBuf>,

    /// Hosts instead of a hostfile, as mpirun takes them: `-H node1:2,node2:2` (N slots
    /// each; a host without `:N` has one, and naming it again adds one). Repeatable.
    #[arg(short = 'H', long = "host", value_name = "HOST[:N],...")]
    pub hosts: Vec<String>,

    /// Ranks per host (at most the host's slots; at most its max_slots when given).
    #[arg(
        long,
        value_name = "K",
        visible_aliases = ["npernode", "ntasks-per-node", "nproc-per-node"],
        alias = "nproc_per_node"
    )]
    pub n_per_node: Option<usize>,

    /// How ranks are spread over the hosts: fill each host in turn (slot), or deal them
    /// round-robin, one per host at a time (node), as mpirun's --map-by.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = MapBy::Slot)]
    pub map_by: MapBy,

    /// Ranks per host, one per GPU to use (Tarantella's name for --n-per-node). Every rank
    /// sees the GPUs that CUDA_VISIBLE_DEVICES exposes; the trainer on local rank L uses the
    /// (L mod count)-th of them. Warns when this host has no GPU: the ranks then run on CPU.
    // Its own argument rather than an alias of --n-per-node: only this spelling asks for
    // GPUs, so only it warns when there are none.
    #[arg(long, value_name = "K", conflicts_with = "n_per_node")]
    pub devices_per_node: Option<usize>,

    /// Do not use GPUs: hide them from every rank (CUDA_VISIBLE_DEVICES="").
    #[arg(long)]
    pub no_gpu: bool,

    /// Export VAR=VALUE on every rank; `-x VAR` exports this shell's value of VAR (repeatable,
    /// one variable each; applied in the given order). The variables tarantella sets itself
    /// (GASPI_RANK, RANK, GASPI_RENDEZVOUS, GASPI_JOB_TOKEN, ...) are refused.
    #[arg(short = 'x', value_name = "VAR[=VALUE]")]
    pub export: Vec<String>,

    /// Tensor fusion threshold in KiB for the trainer (exported as TNT_FUSION_THRESHOLD_KB).
    #[arg(long, value_name = "KB", default_value_t = 32)]
    pub fusion_threshold: u64,

    /// Log level on the ranks, for the runtime and the trainer alike (exported as GASPI_LOG
    /// and TNT_LOG); ranks other than 0 log errors only unless --log-on-all-devices.
    #[arg(long, value_enum, default_value_t = LogLevel::Warn)]
    pub log_level: LogLevel,

    /// Log at --log-level on every rank, not only on rank 0.
    #[arg(long)]
    pub log_on_all_devices: bool,

    /// Show every rank's stdout/stderr, prefixed with `[rank k]`. Otherwise only rank 0's
    /// output is shown and the others go to rank-K.log files in the job's run directory.
    #[arg(long)]
    pub output_on_all_devices: bool,

    /// Bind each rank's CPUs to one socket (NUMA node), round-robin by local rank (numactl).
    #[arg(long)]
    pub pin_to_socket: bool,

    /// gaspi_run's -N (NUMA): --pin-to-socket, and GASPI_SET_NUMA_SOCKET=1 so that programs
    /// linked against GPI-2 bind themselves to socket GASPI_SOCKET as well.
    #[arg(short = 'N', long = "NUMA")]
    pub numa: bool,

    /// Debug run, gaspi_run's -d: the same as --output-on-all-devices --log-level debug.
    /// (gaspi_run starts rank 0 under gdb instead; a rank of tarantella has no terminal.)
    #[arg(short = 'd', long)]
    pub debug: bool,

    /// Bind each rank's memory to one socket (NUMA node), round-robin by local rank (numactl).
    #[arg(long)]
    pub pin_memory_to_socket: bool,

    /// Run PROGRAM through this command, e.g. "python3 -u" or "valgrind --leak-check=yes"
    /// [default: python3 for a PROGRAM ending in .py, else none].
    #[arg(long, visible_alias = "python-interpreter", value_name = "CMD")]
    pub interpreter: Option<String>,

    /// Print what would run on each host, with its environment, and start nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Stop a job's leftover ranks (by their recorded PIDs) on every host and remove its
    /// shared-memory files. Without --job-id: every recorded job whose tarantella is gone.
    #[arg(long)]
    pub cleanup: bool,

    /// With --cleanup: also clean up a job whose tarantella still runs, and kill at once.
    #[arg(long, requires = "cleanup")]
    pub force: bool,

    /// Job id (letters, digits, '-', '_', '.'): names the run directory and shared memory.
    /// [default: random]. With --cleanup: the job to clean up.
    #[arg(long, value_name = "ID")]
    pub job_id: Option<String>,

    /// Keep the run directories (rank logs) of the last N jobs, this one included; older
    /// ones are removed when a job starts, unless their job still runs.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub keep_runs: usize,

    /// Seconds each rank waits for the rendezvous with its peers (GASPI_INIT_TIMEOUT_MS).
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub init_timeout: f64,

    /// Wall-clock limit for the whole job, as mpirun's --timeout: SECS after the ranks
    /// start, every rank is stopped (SIGTERM, SIGKILL after --grace) and tarantella exits
    /// with status 124. [default: none]
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,

    /// Liveness timeout in seconds (GASPI_HEARTBEAT_TIMEOUT_MS): every rank sends each peer
    /// a heartbeat every quarter of it, and a rank that nothing arrives from for this long
    /// (stopped, hung) fails its peers' calls, which ends the job; the failure report names
    /// it. [default: off]
    #[arg(long, value_name = "SECS", value_parser = parse_heartbeat_timeout)]
    pub heartbeat_timeout: Option<f64>,

    /// Seconds between SIGTERM and SIGKILL when stopping ranks (at most 3600).
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub grace: f64,

    /// How ranks exchange data (GASPI_TRANSPORT): shared memory on one host and TCP across
    /// hosts (auto), TCP only, or shared memory only.
    #[arg(long, value_enum, default_value_t = TransportChoice::Auto)]
    pub transport: TransportChoice,

    /// The program to run on every rank, then its arguments. The program starts at the
    /// first word that is not an option of tarantella (or after `--`); every word from
    /// there on is the program's.
    // `last`: the program's words reach clap only after a `--`, which `argv::normalize`
    // puts before the program when the user did not.
    #[arg(last = true, value_name = "PROGRAM [ARGS]")]
    pub command: Vec<String>,
}

impl Cli {
    /// Whether hosts were given (`--hostfile` or `-H`): the ranks then start through ssh.
    pub fn names_hosts(&self) -> bool {
        self.hostfile.is_some() || !self.hosts.is_empty()
    }

    /// Ranks per host from `--n-per-node` or `--devices-per-node` (clap allows only one).
    pub fn ranks_per_node(&self) -> Option<usize> {
        self.n_per_node.or(self.devices_per_node)
    }

    /// Whether every rank's output is shown: `--output-on-all-devices` or `-d`.
    pub fn shows_all_output(&self) -> bool {
        self.output_on_all_devices || self.debug
    }

    /// `--log-level`, or `debug` with `-d`.
    pub fn effective_log_level(&self) -> LogLevel {
        if self.debug {
            LogLevel::Debug
        } else {
            self.log_level
        }
    }

    /// Whether ranks are bound to sockets by CPU: `--pin-to-socket` or `-N`.
    pub fn pins_cpus(&self) -> bool {
        self.pin_to_socket || self.numa
    }

    /// The spelling the user gave for the ranks per host, for messages.
    pub fn ranks_per_node_flag(&self) -> &'static str {
        if self.devices_per_node.is_some() {
            "--devices-per-node"
        } else {
            "--n-per-node"
        }
    }
}

/// `--heartbeat-timeout`: seconds, at least the runtime's minimum.
fn parse_heartbeat_timeout(s: &str) -> std::result::Result<f64, String> {
    let min = gaspi::env::MIN_HEARTBEAT_TIMEOUT_MS as f64 / 1000.0;
    match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= min => Ok(secs),
        _ => Err(format!("expected seconds, at least {min}")),
    }
}

impl Cli {
    /// `GASPI_HEARTBEAT_TIMEOUT_MS` from `--heartbeat-timeout`, if given.
    pub fn heartbeat_timeout_ms(&self) -> Option<u64> {
        self.heartbeat_timeout
            .map(|secs| (secs * 1000.0).round() as u64)
    }
}

/// `--map-by`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum MapBy {
    /// Fill each host up to its ranks, then the next.
    #[default]
    Slot,
    /// One rank per host in turn, skipping hosts that are full.
    Node,
}

/// `--log-level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Also what happens in the job (setup, progress).
    Info,
    /// Also details for finding a problem.
    Debug,
}

impl LogLevel {
    /// The level as the `GASPI_LOG`/`TNT_LOG` filters take it (the `tracing` level name).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_heartbeat_timeout_is_off_unless_given_and_refused_when_too_short() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["tarantella", "-n", "2"];
            args.extend(extra);
            args.extend(["--", "prog"]);
            Cli::try_parse_from(args)
        };
        assert_eq!(parse(&[]).unwrap().heartbeat_timeout_ms(), None);
        let c = parse(&["--heartbeat-timeout", "1.5"]).unwrap();
        assert_eq!(c.heartbeat_timeout_ms(), Some(1500));
        for bad in ["0", "0.001", "-1", "soon", "inf"] {
            assert!(parse(&["--heartbeat-timeout", bad]).is_err(), "{bad}");
        }
    }

    /// `--timeout` is the job's time limit (mpirun's meaning), off unless given; the
    /// rendezvous has `--init-timeout`.
    #[test]
    fn the_time_limit_is_off_unless_given_and_apart_from_the_init_timeout() {
        let c = Cli::try_parse_from(["tarantella", "--", "p"]).unwrap();
        assert_eq!((c.timeout, c.init_timeout), (None, 30.0));
        let c = Cli::try_parse_from([
            "tarantella",
            "--timeout",
            "90",
            "--init-timeout",
            "5",
            "--",
            "p",
        ])
        .unwrap();
        assert_eq!((c.timeout, c.init_timeout), (Some(90.0), 5.0));
    }

    #[test]
    fn parses_a_typical_line() {
        let c = Cli::try_parse_from([
            "tarantella",
            "-n",
            "4",
            "-x",
            "A=1",
            "-x",
            "B=2",
            "--devices-per-node",
            "2",
            "--",
            "prog",
            "--flag",
        ])
        .unwrap();
        assert_eq!(c.nranks, Some(4));
        assert_eq!(c.export, ["A=1", "B=2"]);
        assert_eq!(c.devices_per_node, Some(2));
        assert_eq!(c.ranks_per_node(), Some(2));
        assert_eq!(c.command, ["prog", "--flag"]);
        assert_eq!(c.fusion_threshold, 32);
    }

    #[test]
    fn both_spellings_of_ranks_per_node_feed_one_value_and_exclude_each_other() {
        let n = Cli::try_parse_from(["tarantella", "--n-per-node", "3", "--", "p"]).unwrap();
        assert_eq!(
            (n.ranks_per_node(), n.ranks_per_node_flag()),
            (Some(3), "--n-per-node")
        );
        assert_eq!(n.devices_per_node, None);
        let d = Cli::try_parse_from(["tarantella", "--devices-per-node", "3", "--", "p"]).unwrap();
        assert_eq!(
            (d.ranks_per_node(), d.ranks_per_node_flag()),
            (Some(3), "--devices-per-node")
        );
        assert_eq!(d.n_per_node, None);
        let both = Cli::try_parse_from([
            "tarantella",
            "--n-per-node",
            "1",
            "--devices-per-node",
            "1",
            "--",
            "p",
        ]);
        assert_eq!(
            both.unwrap_err().kind(),
            clap::error::ErrorKind::ArgumentConflict
        );
    }
}
