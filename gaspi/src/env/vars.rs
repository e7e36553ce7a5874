//! The names of the runtime's environment variables (`GASPI_*`), one constant each, shared
//! with the launcher (which sets them) through `gaspi::env`.

/// This rank, `0..GASPI_NRANKS`.
pub const RANK: &str = "GASPI_RANK";
/// The number of ranks in the job.
pub const NRANKS: &str = "GASPI_NRANKS";
/// This rank among the ranks on its host.
pub const LOCAL_RANK: &str = "GASPI_LOCAL_RANK";
/// The number of ranks on this host.
pub const LOCAL_NRANKS: &str = "GASPI_LOCAL_NRANKS";
/// `host:port` where rank 0 serves the rendezvous.
pub const RENDEZVOUS: &str = "GASPI_RENDEZVOUS";
/// The job's secret: connections that do not present it are dropped.
pub const JOB_TOKEN: &str = "GASPI_JOB_TOKEN";
/// The job's id: names its shared-memory files.
pub const JOB_ID: &str = "GASPI_JOB_ID";

/// How long init waits for the job to assemble.
pub const INIT_TIMEOUT_MS: &str = "GASPI_INIT_TIMEOUT_MS";
/// `auto`, `tcp`, `shm` or `verbs` (see [`super::TransportChoice`]).
pub const TRANSPORT: &str = "GASPI_TRANSPORT";
/// The IP address this rank's data listener binds (default: the one that reaches rank 0).
pub const ADDR: &str = "GASPI_ADDR";
/// The liveness timeout in milliseconds (0 or unset: off). When set, every rank sends a
/// heartbeat to each peer every quarter of it, and a peer from which nothing arrived for
/// this long is marked CORRUPT. Set it on every rank (`tarantella --heartbeat-timeout`
/// does).
pub const HEARTBEAT_TIMEOUT_MS: &str = "GASPI_HEARTBEAT_TIMEOUT_MS";
/// The runtime's log filter (`tracing` `EnvFilter` syntax).
pub const LOG: &str = "GASPI_LOG";
/// Reference implementation: rank 0's host name.
pub const MASTER: &str = "GASPI_MASTER";
/// Reference implementation: the service-network port.
pub const SN_PORT: &str = "GASPI_SN_PORT";
/// Reference implementation: the NUMA socket of this rank.
pub const SOCKET: &str = "GASPI_SOCKET";
/// Reference implementation: the machine file, one host per line, rank i on line i.
pub const MFILE: &str = "GASPI_MFILE";

/// Default init timeout in milliseconds.
pub const DEFAULT_INIT_TIMEOUT_MS: u64 = 30_000;
/// The shortest heartbeat timeout accepted, in milliseconds.
pub const MIN_HEARTBEAT_TIMEOUT_MS: u64 = 20;
/// Port of the reference implementation's service network.
pub const DEFAULT_SN_PORT: u16 = 10840;
