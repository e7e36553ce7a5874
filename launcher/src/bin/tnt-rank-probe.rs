//! Test helper for the launcher: a stand-in for a GASPI program that only reads the job
//! environment (no gaspi runtime needed).
//!
//! Prints `probe rank=K nranks=N local_rank=L local_nranks=M job=ID pid=P ...`, then acts on:
//! `--env NAME` (print `env NAME=value`), `--touch-shm` (create `/dev/shm/tnt-<job>-<nonce>-rK-probe`, named like a segment file),
//! `--child` (start a grandchild in the same process group, print `child=PID`),
//! `--detached-child` (start a grandchild in a process group of its own that keeps this
//! rank's stdout open and sleeps, print `detached=PID`),
//! `--rendezvous` (rank 0 listens on GASPI_RENDEZVOUS, the others connect and present the
//! job token), `--fail-rank R:CODE` (rank R exits with CODE), `--kill-rank R:SIG` (rank R
//! kills itself with signal SIG), `--stderr-then-fail R:LINES:CODE` (rank R writes
//! `probe stderr line K of LINES` for K = 1..=LINES on stderr, then exits with CODE),
//! `--gaspi` (initialize the gaspi runtime and create segments 0 and 1 with every rank, kept
//! until the probe ends; print `gaspi rank=K segments=2`),
//! `--sleep` (wait until killed), `--exit CODE`,
//! `--gaspi-stop R` (initialize gaspi and pass a barrier; then rank R stops itself with
//! SIGSTOP and the others wait in a blocking barrier, print `probe: barrier: ERROR` when it
//! fails and exit with 1),
//! `--token-on-cmdlines` (print `token_in_env=0|1 token_on_cmdlines=N pids=P,...`: whether
//! GASPI_JOB_TOKEN is set, and the processes of this host whose command line, which every
//! user can read, shows the job token),
//! `--flood BYTES` (write [`flood_line`]s worth BYTES bytes and the line
//! `flood done rank=K bytes=BYTES` on stdout, then exit at once; see [`flood`]),
//! `--gpi2` (check the variables GPI-2's `gaspi_run` sets as a GPI-2 program reads them and
//! print `gpi2 rank=R socket=S host=H master=M lines=N mfile=PATH`; see [`gpi2_view`]).
//! It prints `probe ready rank=K` once set up.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gaspi::env::{self as genv, JobEnv};

/// Every line of `--flood` is this long, newline included.
const FLOOD_LINE_LEN: usize = 64;

fn main() -> ExitCode {
    let env = match JobEnv::from_env() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("probe: bad job environment: {e}");
            return ExitCode::from(90);
        }
    };
    let rank = env.rank.0;
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!(
        "probe rank={rank} nranks={} local_rank={} local_nranks={} job={} pid={} rendezvous={} transport={} token_len={} netns={}",
        env.nranks,
        env.local_rank,
        env.local_nranks,
        env.job_id,
        std::process::id(),
        env.rendezvous.as_deref().unwrap_or("-"),
        env.transport,
        env.token.to_hex().len(),
        std::fs::read_link("/proc/self/ns/net")
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "-".into()),
    );
    let mut sleep = false;
    let mut exit = 0u8;
    let mut _runtime: Option<gaspi::Context> = None;
    let mut i = 0;
    while i < args.len() {
        let next = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--env" => {
                println!(
                    "env {next}={}",
                    std::env::var(&next).unwrap_or_else(|_| "<unset>".into())
                );
                i += 1;
            }
            "--touch-shm" => {
                // Named like a segment file: `tnt-<job>-<nonce>-r<rank>-…`.
                let p = format!(
                    "/dev/shm/tnt-{}-{:016x}-r{rank}-probe",
                    env.job_id, 0xc0ffee
                );
                if let Err(e) = std::fs::write(&p, b"probe") {
                    eprintln!("probe: cannot create {p}: {e}");
                    return ExitCode::from(91);
                }
                println!("shm={p}");
            }
            "--child" => {
                let exe = std::env::current_exe().expect("own path");
                match std::process::Command::new(exe)
                    .arg("--sleep")
                    .stdout(std::process::Stdio::null())
                    .spawn()
                {
                    Ok(c) => println!("child={}", c.id()),
                    Err(e) => {
                        eprintln!("probe: cannot start a child: {e}");
                        return ExitCode::from(92);
                    }
                }
            }
            "--detached-child" => {
                let exe = std::env::current_exe().expect("own path");
                // Inherits stdout, and escapes the rank's process group so that stopping
                // the rank does not stop it: it holds the rank's output open.
                match std::process::Command::new(exe)
                    .arg("--sleep")
                    .process_group(0)
                    .spawn()
                {
                    Ok(c) => println!("detached={}", c.id()),
                    Err(e) => {
                        eprintln!("probe: cannot start a detached child: {e}");
                        return ExitCode::from(92);
                    }
                }
            }
            "--rendezvous" => {
                if let Err(e) = rendezvous(&env) {
                    eprintln!("probe: rendezvous failed: {e}");
                    return ExitCode::from(93);
                }
                println!("rendezvous ok rank={rank}");
            }
            "--fail-rank" | "--kill-rank" => {
                let (r, v) = next.split_once(':').unwrap_or(("", ""));
                if r.parse::<u16>().ok() == Some(rank) {
                    let v: i32 = v.parse().unwrap_or(1);
                    println!("probe ready rank={rank}");
                    if args[i] == "--fail-rank" {
                        eprintln!("probe: rank {rank} fails with {v} as asked");
                        return ExitCode::from(v as u8);
                    }
                    let sig = nix::sys::signal::Signal::try_from(v).expect("signal number");
                    let _ = nix::sys::signal::raise(sig);
                }
                i += 1;
            }
            "--stderr-then-fail" => {
                let parts: Vec<u32> = next.split(':').filter_map(|v| v.parse().ok()).collect();
                let [r, lines, code] = parts[..] else {
                    eprintln!("probe: --stderr-then-fail wants R:LINES:CODE, not {next}");
                    return ExitCode::from(94);
                };
                if r == u32::from(rank) {
                    let mut err = std::io::stderr().lock();
                    for k in 1..=lines {
                        let _ = writeln!(err, "probe stderr line {k} of {lines}");
                    }
                    return ExitCode::from(code as u8);
                }
                i += 1;
            }
            "--flood" => {
                let bytes: usize = next.parse().unwrap_or(0);
                if let Err(e) = flood(rank, bytes) {
                    eprintln!("probe: cannot flood stdout: {e}");
                    return ExitCode::from(95);
                }
                // Exit at once: the point is output still on its way when the rank ends.
                return ExitCode::SUCCESS;
            }
            "--token-on-cmdlines" => {
                let pids = processes_whose_cmdline_shows(env.token.to_hex().as_bytes());
                let list: Vec<String> = pids.iter().map(u32::to_string).collect();
                println!(
                    "token_in_env={} token_on_cmdlines={} pids={}",
                    u8::from(std::env::var_os(genv::JOB_TOKEN).is_some()),
                    pids.len(),
                    if list.is_empty() {
                        "-".to_string()
                    } else {
                        list.join(",")
                    }
                );
            }
            "--gpi2" => match gpi2_view() {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("probe: GPI-2 environment: {e}");
                    return ExitCode::from(96);
                }
            },
            "--gaspi" => match gaspi_segments() {
                Ok(ctx) => {
                    println!("gaspi rank={rank} segments=2");
                    _runtime = Some(ctx);
                }
                Err(e) => {
                    eprintln!("probe: gaspi: {e}");
                    return ExitCode::from(97);
                }
            },
            "--gaspi-stop" => {
                let stopped: u16 = next.parse().unwrap_or(u16::MAX);
                if let Err(e) = gaspi_stop(rank, stopped) {
                    eprintln!("probe: barrier: {e}");
                    return ExitCode::from(1);
                }
                i += 1;
            }
            "--sleep" => sleep = true,
            "--exit" => {
                exit = next.parse().unwrap_or(1);
                i += 1;
            }
            other => {
                eprintln!("probe: unknown argument {other}");
                return ExitCode::from(94);
            }
        }
        i += 1;
    }
    println!("probe ready rank={rank}");
    if sleep {
        loop {
            std::thread::park();
        }
    }
    ExitCode::from(exit)
}

/// A gaspi runtime with segments 0 and 1 created on every rank.
fn gaspi_segments() -> gaspi::Result<gaspi::Context> {
    let ctx = gaspi::Context::init()?;
    let t = gaspi::Timeout(20_000);
    for s in 0..2 {
        ctx.segment_create(
            gaspi::SegmentId(s),
            1 << 16,
            gaspi::Group::ALL,
            t,
            gaspi::Alloc::Initialized,
        )?;
    }
    Ok(ctx)
}

/// `--gaspi-stop`: a job in which rank `stopped` stops making progress.
fn gaspi_stop(rank: u16, stopped: u16) -> gaspi::Result<()> {
    use gaspi::{Context, Group, Timeout};
    let ctx = Context::init()?;
    ctx.barrier(Group::ALL, Timeout(20_000))?;
    println!("probe ready rank={rank}");
    if rank == stopped {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
    }
    ctx.barrier(Group::ALL, Timeout::BLOCK)?;
    ctx.term(Timeout(2_000))
}

/// The processes of this host whose command line (`/proc/PID/cmdline`, readable by every
/// user) contains `needle`.
fn processes_whose_cmdline_shows(needle: &[u8]) -> Vec<u32> {
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc_dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

/// The job as a program linked against GPI-2 sees it: `GASPI_NRANKS`, `GASPI_RANK`,
/// `GASPI_SOCKET` (the rank's index among the ranks of its host), `GASPI_MASTER` (rank 0's
/// host) and the machine file `GASPI_MFILE` (rank r's host on line r), all required. Checks
/// that they agree: as many lines as ranks, the socket counting the earlier lines that name
/// this rank's host, the master on line 0.
fn gpi2_view() -> Result<String, String> {
    let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
    let number = |name: &str| -> Result<usize, String> {
        let v = var(name)?;
        v.parse()
            .map_err(|_| format!("{name}={v:?} is not a number"))
    };
    let (nranks, rank, socket) = (
        number(genv::NRANKS)?,
        number(genv::RANK)?,
        number(genv::SOCKET)?,
    );
    let master = var(genv::MASTER)?;
    let path = var(genv::MFILE)?;
    let mfile = genv::MFILE;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{mfile}={path}: {e}"))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.len() != nranks || rank >= nranks {
        return Err(format!(
            "{mfile}={path} has {} lines for rank {rank} of {nranks}",
            lines.len()
        ));
    }
    let host = lines[rank];
    let before = lines[..rank].iter().filter(|l| **l == host).count();
    if socket != before {
        return Err(format!(
            "{}={socket}, but {before} earlier ranks share its host {host}",
            genv::SOCKET
        ));
    }
    if master != lines[0] {
        return Err(format!(
            "{}={master}, but line 0 of {mfile} is {}",
            genv::MASTER,
            lines[0]
        ));
    }
    Ok(format!(
        "gpi2 rank={rank} socket={socket} host={host} master={master} lines={} mfile={path}",
        lines.len()
    ))
}

/// Line `index` of rank `rank`'s `--flood` output (tests rebuild it to compare every byte).
fn flood_line(rank: u16, index: usize) -> String {
    let mut line = format!("flood rank={rank} line={index:08} ");
    line.extend(std::iter::repeat_n('.', FLOOD_LINE_LEN - 1 - line.len()));
    line.push('\n');
    line
}

/// Writes `bytes` (rounded down to whole lines) of [`flood_line`]s and a final marker line
/// on stdout in one go. When stdout is a pipe it is first grown to hold all of it (as far
/// as the host allows), so that most of the output is still in the pipe, unread, when the
/// rank exits: the case where a launcher that does not wait for its readers loses output.
fn flood(rank: u16, bytes: usize) -> std::io::Result<()> {
    let lines = bytes / FLOOD_LINE_LEN;
    let marker = format!("flood done rank={rank} bytes={}\n", lines * FLOOD_LINE_LEN);
    let mut text = String::with_capacity(lines * FLOOD_LINE_LEN + marker.len());
    for i in 0..lines {
        text.push_str(&flood_line(rank, i));
    }
    text.push_str(&marker);
    let stdout = std::io::stdout();
    let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|m| m.trim().parse::<usize>().ok())
        .unwrap_or(1 << 20);
    let size = i32::try_from(text.len().min(max)).unwrap_or(i32::MAX);
    // Not a pipe, or not allowed: the flood still runs, with the pipe as it is.
    let _ = nix::fcntl::fcntl(&stdout, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size));
    let mut out = stdout.lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Rank 0 accepts every other rank on the rendezvous address; each presents the token.
fn rendezvous(env: &JobEnv) -> Result<(), String> {
    let Some(addr) = env.rendezvous.as_deref() else {
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_millis(env.init_timeout_ms);
    let token = env.token.to_hex();
    let sa = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or(format!("{addr}: no address"))?;
    if env.rank.0 == 0 {
        let l = TcpListener::bind(sa).map_err(|e| format!("bind {sa}: {e}"))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut seen = 1;
        while seen < env.nranks {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(|e| e.to_string())?;
                    s.set_read_timeout(Some(Duration::from_secs(10)))
                        .map_err(|e| e.to_string())?;
                    let mut line = String::new();
                    BufReader::new(&s)
                        .read_line(&mut line)
                        .map_err(|e| e.to_string())?;
                    if line.split_whitespace().nth(2) != Some(token.as_str()) {
                        return Err(format!("peer presented a wrong token: {line:?}"));
                    }
                    (&s).write_all(b"ok\n").map_err(|e| e.to_string())?;
                    seen += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err(format!("only {seen} of {} ranks arrived", env.nranks));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        Ok(())
    } else {
        loop {
            match TcpStream::connect_timeout(&sa, Duration::from_secs(2)) {
                Ok(s) => {
                    writeln!(&s, "rank {} {token}", env.rank.0).map_err(|e| e.to_string())?;
                    let mut line = String::new();
                    BufReader::new(&s)
                        .read_line(&mut line)
                        .map_err(|e| e.to_string())?;
                    return if line.trim() == "ok" {
                        Ok(())
                    } else {
                        Err(format!("answer {line:?}"))
                    };
                }
                Err(e) if Instant::now() > deadline => return Err(format!("connect {sa}: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}
