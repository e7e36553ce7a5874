//! Ranks on other hosts, started through `ssh` (BatchMode, the user's ssh config).
//!
//! Each rank runs under a small POSIX-shell wrapper on its host. The wrapper reads the job
//! token from its stdin, which is the ssh connection (a command line is readable by every
//! user of both hosts; the connection is not), and exports it. It starts the rank in a new
//! session (so its process group is its PID), reports that PID on stderr, and watches its
//! stdin: a `term`/`kill` line signals the rank's process group, and end-of-file
//! (tarantella or the connection is gone) stops it as well: SIGTERM, then SIGKILL 3 s later,
//! unless a `kill` came first. When the rank ends, the wrapper reports its status and exits
//! with it. A shell's `$?` reads 128 + N both for a rank killed by signal N and for one that
//! exited with that number, so where the host has `perl` the rank runs under `REAPER`,
//! which reports which of the two it was.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicI32;
use std::sync::mpsc::Sender;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use gaspi::env as genv;

use super::pump::{pump, Control};
use super::{
    dry_run_command, dry_run_heading, Event, Kind, OpenStreams, Proc, Sink, Tails, SSH_FAILED,
};
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::shell;

/// The wrapper (one line, so that any login shell passes it on to `sh -c` intact).
/// Arguments: working directory, job id, then `VAR=VALUE`... and the command (for `env`).
/// Its stdin starts with the job token's line, then the machine file's lines and an empty
/// line; without a token (tarantella went away) it runs nothing. The machine file goes to
/// a private temporary file on this host (`GASPI_MFILE`, for programs linked against GPI-2),
/// removed when the rank ends.
///
/// A `format!` string, so that the variables' names are gaspi's constants: `{token}` and
/// `{mfile}` stand for them, `{{` and `}}` are the script's own braces.
static WRAPPER: LazyLock<String> = LazyLock::new(|| {
    format!(
        concat!(
            "read -r t || {{ echo 'tarantella: no job token arrived on the ssh connection' >&2; exit 97; }}; ",
            "{token}=\"$t\"; export {token}; t=; ",
            "m=$(mktemp \"${{TMPDIR:-/tmp}}/tnt-$2-{suffix}XXXXXX\") || {{ echo \"tarantella: cannot create the machine file ({mfile}) on $(uname -n)\" >&2; exit 98; }}; ",
            "while read -r h && [ -n \"$h\" ]; do printf '%s\\n' \"$h\"; done >\"$m\"; {mfile}=$m; export {mfile}; ",
            "cd \"$1\" 2>/dev/null; shift 2; exec 3<&0; ",
            "if command -v perl >/dev/null 2>&1; then setsid perl -e '{reaper}' -- env \"$@\" </dev/null 3<&- & ",
            "else setsid env \"$@\" </dev/null 3<&- & fi; c=$!; ",
            "printf '\\036TNT pid %s\\n' \"$c\" >&2; ",
            "( k=; while read -r m; do case \"$m\" in term) kill -TERM -\"$c\";; kill) k=1; kill -KILL -\"$c\";; esac; done; ",
            "[ -n \"$k\" ] || {{ kill -TERM -\"$c\" && sleep 3 && kill -KILL -\"$c\"; }} ) <&3 >/dev/null 2>&1 & w=$!; exec 3<&-; ",
            "wait \"$c\" 2>/dev/null; r=$?; rm -f \"${mfile}\"; kill \"$w\" 2>/dev/null; kill -TERM -\"$c\" 2>/dev/null; ",
            "printf '\\036TNT exit %s\\n' \"$r\" >&2; exit \"$r\""
        ),
        token = genv::JOB_TOKEN,
        mfile = genv::MFILE,
        suffix = MACHINE_FILE_SUFFIX,
        reaper = REAPER,
    )
});

/// The Perl program the rank runs under where the host has `perl` (arguments: the rank's
/// `env` command). It leads the rank's session in its place, runs the rank as its child,
/// and reports how it ended as the shell cannot: `\x1eTNT exited N` or `\x1eTNT killed S`,
/// before the wrapper's own report (`exit`, the shell's view), which is kept for when the
/// reaper itself was killed (SIGKILL to the group). It blocks every signal it can, so that
/// what the rank's group is sent reaches the rank only; the rank gets the signal mask back.
/// It also puts SIGINT and SIGQUIT back to their default action: the wrapper's shell starts
/// its background job with both ignored (POSIX, for a shell without job control), and local
/// ranks, mpirun's and srun's start with them at their default (a Python rank would never
/// raise `KeyboardInterrupt`). Without Perl's POSIX module it runs the rank in its own place;
/// without Perl, the rank keeps both ignored. No single quote: it goes into the wrapper
/// between them.
const REAPER: &str = concat!(
    "$SIG{INT} = $SIG{QUIT} = \"DEFAULT\"; ",
    "eval { require POSIX; 1 } or exec { $ARGV[0] } @ARGV or die \"tarantella: cannot run $ARGV[0]: $!\\n\"; ",
    "$all = POSIX::SigSet->new; $all->fillset; $old = POSIX::SigSet->new; ",
    "POSIX::sigprocmask(POSIX::SIG_BLOCK(), $all, $old); ",
    "defined($p = fork) or die \"tarantella: cannot start the rank: $!\\n\"; ",
    "if (!$p) { POSIX::sigprocmask(POSIX::SIG_SETMASK(), $old); exec { $ARGV[0] } @ARGV; ",
    "print STDERR \"tarantella: cannot run $ARGV[0]: $!\\n\"; POSIX::_exit(127) } ",
    "waitpid($p, 0); $s = $? & 127; ",
    "printf STDERR \"\\036TNT %s %d\\n\", $s ? (\"killed\", $s) : (\"exited\", $? >> 8); ",
    "exit($s ? 128 + $s : $? >> 8)"
);

/// The ssh command: `$TARANTELLA_SSH` (split like a shell would) or `ssh`.
pub fn base_command() -> Result<Vec<String>> {
    let words = match std::env::var(tnt_env::SSH) {
        Ok(s) if !s.trim().is_empty() => shell::split(&s)?,
        _ => vec!["ssh".to_string()],
    };
    Ok(words)
}

/// `base` + the options tarantella always adds + host + the remote command line.
pub fn command_line(base: &[String], host: &str, remote: &str) -> Vec<String> {
    let mut v = base.to_vec();
    v.extend(["-o", "BatchMode=yes", "-T", host, "--", remote].map(String::from));
    v
}

/// `--dry-run`: where each ssh rank's machine file goes, then each rank's command line
/// under a line naming it: the ssh command (`base` and tarantella's options) and what
/// would run on the rank's host. The wrapper, which takes the job token from the
/// connection, is left out: it only passes the rank's `env` command on.
pub fn describe(plan: &Plan, base: &[String]) -> Result<String> {
    let mut out = format!(
        "# each ssh rank's wrapper writes it on the rank's host, as \
         $TMPDIR/tnt-{}-{MACHINE_FILE_SUFFIX}XXXXXX, and sets {}\n",
        plan.job_id,
        gaspi::env::MFILE
    );
    // The ssh command up to the host: `base` and the options tarantella adds.
    let line = command_line(base, "HOST", "");
    let ssh = &line[..line.len() - 3];
    for r in &plan.ranks {
        out += &dry_run_heading(r);
        let mut words = Vec::new();
        if let Some(h) = &r.host {
            words.extend(ssh.iter().cloned());
            words.push(h.clone());
            words.push("--".into());
        }
        words.extend(dry_run_command(plan, r));
        out += &shell::join(&words)?;
        out.push('\n');
    }
    Ok(out)
}

/// Where a rank runs and what it is, for its ssh command line: `host`, the working
/// directory, the job id, and the rank's environment and command. No secret belongs in
/// `env`: every user of either host can read it.
pub struct RemoteRank<'a> {
    /// The ssh destination, `[user@]host`.
    pub host: &'a str,
    /// The directory the rank runs in: `tarantella`'s, assumed to exist there too.
    pub cwd: &'a str,
    /// The job id, which names the rank's machine file on its host.
    pub job_id: &'a str,
    /// The rank's environment, passed on `env`'s command line.
    pub env: &'a [(String, String)],
    /// The rank's command line.
    pub argv: &'a [String],
}

/// The whole ssh command line of one rank: `base`, the options, the host and the wrapper.
pub fn rank_command_line(base: &[String], rank: &RemoteRank) -> Result<Vec<String>> {
    Ok(command_line(base, rank.host, &remote_rank_command(rank)?))
}

/// The remote command that runs `rank.argv` with `rank.env` as one rank.
pub fn remote_rank_command(rank: &RemoteRank) -> Result<String> {
    let (cwd, env, argv) = (rank.cwd, rank.env, rank.argv);
    let mut words = vec![
        "sh".to_string(),
        "-c".into(),
        WRAPPER.to_string(),
        "tarantella-rank".into(),
        cwd.to_string(),
        rank.job_id.to_string(),
    ];
    words.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    words.extend(argv.iter().cloned());
    shell::join(&words)
}

/// Starts rank `rank` on `host`; `token` (hex) and the `machine_file` lines go on the
/// connection, read by the remote wrapper (`WRAPPER`).
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    idx: usize,
    rank: usize,
    host: &str,
    base: &[String],
    env: &[(String, String)],
    argv: &[String],
    token: &str,
    machine_file: &[String],
    job_id: &str,
    (out, err): (Sink, Sink),
    events: Sender<Event>,
) -> Result<Proc> {
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| ".".into());
    let remote = RemoteRank {
        host,
        cwd: &cwd,
        job_id,
        env,
        argv,
    };
    let line = rank_command_line(base, &remote)?;
    let mut cmd = Command::new(&line[0]);
    cmd.args(&line[1..])
        // Marks the ssh client as the job's for `--cleanup`, as the ranks are.
        .env(tnt_env::JOB_ID, job_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    super::local::parent_death_signal(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| Error::Spawn {
        what: format!("ssh to {host} for rank {rank} ({})", line[0]),
        source,
    })?;
    let mut control = child.stdin.take();
    if let Some(c) = &mut control {
        // Were ssh gone already, the wrapper never starts the rank, and ssh's own status
        // says why: nothing to report here.
        if c.write_all(wrapper_input(token, machine_file).as_bytes())
            .and_then(|_| c.flush())
            .is_err()
        {
            control = None;
        }
    }
    let open = OpenStreams::default();
    let tails = Tails::default();
    let remote_pid = Arc::new(AtomicI32::new(-1));
    let remote_status = Arc::new(OnceLock::new());
    if let Some(s) = child.stdout.take() {
        pump(s, out, tails.stdout.clone(), None, &open);
    }
    if let Some(s) = child.stderr.take() {
        let control = Control {
            idx,
            events,
            remote_pid: remote_pid.clone(),
            remote_status: remote_status.clone(),
        };
        pump(s, err, tails.stderr.clone(), Some(control), &open);
    }
    Ok(Proc {
        rank: Some(rank),
        host: host.to_string(),
        kind: Kind::Ssh {
            control,
            kill_sent: None,
            remote_pid,
            remote_status,
        },
        child,
        open_streams: open,
        tails,
        reaped: None,
        status: None,
    })
}

/// What the wrapper reads first on its stdin: the token's line, then the machine file's
/// lines and an empty line.
fn wrapper_input(token: &str, machine_file: &[String]) -> String {
    let mut text = format!("{token}\n");
    for host in machine_file {
        text.push_str(host);
        text.push('\n');
    }
    text.push('\n');
    text
}

/// Runs `remote` on `host` and returns its stdout, or why it failed.
pub fn run_remote(
    base: &[String],
    host: &str,
    remote: &str,
    limit: Duration,
) -> Result<String, RemoteError> {
    let line = command_line(base, host, remote);
    let mut child = Command::new(&line[0])
        .args(&line[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| RemoteError::Failed(format!("cannot run {}: {e}", line[0])))?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let read = |s: Option<std::process::ChildStdout>| {
        std::thread::spawn(move || {
            let mut buf = String::new();
            if let Some(mut s) = s {
                let _ = std::io::Read::read_to_string(&mut s, &mut buf);
            }
            buf
        })
    };
    let out = read(out);
    let err = std::thread::spawn(move || {
        let mut buf = String::new();
        if let Some(mut s) = err {
            let _ = std::io::Read::read_to_string(&mut s, &mut buf);
        }
        buf
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RemoteError::Failed(format!(
                    "ssh {host} did not finish within {limit:?}"
                )));
            }
        }
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if status.success() {
        Ok(out)
    } else if status.code() == Some(SSH_FAILED) {
        Err(RemoteError::Unreachable(last_line(&err)))
    } else {
        Err(RemoteError::Failed(format!(
            "ssh {host} failed ({status}): {}",
            err.trim()
        )))
    }
}

/// Why a command run on another host through ssh ([`run_remote`]) failed.
#[derive(Debug)]
pub enum RemoteError {
    /// ssh failed itself ([`SSH_FAILED`]): the host could not be reached or refused the
    /// login. ssh's own message says which.
    Unreachable(String),
    /// ssh could not be started, or the command failed on the host or overran.
    Failed(String),
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteError::Unreachable(said) => {
                write!(
                    f,
                    "could not be reached by ssh (status {SSH_FAILED}): {said}"
                )
            }
            RemoteError::Failed(why) => f.write_str(why),
        }
    }
}

/// What ssh said when it failed: the last line it wrote on stderr (its own error comes
/// after any warnings).
pub fn last_line(stderr: &str) -> String {
    stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("ssh wrote nothing on stderr")
        .to_string()
}

/// Picks `count` distinct ports on `host` that nothing uses, from the host's TCP tables.
pub fn free_remote_ports(base: &[String], host: &str, count: usize) -> Result<Vec<u16>> {
    let out = run_remote(
        base,
        host,
        "cat /proc/sys/net/ipv4/ip_local_port_range /proc/net/tcp /proc/net/tcp6 2>/dev/null",
        Duration::from_secs(30),
    )
    .map_err(|e| match e {
        RemoteError::Unreachable(said) => Error::SshUnreachable {
            host: host.to_string(),
            said,
        },
        RemoteError::Failed(msg) => Error::NoPort {
            host: host.to_string(),
            msg,
        },
    })?;
    pick_ports(&out, count).ok_or_else(|| Error::NoPort {
        host: host.to_string(),
        msg: "every candidate port is in use".into(),
    })
}

/// Picks `count` distinct ports on this host that nothing uses, below the ephemeral range
/// as on remote hosts ([`free_remote_ports`]): a port that `bind(0)` handed out and that was
/// released belongs to the range that outgoing connections take their local ports from, so
/// one of them could take it before rank 0 binds it.
pub fn free_local_ports(count: usize) -> Result<Vec<u16>> {
    let mut text = String::new();
    for f in [
        "/proc/sys/net/ipv4/ip_local_port_range",
        "/proc/net/tcp",
        "/proc/net/tcp6",
    ] {
        text.push_str(&std::fs::read_to_string(f).unwrap_or_default());
    }
    pick_ports(&text, count).ok_or_else(|| Error::NoPort {
        host: "localhost".to_string(),
        msg: "every candidate port is in use".into(),
    })
}

/// From `ip_local_port_range` followed by `/proc/net/tcp*` text: `count` ports below the
/// ephemeral range (so no outgoing connection takes them), from a random start, that no
/// socket uses.
fn pick_ports(text: &str, count: usize) -> Option<Vec<u16>> {
    let mut lines = text.lines();
    let range: Vec<u32> = lines
        .next()?
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let eph_low = range
        .first()
        .copied()
        .unwrap_or(32768)
        .clamp(10_001, 65_536);
    let used: std::collections::HashSet<u32> = lines
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|a| a.rsplit(':').next())
        .filter_map(|p| u32::from_str_radix(p, 16).ok())
        .collect();
    let seed = gaspi::env::JobToken::random().ok()?.0;
    let span = eph_low - 10_000;
    let start = u32::from_le_bytes([seed[0], seed[1], seed[2], seed[3]]) % span;
    let ports: Vec<u16> = (0..span)
        .map(|i| 10_000 + (start + i) % span)
        .filter(|p| !used.contains(p))
        .filter_map(|p| u16::try_from(p).ok())
        .take(count)
        .collect();
    (ports.len() == count).then_some(ports)
}

/// Removes the job's shared-memory files and machine files on `host`.
pub fn remove_leftovers(base: &[String], host: &str, job_id: &str) -> Result<(), RemoteError> {
    run_remote(
        base,
        host,
        &leftovers_rm_command(job_id),
        Duration::from_secs(20),
    )
    .map(|_| ())
}

/// `rm -f` of the job's segment files, `/dev/shm/tnt-<job>-<16 hex digits>-*` (see
/// `gaspi::env::remove_job_shm_files`), and of the machine files the wrappers write,
/// `$TMPDIR/tnt-<job>-machines.XXXXXX` (normally removed by the wrapper as its rank ends).
/// Job ids are validated: no quoting issues. The nonce and the six characters of the
/// machine files keep job `a` off the files of job `a-b` or `a-machines.b`.
pub fn leftovers_rm_command(job_id: &str) -> String {
    let nonce = "[0-9a-f]".repeat(16);
    format!(
        "rm -f /dev/shm/tnt-{job_id}-{nonce}-* \"${{TMPDIR:-/tmp}}\"/tnt-{job_id}-{MACHINE_FILE_SUFFIX}??????"
    )
}

/// What the wrapper's `mktemp` template puts between the job id and the random part.
const MACHINE_FILE_SUFFIX: &str = "machines.";

#[cfg(test)]
mod tests;
