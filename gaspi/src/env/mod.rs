//! The launcher contract: environment variables that describe a job to each rank.
//!
//! The `tarantella` launcher sets these for every rank; they can equally be set by hand,
//! by `srun` or `torchrun` (their variables are understood directly) or by another launcher.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `GASPI_RANK` | this process's rank, `0..GASPI_NRANKS` | `0` when `GASPI_NRANKS` is unset |
//! | `GASPI_NRANKS` | number of ranks in the job | `1` |
//! | `GASPI_LOCAL_RANK` | rank among the ranks on this host | `GASPI_RANK` |
//! | `GASPI_LOCAL_NRANKS` | number of ranks on this host | `GASPI_NRANKS` |
//! | `GASPI_RENDEZVOUS` | `host:port` where rank 0 listens for the bootstrap | required when `GASPI_NRANKS > 1` |
//! | `GASPI_JOB_TOKEN` | 32 hex digits (128 bits); peers must present it | derived from the job id (weak) |
//! | `GASPI_JOB_ID` | job identifier, names shared-memory files | `"local"` |
//! | `GASPI_INIT_TIMEOUT_MS` | how long init waits for the rendezvous and the peers | `30000` |
//! | `GASPI_TRANSPORT` | `auto`, `tcp`, `shm` or `verbs` (see [`TransportChoice`]) | `auto` |
//! | `GASPI_ADDR` | IP address this rank advertises for data connections | the address used to reach the rendezvous |
//! | `GASPI_HEARTBEAT_TIMEOUT_MS` | liveness timeout: a peer silent this long is marked CORRUPT and calls that need it fail with `PeerFailed` (set it on every rank; at least 20) | unset: off |
//! | `GASPI_LOG` | `tracing` filter for the runtime's own log (e.g. `gaspi=debug`) | `warn` |
//!
//! Other launchers, in order of precedence (the first that applies describes the job):
//!
//! | started by | recognised by | what happens |
//! |---|---|---|
//! | `tarantella` or by hand | `GASPI_NRANKS` or `GASPI_MFILE` set | the `GASPI_*` variables above |
//! | `torchrun` (also under `srun`) | `RANK`, `WORLD_SIZE` and `TORCHELASTIC_RUN_ID` | rank and size from torchrun (below) |
//! | `srun` | `SLURM_PROCID`, `SLURM_NTASKS` and a step id | rank and size from Slurm (below) |
//! | a script, by hand | `RANK` and `WORLD_SIZE` | as from torchrun |
//! | `mpirun`/`mpiexec` | `OMPI_COMM_WORLD_SIZE` or `PMI_SIZE` above 1 | init fails, naming `tarantella -n N` and `srun` |
//! | nothing | none of these | a 1-rank job |
//!
//! Our launcher exports torchrun's names too (for the program's own `torch.distributed`),
//! which is why `GASPI_*` wins. torchrun's agent comes before Slurm because it is the inner
//! launcher: under `srun torchrun --nproc-per-node K` every worker inherits its agent's
//! `SLURM_PROCID` and `SLURM_NTASKS`, which count agents, not workers. Individual
//! `GASPI_RENDEZVOUS`, `GASPI_JOB_ID`, `GASPI_JOB_TOKEN` still override what Slurm or
//! torchrun imply.
//!
//! - Slurm: only in the tasks of a job step, which have a step id (`SLURM_STEP_ID`, or
//!   `SLURM_STEPID`): a batch script has `SLURM_PROCID=0` and the allocation's
//!   `SLURM_NTASKS` too, but a program run there directly is one process, and the next row
//!   describes it (see `docs/launcher.md`). Rank and
//!   size come from `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`, and the local count from
//!   `SLURM_STEP_TASKS_PER_NODE`/`SLURM_TASKS_PER_NODE` (first entry). The rendezvous is the first host of
//!   `SLURM_STEP_NODELIST` (or `SLURM_JOB_NODELIST`) on port `20000 + (SLURM_JOB_ID*16 + SLURM_STEP_ID) % 40000`,
//!   and the job id is `slurm-<job>.<step>`.
//! - torchrun: rank and size from `RANK` and `WORLD_SIZE`, the local ones from `LOCAL_RANK`
//!   and `LOCAL_WORLD_SIZE` (default: all ranks on one host). The rendezvous is
//!   `MASTER_ADDR` on port `MASTER_PORT + 1` (torchrun's agent already listens on
//!   `MASTER_PORT`; 65534 when that is 65535), or on `GASPI_SN_PORT` when set. The job id is
//!   `torchrun-<TORCHELASTIC_RUN_ID>.<MASTER_PORT>` (`none` without a run id; characters a
//!   job id may not hold become `_`).
//! - The default token of a Slurm or torchrun job is derived from its job id: weak, anyone
//!   who knows the job id can join. Set `GASPI_JOB_TOKEN` on every rank for a secret one.
//! - The reference implementation's per-rank variables: `GASPI_MASTER` (rank 0's host) and
//!   `GASPI_SN_PORT` (default 10840) form the rendezvous when `GASPI_RENDEZVOUS` is unset.
//!   `GASPI_MFILE` names the machine file (one host per line, rank i on line i; blank lines
//!   and `#` comments skipped): it gives `GASPI_NRANKS` (the number of lines) when that is
//!   unset, the local rank and count (lines naming the same host as this rank's line) when
//!   `GASPI_LOCAL_*` are unset, and the rendezvous host (line 0) when `GASPI_MASTER` is unset.
//!   `GASPI_SOCKET` is this rank's NUMA socket (a number, see [`numa_socket`]).
//!
//! InfiniBand verbs (read by `transport::verbs`, see `docs/verbs.md`): `GASPI_IB_DEVICE`
//! names the device (default: the first with an active port; `fake` selects the test device
//! that executes work requests in software), `GASPI_IB_PORT` the port (default: the first
//! active one), `GASPI_IB_GID_INDEX` the GID index used on RoCE (default 0),
//! `GASPI_IB_PASSIVE_DEPTH` the receive buffers posted per peer for passive messages (1 to
//! 1024, default 4; each holds `passive_transfer_size_max` bytes of registered memory).

use std::fmt;

use crate::error::{Error, Result};
use crate::types::Rank;

mod mpi;
mod placement;
mod reference;
mod shm;
mod slurm;
mod token;
pub mod torchrun;
pub mod vars;

pub use reference::numa_socket;
pub use shm::remove_job_shm_files;
pub(crate) use shm::{shm_file, shm_prefix};
pub use token::JobToken;

use placement::{parse_u16, Placement};
pub use vars::*;

/// Which transport carries data between ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TransportChoice {
    /// Shared memory between ranks on one host, TCP between hosts.
    #[default]
    Auto,
    /// TCP for every peer, also on one host.
    Tcp,
    /// Shared memory for every peer; init fails if a peer is on another host.
    Shm,
    /// InfiniBand verbs for every peer that has an active port (also on one host), TCP for
    /// the others, with the reason logged.
    Verbs,
}

impl TransportChoice {
    /// The canonical `GASPI_TRANSPORT` value (`auto`, `tcp`, `shm`, `verbs`); parsing it
    /// back with [`FromStr`](std::str::FromStr) gives the same choice. (Parsing also
    /// accepts the aliases `ethernet`, `shared`, `sharedmem`, `ib`, `infiniband`.)
    pub fn as_str(self) -> &'static str {
        match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Tcp => "tcp",
            TransportChoice::Shm => "shm",
            TransportChoice::Verbs => "verbs",
        }
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TransportChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(TransportChoice::Auto),
            "tcp" | "ethernet" => Ok(TransportChoice::Tcp),
            "shm" | "shared" | "sharedmem" => Ok(TransportChoice::Shm),
            "verbs" | "ib" | "infiniband" => Ok(TransportChoice::Verbs),
            other => Err(Error::Env(format!(
                "{TRANSPORT}={other:?}: expected one of auto, tcp, shm, verbs"
            ))),
        }
    }
}

/// Everything a rank needs to know about its job, read from the environment.
#[derive(Clone, Debug)]
pub struct JobEnv {
    /// This process's rank, `0..nranks` (`GASPI_RANK`, `SLURM_PROCID` or `RANK`;
    /// `gaspi_proc_rank`).
    pub rank: Rank,
    /// Ranks in the job, at least 1 (`GASPI_NRANKS`, `SLURM_NTASKS` or `WORLD_SIZE`;
    /// `gaspi_proc_num`).
    pub nranks: u16,
    /// This rank's index among the ranks on its host, `0..local_nranks`
    /// (`GASPI_LOCAL_RANK`, `SLURM_LOCALID` or `LOCAL_RANK`; `gaspi_proc_local_rank`).
    pub local_rank: u16,
    /// Ranks on this host (`GASPI_LOCAL_NRANKS`, the Slurm tasks per node or
    /// `LOCAL_WORLD_SIZE`; `gaspi_proc_local_num`).
    pub local_nranks: u16,
    /// `host:port` of rank 0's bootstrap listener; `None` for a single-rank job.
    pub rendezvous: Option<String>,
    /// The secret every connection of the job presents (`GASPI_JOB_TOKEN`; derived from
    /// `job_id` when unset, which is not secret).
    pub token: JobToken,
    /// The job's id (`GASPI_JOB_ID`, or derived from the Slurm or torchrun job; `"local"`
    /// by default): letters, digits, `-`, `_`, `.` only, since it names the job's
    /// shared-memory files in `/dev/shm` (and what [`remove_job_shm_files`] cleans up).
    pub job_id: String,
    /// How long init waits for the rendezvous and the peers, in milliseconds
    /// (`GASPI_INIT_TIMEOUT_MS`, default 30 000). A rank that has joined waits up to a
    /// quarter more (at most 1 s) for rank 0's verdict, which names the ranks that never came.
    pub init_timeout_ms: u64,
    /// Which transport carries data to each peer (`GASPI_TRANSPORT`, default
    /// [`TransportChoice::Auto`]).
    pub transport: TransportChoice,
    /// Address to advertise for data connections, when set explicitly.
    pub addr: Option<String>,
    /// The liveness timeout in milliseconds (`GASPI_HEARTBEAT_TIMEOUT_MS`; `None`, the
    /// default, or 0: off). When set, heartbeats go to every peer every quarter of it and a
    /// peer silent for that long fails (see [`HEARTBEAT_TIMEOUT_MS`]).
    pub heartbeat_timeout_ms: Option<u64>,
}

impl JobEnv {
    /// Reads the job description from the process environment.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads the job description through `get` (testable without touching the process env).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let parse_u64 = |name: &str, v: String| -> Result<u64> {
            v.trim()
                .parse::<u64>()
                .map_err(|_| Error::Env(format!("{name}={v:?} is not a non-negative integer")))
        };

        reference::parse_socket(get(SOCKET))?;
        let mfile = match get(MFILE).filter(|s| !s.trim().is_empty()) {
            Some(path) => Some(reference::machine_file(path.trim())?),
            None => None,
        };
        let (rank, nranks, local_rank, local_nranks, mut rendezvous, mut job_id);
        let explicit = get(NRANKS).is_some() || mfile.is_some();
        let foreign = foreign_placement(&get, explicit)?;
        if foreign.is_none() && !explicit {
            mpi::refuse_mpi_launch(&get)?;
        }
        if let Some(p) = foreign {
            Placement {
                rank,
                nranks,
                local_rank,
                local_nranks,
                rendezvous,
                job_id,
            } = p;
        } else {
            nranks = match (get(NRANKS), &mfile) {
                (Some(v), _) => parse_u16(NRANKS, v)?,
                (None, Some(hosts)) => u16::try_from(hosts.len())
                    .map_err(|_| Error::Env(format!("{MFILE} has more than 65535 lines")))?,
                (None, None) => 1,
            };
            rank = match get(RANK) {
                Some(v) => parse_u16(RANK, v)?,
                None => 0,
            };
            // Ranks on the same host as this rank's line of the machine file.
            let same_host = mfile.as_ref().and_then(|hosts| {
                let mine = hosts.get(usize::from(rank))?;
                let before = hosts[..usize::from(rank)]
                    .iter()
                    .filter(|h| *h == mine)
                    .count();
                let all = hosts.iter().filter(|h| *h == mine).count();
                Some((before as u16, all as u16))
            });
            if let Some(hosts) = &mfile {
                if hosts.len() < usize::from(nranks) {
                    return Err(Error::Env(format!(
                        "{MFILE} lists {} hosts for {nranks} ranks",
                        hosts.len()
                    )));
                }
            }
            local_rank = match get(LOCAL_RANK) {
                Some(v) => parse_u16(LOCAL_RANK, v)?,
                None => same_host.map_or(rank, |(before, _)| before),
            };
            local_nranks = match get(LOCAL_NRANKS) {
                Some(v) => parse_u16(LOCAL_NRANKS, v)?,
                None => same_host.map_or(nranks, |(_, all)| all),
            };
            rendezvous = None;
            job_id = "local".to_string();
        }
        if let Some(r) = get(RENDEZVOUS).filter(|s| !s.trim().is_empty()) {
            rendezvous = Some(r.trim().to_string());
        } else if rendezvous.is_none() {
            let master = get(MASTER)
                .filter(|s| !s.trim().is_empty())
                .or_else(|| mfile.as_ref().and_then(|h| h.first().cloned()));
            if let Some(master) = master {
                let port = match get(SN_PORT) {
                    Some(v) => parse_u16(SN_PORT, v)?,
                    None => DEFAULT_SN_PORT,
                };
                rendezvous = Some(format!("{}:{port}", master.trim()));
            }
        }
        if let Some(id) = get(JOB_ID).filter(|s| !s.trim().is_empty()) {
            job_id = id.trim().to_string();
        }
        if !job_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(Error::Env(format!(
                "{JOB_ID}={job_id:?} may only hold letters, digits, '-', '_' and '.'"
            )));
        }
        if nranks == 0 {
            return Err(Error::Env(format!("{NRANKS} must be at least 1")));
        }
        if rank >= nranks {
            return Err(Error::Env(format!(
                "rank {rank} is not below the number of ranks {nranks}"
            )));
        }
        if local_nranks == 0 || local_rank >= local_nranks {
            return Err(Error::Env(format!(
                "local rank {local_rank} is not below the local number of ranks {local_nranks}"
            )));
        }
        if nranks > 1 && rendezvous.is_none() {
            return Err(Error::Env(format!(
                "{NRANKS}={nranks} but {RENDEZVOUS} (host:port of rank 0) is not set"
            )));
        }
        let token = match get(JOB_TOKEN).filter(|s| !s.trim().is_empty()) {
            Some(t) => JobToken::from_hex(&t)?,
            None => JobToken::derived_from(&job_id),
        };
        let init_timeout_ms = match get(INIT_TIMEOUT_MS) {
            Some(v) => parse_u64(INIT_TIMEOUT_MS, v)?,
            None => DEFAULT_INIT_TIMEOUT_MS,
        };
        let transport = match get(TRANSPORT) {
            Some(v) => v.parse()?,
            None => TransportChoice::Auto,
        };
        let addr = get(ADDR).filter(|s| !s.trim().is_empty());
        let heartbeat_timeout_ms = match get(HEARTBEAT_TIMEOUT_MS) {
            Some(v) if !v.trim().is_empty() => {
                parse_heartbeat(parse_u64(HEARTBEAT_TIMEOUT_MS, v)?)?
            }
            _ => None,
        };
        Ok(JobEnv {
            rank: Rank(rank),
            nranks,
            local_rank,
            local_nranks,
            rendezvous,
            token,
            job_id,
            init_timeout_ms,
            transport,
            addr,
            heartbeat_timeout_ms,
        })
    }

    /// The variables that describe this job for one rank, in a stable order — what a
    /// launcher exports. Inverse of [`JobEnv::from_lookup`].
    pub fn to_vars(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            (RANK, self.rank.0.to_string()),
            (NRANKS, self.nranks.to_string()),
            (LOCAL_RANK, self.local_rank.to_string()),
            (LOCAL_NRANKS, self.local_nranks.to_string()),
        ];
        if let Some(r) = &self.rendezvous {
            v.push((RENDEZVOUS, r.clone()));
        }
        v.push((JOB_TOKEN, self.token.to_hex()));
        v.push((JOB_ID, self.job_id.clone()));
        v.push((INIT_TIMEOUT_MS, self.init_timeout_ms.to_string()));
        v.push((TRANSPORT, self.transport.to_string()));
        if let Some(a) = &self.addr {
            v.push((ADDR, a.clone()));
        }
        if let Some(ms) = self.heartbeat_timeout_ms {
            v.push((HEARTBEAT_TIMEOUT_MS, ms.to_string()));
        }
        v
    }
}

/// The job as another launcher describes it; `None` where none does, or where the explicit
/// `GASPI_*` description (`explicit`) is given. Precedence, innermost launcher first:
/// torchrun's agent > a Slurm step > `RANK`/`WORLD_SIZE` set by hand (a script under `srun`
/// that exports them from Slurm's agrees with Slurm anyway). The caller then refuses
/// `mpirun`, or runs a single process.
fn foreign_placement(
    get: &impl Fn(&str) -> Option<String>,
    explicit: bool,
) -> Result<Option<Placement>> {
    if torchrun::started_by_agent(get) {
        if let Some(p) = torchrun::placement(get, explicit)? {
            return Ok(Some(p));
        }
    }
    match slurm::placement(get, explicit)? {
        Some(p) => Ok(Some(p)),
        None => torchrun::placement(get, explicit),
    }
}

/// `GASPI_HEARTBEAT_TIMEOUT_MS`: 0 is off, anything else at least the minimum.
fn parse_heartbeat(ms: u64) -> Result<Option<u64>> {
    match ms {
        0 => Ok(None),
        ms if ms < MIN_HEARTBEAT_TIMEOUT_MS => Err(Error::Env(format!(
            "{HEARTBEAT_TIMEOUT_MS}={ms}: at least {MIN_HEARTBEAT_TIMEOUT_MS} (or 0: off)"
        ))),
        ms => Ok(Some(ms)),
    }
}

#[cfg(test)]
mod tests;
