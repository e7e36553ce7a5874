//! Jobs started by `torchrun` (or by hand with torch.distributed's `env://` variables):
//! rank, size and rendezvous from `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `MASTER_ADDR` and `MASTER_PORT`.

use super::placement::{parse_u16, Placement};
use super::vars::SN_PORT;
use crate::error::{Error, Result};

/// The global rank torchrun assigns, `0..WORLD_SIZE`: becomes the GASPI rank.
pub const RANK: &str = "RANK";
/// The number of processes in the torchrun job: becomes the number of GASPI ranks.
pub const WORLD_SIZE: &str = "WORLD_SIZE";
/// The rank among the processes on this node (default: [`RANK`], all on one host).
pub const LOCAL_RANK: &str = "LOCAL_RANK";
/// The number of processes on this node (default: [`WORLD_SIZE`]).
pub const LOCAL_WORLD_SIZE: &str = "LOCAL_WORLD_SIZE";
/// The host of torchrun's rank 0 store: our rendezvous host (required for more than one
/// rank).
pub const MASTER_ADDR: &str = "MASTER_ADDR";
/// torchrun's store port; our rendezvous listens next to it (see [`rendezvous_port`]) and
/// it is part of the job id.
pub const MASTER_PORT: &str = "MASTER_PORT";
/// torchrun's run id (`--rdzv-id`): part of the job id, `none` when unset.
pub const RUN_ID: &str = "TORCHELASTIC_RUN_ID";

/// Whether torchrun's agent started this process: it sets [`RUN_ID`] for every worker (its
/// default run id is `none`), while a script that exports `RANK` and `WORLD_SIZE` by hand
/// (for `torch.distributed`'s `env://`) usually does not.
///
/// The agent is then the innermost launcher, so its variables describe the job over Slurm's:
/// under `srun torchrun --nproc-per-node K`, every worker inherits its agent's Slurm task
/// (`SLURM_PROCID` of `SLURM_NTASKS` agents), which counts agents, not workers.
pub(super) fn started_by_agent(get: &impl Fn(&str) -> Option<String>) -> bool {
    get(RUN_ID).is_some()
}

/// The port of our rendezvous next to torchrun's: its agent (or the program's own
/// `torch.distributed` store) already listens on `MASTER_PORT`, so we take the one above
/// it, or the one below when `MASTER_PORT` is the last port.
pub fn rendezvous_port(master_port: u16) -> u16 {
    master_port.checked_add(1).unwrap_or(master_port - 1)
}

/// The job torchrun describes, when `RANK` and `WORLD_SIZE` are set and the explicit
/// `GASPI_*` description (`explicit`) is not — our own launcher exports torchrun's names
/// too, for the program's use, so those never decide alone.
///
/// The job id is `torchrun-<TORCHELASTIC_RUN_ID>.<MASTER_PORT>`: the run id names the job
/// (torchrun's default is `none`, so the port keeps concurrent jobs on one host apart), and
/// the default token is derived from it as Slurm's is from its job id: weak, anyone who
/// knows the run id and port can join.
pub(super) fn placement(
    get: &impl Fn(&str) -> Option<String>,
    explicit: bool,
) -> Result<Option<Placement>> {
    let (Some(world), Some(rank)) = (get(WORLD_SIZE), get(RANK)) else {
        return Ok(None);
    };
    if explicit {
        return Ok(None);
    }
    let nranks = parse_u16(WORLD_SIZE, world)?;
    let rank = parse_u16(RANK, rank)?;
    if nranks == 0 {
        return Err(Error::Env(format!(
            "{WORLD_SIZE}=0: a job has at least 1 rank"
        )));
    }
    if rank >= nranks {
        return Err(Error::Env(format!(
            "{RANK}={rank} is not below {WORLD_SIZE}={nranks}"
        )));
    }
    // Like GASPI_LOCAL_*: without the local variables, all ranks are taken to share a host.
    let local_rank = match get(LOCAL_RANK) {
        Some(v) => parse_u16(LOCAL_RANK, v)?,
        None => rank,
    };
    let local_nranks = match get(LOCAL_WORLD_SIZE) {
        Some(v) => parse_u16(LOCAL_WORLD_SIZE, v)?,
        None => nranks,
    };
    if local_rank >= local_nranks {
        return Err(Error::Env(format!(
            "{LOCAL_RANK}={local_rank} is not below {LOCAL_WORLD_SIZE}={local_nranks}"
        )));
    }
    let master_port = match get(MASTER_PORT).filter(|s| !s.trim().is_empty()) {
        Some(v) => match parse_u16(MASTER_PORT, v)? {
            0 => return Err(Error::Env(format!("{MASTER_PORT}=0 is not a port"))),
            p => Some(p),
        },
        None => None,
    };
    let rendezvous = if nranks > 1 {
        let host = get(MASTER_ADDR)
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                Error::Env(format!(
                    "{WORLD_SIZE}={nranks} but {MASTER_ADDR} (rank 0's host) is not set"
                ))
            })?;
        let port = match (get(SN_PORT), master_port) {
            (Some(v), _) => parse_u16(SN_PORT, v)?,
            (None, Some(p)) => rendezvous_port(p),
            (None, None) => {
                return Err(Error::Env(format!(
                    "{WORLD_SIZE}={nranks} but neither {MASTER_PORT} nor {SN_PORT} is set"
                )))
            }
        };
        // An IPv6 literal needs brackets before the port.
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        Some(format!("{host}:{port}"))
    } else {
        None
    };
    let run_id = get(RUN_ID)
        .map(|r| job_id_safe(r.trim()))
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "none".to_string());
    let job_id = match master_port {
        Some(p) => format!("torchrun-{run_id}.{p}"),
        None => format!("torchrun-{run_id}"),
    };
    Ok(Some(Placement {
        rank,
        nranks,
        local_rank,
        local_nranks,
        rendezvous,
        job_id,
    }))
}

/// `id` with every character a job id may not hold (it names files in `/dev/shm`) replaced
/// by `_`; torchrun's run ids are free-form.
fn job_id_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}
