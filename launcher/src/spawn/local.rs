//! Ranks on this host: children of `tarantella`, each in its own process group.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::pump::pump;
use super::{dry_run_command, dry_run_heading, Kind, OpenStreams, Proc, Sink, Tails};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::shell;

/// Starts `argv` with `env` and the job token (`token`: variable, value) as rank `rank`.
pub fn spawn(
    rank: usize,
    argv: &[String],
    env: &[(String, String)],
    token: (&str, &str),
    (out, err): (Sink, Sink),
) -> Result<Proc> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
        // A process's environment is readable only by its user (and root), unlike its
        // command line.
        .env(token.0, token.1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    parent_death_signal(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        what: format!("rank {rank} ({})", argv[0]),
        source,
    })?;
    let open = OpenStreams::default();
    let tails = Tails::default();
    if let Some(s) = child.stdout.take() {
        pump(s, out, tails.stdout.clone(), None, &open);
    }
    if let Some(s) = child.stderr.take() {
        pump(s, err, tails.stderr.clone(), None, &open);
    }
    Ok(Proc {
        rank: Some(rank),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "localhost".into()),
        child,
        kind: Kind::Local,
        open_streams: open,
        tails,
        reaped: None,
        status: None,
    })
}

/// `--dry-run`: the command line of each rank on this host, under a line naming it.
pub fn describe(plan: &Plan) -> Result<String> {
    let mut out = String::new();
    for r in &plan.ranks {
        out += &dry_run_heading(r);
        out += &shell::join(&dry_run_command(plan, r))?;
        out.push('\n');
    }
    Ok(out)
}

/// Makes the child receive SIGTERM if `tarantella` dies without tearing the job down
/// (e.g. SIGKILL), so a rank is not left running.
pub(crate) fn parent_death_signal(cmd: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
    // system calls (prctl, getppid); it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                // The parent died before prctl took effect.
                return Err(std::io::Error::other("tarantella exited during start"));
            }
            Ok(())
        });
    }
}
