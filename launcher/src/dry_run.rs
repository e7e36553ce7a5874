//! `--dry-run`: what would run where, each rank with its environment, and nothing started.
//! The text about the job as a whole is made here; each spawner writes the lines of the
//! ranks it would start ([`spawn::local::describe`], [`spawn::ssh::describe`],
//! [`spawn::slurm::describe`]).

use gaspi::env as genv;
use gaspi::env::torchrun::MASTER_PORT;

use crate::error::Result;
use crate::plan::env::CUDA_VISIBLE_DEVICES;
use crate::plan::{Mode, Plan};
use crate::spawn;

/// The dry run's text for `plan`. For ssh ranks it shows the ssh command `tarantella`
/// would use (`TARANTELLA_SSH`, else `ssh`), which may fail to parse.
pub fn text(plan: &Plan) -> Result<String> {
    let ssh = match plan.mode {
        Mode::Ssh => spawn::ssh::base_command()?,
        Mode::Local | Mode::Slurm => Vec::new(),
    };
    describe(plan, &ssh)
}

/// The dry run's text for `plan`, with `ssh` the ssh command of ssh ranks.
pub fn describe(plan: &Plan, ssh: &[String]) -> Result<String> {
    let mut out = format!(
        "# tarantella dry run: job {} ({}), {} rank(s); run directory {}\n",
        plan.job_id,
        plan.mode.name(),
        plan.nranks,
        plan.run_dir.display()
    );
    out += &format!(
        "# {} is random per run and never shown: ranks get it in their environment (ssh \
         ranks through the ssh connection, not its command line).\n\
         # {} and {MASTER_PORT} get free ports on rank 0's host at start.\n",
        genv::JOB_TOKEN,
        genv::RENDEZVOUS
    );
    out += &gpus(plan);
    if let Some(limit) = plan.time_limit {
        out += &format!(
            "# time limit: {} s (--timeout), then every rank is stopped\n",
            limit.as_secs_f64()
        );
    }
    if plan.mode != Mode::Slurm {
        out += &format!(
            "# machine file ({}, rank r's host on line r): {}\n",
            genv::MFILE,
            plan.machine_file.join(" ")
        );
    }
    out += &match plan.mode {
        Mode::Local => spawn::local::describe(plan)?,
        Mode::Ssh => spawn::ssh::describe(plan, ssh)?,
        Mode::Slurm => spawn::slurm::describe(plan)?,
    };
    Ok(out)
}

/// The dry run's line on GPUs: hidden, or which ones every rank sees (tarantella assigns
/// none; the trainer picks one by local rank).
fn gpus(plan: &Plan) -> String {
    // -x is applied after --no-gpu's empty value, so it wins over --no-gpu too.
    let exported = plan.settings.exported(CUDA_VISIBLE_DEVICES);
    if plan.settings.hide_gpus && exported.is_none() {
        return format!("# GPUs: hidden by --no-gpu ({CUDA_VISIBLE_DEVICES}= on every rank)\n");
    }
    let seen = match (exported, plan.mode) {
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
