//! Jobs started by `srun`: rank, size and rendezvous from Slurm's variables.

use super::placement::{parse_u16, Placement};
use crate::error::{Error, Result};

/// The id of the job step this process belongs to, set by Slurm only in the tasks of a step
/// that `srun` (or `mpirun` through Slurm's PMI) started (`SLURM_STEPID` is its older name).
const STEP_ID: &str = "SLURM_STEP_ID";
const STEP_ID_OLD: &str = "SLURM_STEPID";

/// The first of Slurm's pseudo step ids (`batch`, `extern`, `interactive`, ... count down
/// from `0xFFFFFFFF`): a step id this high names no step of `srun`'s.
const FIRST_PSEUDO_STEP: u64 = 0xFFFF_FFF0;

/// The job `srun` describes, when `SLURM_PROCID`, `SLURM_NTASKS` and a step id are set and
/// the explicit `GASPI_*` description (`explicit`) is not: rank and size from Slurm's
/// variables, the rendezvous on the first host of the step on a port derived from the job
/// and step ids (every rank computes the same one without talking), and job id
/// `slurm-<job>.<step>` (from which the weak default token is derived).
///
/// A batch script (`sbatch`) runs with `SLURM_PROCID=0` and `SLURM_NTASKS` of the whole
/// allocation too, but in no step of `srun`'s: Slurm sets no step id there. A program run
/// directly in it is one process, so Slurm's variables do not describe its job (taking them
/// would make it wait for `SLURM_NTASKS - 1` peers that never come, until the init timeout,
/// and make every process torchrun starts in the script claim rank 0): the next launcher
/// in the order of precedence, or a single rank, describes it.
pub(super) fn placement(
    get: &impl Fn(&str) -> Option<String>,
    explicit: bool,
) -> Result<Option<Placement>> {
    if explicit || get("SLURM_PROCID").is_none() || get("SLURM_NTASKS").is_none() {
        return Ok(None);
    }
    let Some(step) = srun_step(get)? else {
        return Ok(None);
    };
    let rank = parse_u16("SLURM_PROCID", get("SLURM_PROCID").unwrap_or_default())?;
    let nranks = parse_u16("SLURM_NTASKS", get("SLURM_NTASKS").unwrap_or_default())?;
    let local_rank = match get("SLURM_LOCALID") {
        Some(v) => parse_u16("SLURM_LOCALID", v)?,
        None => 0,
    };
    let per_node = get("SLURM_STEP_TASKS_PER_NODE").or_else(|| get("SLURM_TASKS_PER_NODE"));
    let local_nranks = match per_node {
        Some(v) => first_tasks_per_node(&v).unwrap_or(1),
        None => 1,
    };
    let job: u64 = get("SLURM_JOB_ID")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let nodelist = get("SLURM_STEP_NODELIST").or_else(|| get("SLURM_JOB_NODELIST"));
    let port = 20_000 + (job.wrapping_mul(16).wrapping_add(step) % 40_000);
    let rendezvous = nodelist
        .and_then(|l| first_slurm_host(&l))
        .map(|h| format!("{h}:{port}"));
    Ok(Some(Placement {
        rank,
        nranks,
        local_rank,
        local_nranks,
        rendezvous,
        job_id: format!("slurm-{job}.{step}"),
    }))
}

/// The step id of an `srun` step (`SLURM_STEP_ID`, else `SLURM_STEPID`), or `None` where
/// this process runs in none: no step id (a batch script, `salloc`'s shell), or one of
/// Slurm's pseudo steps, by name or by number.
fn srun_step(get: &impl Fn(&str) -> Option<String>) -> Result<Option<u64>> {
    let Some((name, value)) = [STEP_ID, STEP_ID_OLD]
        .into_iter()
        .find_map(|name| get(name).map(|v| (name, v)))
    else {
        return Ok(None);
    };
    let value = value.trim();
    if ["batch", "extern", "interactive"].contains(&value) {
        return Ok(None);
    }
    match value.parse::<u64>() {
        Ok(step) if step >= FIRST_PSEUDO_STEP => Ok(None),
        Ok(step) => Ok(Some(step)),
        Err(_) => Err(Error::Env(format!(
            "{name}={value:?} is not a step id (a number, or batch, extern, interactive)"
        ))),
    }
}

/// `"4(x2),3"` → 4; `"2"` → 2.
fn first_tasks_per_node(v: &str) -> Option<u16> {
    let first = v.split(',').next()?;
    first.split('(').next()?.trim().parse().ok()
}

/// The first host of a Slurm host list: `"node[03-05,7],login1"` → `"node03"`.
fn first_slurm_host(list: &str) -> Option<String> {
    let list = list.trim();
    let end = list.find([',', '[']).unwrap_or(list.len());
    let prefix = &list[..end];
    if list[end..].starts_with('[') {
        let inner = &list[end + 1..list[end..].find(']').map(|i| end + i)?];
        let first = inner.split(',').next()?.split('-').next()?;
        Some(format!("{prefix}{first}"))
    } else if prefix.is_empty() {
        None
    } else {
        Some(prefix.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_host_lists() {
        assert_eq!(first_slurm_host("a1,b2").as_deref(), Some("a1"));
        assert_eq!(first_slurm_host("n[7,9-10]").as_deref(), Some("n7"));
        assert_eq!(first_slurm_host("single").as_deref(), Some("single"));
    }
}
