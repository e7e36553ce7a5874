//! Inside a Slurm allocation: one `srun` starts every rank; a small wrapper maps
//! `SLURM_PROCID`/`SLURM_NTASKS`/`SLURM_LOCALID` onto the gaspi variables.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{Kind, OpenStreams, Proc};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::shell;

/// Arguments: run directory, `1` when every rank's output is shown, then the command.
/// Ranks other than 0 write to `rank-K.log` unless shown; a failing rank leaves
/// `status-K` (`<status> <host>`) so tarantella can name it.
const WRAPPER: &str = concat!(
    "d=$1; a=$2; shift 2; ",
    "export GASPI_RANK=\"$SLURM_PROCID\" GASPI_NRANKS=\"$SLURM_NTASKS\" GASPI_LOCAL_RANK=\"${SLURM_LOCALID:-0}\"; ",
    "t=\"${SLURM_STEP_TASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-1}}\"; t=\"${t%%,*}\"; export GASPI_LOCAL_NRANKS=\"${t%%(*}\"; ",
    "if [ -z \"$GASPI_RENDEZVOUS\" ]; then nl=\"${SLURM_STEP_NODELIST:-$SLURM_JOB_NODELIST}\"; ",
    "h=$(scontrol show hostnames \"$nl\" 2>/dev/null | head -n 1); [ -n \"$h\" ] || h=\"${nl%%[,[]*}\"; ",
    "export GASPI_RENDEZVOUS=\"$h:$((20000 + (SLURM_JOB_ID * 16 + ${SLURM_STEP_ID:-0}) % 40000))\"; fi; ",
    "if [ \"$a\" != 1 ] && [ \"$SLURM_PROCID\" != 0 ]; then mkdir -p \"$d\"; exec >\"$d/rank-$SLURM_PROCID.log\" 2>&1; fi; ",
    "\"$@\"; r=$?; [ \"$r\" = 0 ] || echo \"$r $(hostname)\" >\"$d/status-$SLURM_PROCID\"; exit \"$r\""
);

/// The srun command line.
pub fn command_line(plan: &Plan) -> Vec<String> {
    let mut v = vec!["srun".to_string()];
    if plan.nranks > 0 {
        v.push(format!("--ntasks={}", plan.nranks));
    }
    if let Some(k) = plan.slurm_per_node {
        v.push(format!("--ntasks-per-node={k}"));
    }
    v.extend(["--kill-on-bad-exit=1", "--export=ALL"].map(String::from));
    if plan.show_all_output {
        v.push("--label".into());
    }
    v.extend(["sh", "-c", WRAPPER, "tarantella-rank"].map(String::from));
    v.push(plan.run_dir.to_string_lossy().into_owned());
    v.push(if plan.show_all_output { "1" } else { "0" }.into());
    let rank0 = crate::plan::RankPlan {
        rank: 0,
        host: None,
        local_rank: 0,
        local_nranks: 1,
    };
    v.extend(plan.rank_argv(&rank0));
    v
}

/// `--dry-run` text.
pub fn describe(plan: &Plan) -> String {
    let mut words = vec!["env".to_string()];
    words.extend(
        plan.slurm_env()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}")),
    );
    words.push(Plan::redacted_token_var());
    words.extend(command_line(plan));
    format!(
        "# one srun step; each rank maps SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID to GASPI_*\n{}\n",
        shell::join(&words)
    )
}

/// Starts the srun step (output goes straight to the terminal or the rank logs).
pub fn spawn(plan: &Plan) -> Result<Proc> {
    let line = command_line(plan);
    let (token_var, token) = plan.token_var();
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..])
        .envs(plan.slurm_env())
        // In srun's environment, which `--export=ALL` passes on to every rank.
        .env(token_var, token)
        .stdin(Stdio::null())
        .process_group(0);
    super::local::parent_death_signal(&mut cmd);
    let child = cmd.spawn().map_err(|source| Error::Spawn {
        what: "srun".into(),
        source,
    })?;
    Ok(Proc {
        rank: None,
        host: "slurm".into(),
        child,
        kind: Kind::Slurm,
        open_streams: OpenStreams::default(),
        reaped: None,
        status: None,
    })
}

/// The first failed rank, from the `status-K` files the wrapper leaves.
pub fn first_failure(run_dir: &Path) -> Option<(usize, String, i32)> {
    let mut found: Vec<(std::time::SystemTime, usize, String, i32)> = Vec::new();
    for e in std::fs::read_dir(run_dir).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rank) = name.strip_prefix("status-").and_then(|r| r.parse().ok()) else {
            continue;
        };
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut w = text.split_whitespace();
        let code = w.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let host = w.next().unwrap_or("?").to_string();
        let t = e
            .metadata()
            .and_then(|m| m.modified())
            .unwrap_or(std::time::UNIX_EPOCH);
        found.push((t, rank, host, code));
    }
    found.sort();
    found.into_iter().next().map(|(_, r, h, c)| (r, h, c))
}
