//! The fault-injection matrix (issue 16): jobs of 2, 3 and 4 ranks over shared memory and
//! over TCP, started by the real `tarantella`, in which rank [`VICTIM`] injects one fault
//! (SIGKILL, SIGTERM, SIGSTOP, `exit(0)` without `term`, or shutting down its sockets) at one
//! point (start-up, a barrier loop, an allreduce loop, a `write_notify` stream); the program is
//! `tests/src/bin/fault_rank.rs`.
//!
//! Each cell checks:
//!
//! - **status**: `tarantella` exits non-zero (and by itself, before the cell's hard deadline);
//! - **time**: it exits within 2 × [`TIMEOUT_S`] plus [`STARTUP_ALLOWANCE`] of being started;
//! - **blame**: its failure summary (`... failed: rank K on HOST ... (first failure)`) names
//!   the victim;
//! - **survivors**: no rank panicked or carried on as if the job were whole (a survivor
//!   ends with an error line or is stopped by the launcher);
//! - **processes**: once it has exited, no process with `TARANTELLA_JOB_ID=<job>` in its
//!   environment is alive (bounded polling of `/proc`; whatever is found is SIGKILLed, so a
//!   failing cell leaves nothing behind);
//! - **shm**: no `/dev/shm/tnt-<job>-*` file is left (removed after the check).
//!
//! The matrix is printed as a table (rows: ranks × transport × phase; columns: faults), on
//! stderr directly so that it shows also when the test passes, and the test fails listing
//! every failing cell with its reasons.
//!
//! All 120 cells run on every CI: most take well under a second, the SIGSTOP cells and the
//! start-up cells without a death (`stop`, `exit0`, `close`) wait out the timeout, so the
//! matrix takes about 45 s at 4 cells at a time on a 2-core machine (the cells mostly wait).
//! Knobs: `TNT_FAULT_MATRIX_JOBS`, the number of cells run at once (default 4);
//! `TNT_FAULT_MATRIX_FILTER`, a substring of the cell names (`3-tcp-barrier-kill`) to run.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The configured timeout, in seconds: `tarantella --init-timeout` (the ranks' init timeout,
/// `GASPI_INIT_TIMEOUT_MS`), which `fault_rank` also uses for every call.
const TIMEOUT_S: u64 = 4;
/// `tarantella --heartbeat-timeout`: a rank silent this long is failed by its peers.
const HEARTBEAT_S: &str = "1";

/// `tarantella --grace`: seconds between SIGTERM and SIGKILL at teardown (a stopped rank
/// only goes at the SIGKILL).
const GRACE_S: u64 = 1;
/// The fixed allowance on top of 2 × the timeout: starting `tarantella` and the ranks (exec,
/// runtime init up to the point of the fault: about 0.3 s idle, a few seconds on a loaded
/// 2-core CI machine with other jobs building) and the launcher's own fixed costs after the
/// ranks are gone (its 25 ms polling, the output drain, removing shared memory).
const STARTUP_ALLOWANCE: Duration = Duration::from_secs(4);
/// The rank that injects the fault (exists in every job size; not rank 0, which holds the
/// rendezvous).
const VICTIM: u16 = 1;
/// How long to wait for the job's processes to disappear after `tarantella` has exited.
const PROCESS_GRACE: Duration = Duration::from_secs(2);

const RANKS: [u16; 3] = [2, 3, 4];
const TRANSPORTS: [&str; 2] = ["shm", "tcp"];
const PHASES: [&str; 4] = ["startup", "barrier", "allreduce", "stream"];
const FAULTS: [&str; 5] = ["kill", "term", "stop", "exit0", "close"];

#[derive(Clone, Copy)]
struct Cell {
    n: u16,
    transport: &'static str,
    phase: &'static str,
    fault: &'static str,
}

impl Cell {
    fn name(&self) -> String {
        format!(
            "{}-{}-{}-{}",
            self.n, self.transport, self.phase, self.fault
        )
    }

    fn row(&self) -> String {
        format!("{} {} {}", self.n, self.transport, self.phase)
    }
}

/// What one cell found.
struct Verdict {
    /// Short reasons for the table, empty when the cell passed.
    short: Vec<String>,
    /// The same, each with its detail, for the failure list.
    long: Vec<String>,
    wall: Duration,
    /// The lines of tarantella's output worth showing for a failed cell.
    evidence: String,
}

impl Verdict {
    fn fail(&mut self, short: &str, long: String) {
        self.short.push(short.to_string());
        self.long.push(long);
    }
}

fn target_dir() -> PathBuf {
    // .../target/<profile>/deps/<this test> → .../target/<profile>
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The pids of live processes whose environment holds `TARANTELLA_JOB_ID=<job>`.
fn job_processes(job: &str) -> Vec<(i32, String)> {
    let needle = format!("TARANTELLA_JOB_ID={job}");
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue; // gone, or not ours
        };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // "pid (comm) S ...": a zombie (Z) is dead, only not yet reaped.
            let state = stat.rsplit(") ").next().and_then(|s| s.chars().next());
            if state != Some('Z') {
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                found.push((pid, format!("{pid} {} ({:?})", comm.trim(), state)));
            }
        }
    }
    found
}

fn shm_files(job: &str) -> Vec<PathBuf> {
    let prefix = format!("tnt-{job}-");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The rank `tarantella`'s summary names as the first failure.
fn blamed_rank(stderr: &str) -> Option<u16> {
    // `... failed: rank K on HOST exited with status S (first failure)`, or, when a rank other
    // than the first to exit is at fault, `... failed: rank K on HOST stopped making progress
    // (...); first to notice: ...` / `... was killed (by SIGKILL); first to notice: ...`.
    let line = stderr
        .lines()
        .find(|l| l.starts_with("tarantella: job ") && l.contains(" failed: rank "))?;
    let rest = &line[line.find(" failed: rank ")? + " failed: rank ".len()..];
    rest.split(' ').next()?.parse().ok()
}

fn run_cell(cell: Cell, tarantella: &Path, program: &Path, base: &Path) -> Verdict {
    let job = format!("fm{}-{}", std::process::id(), cell.name());
    let run_dir = base.join(cell.name());
    std::fs::create_dir_all(&run_dir).unwrap();
    let limit = Duration::from_secs(2 * TIMEOUT_S) + STARTUP_ALLOWANCE;
    // A hung job is stopped here, well after the limit (then also checked for leftovers).
    let hard = limit + Duration::from_secs(15);
    let start = Instant::now();
    let mut child = Command::new(tarantella)
        .args(["-n", &cell.n.to_string(), "--transport", cell.transport])
        .args(["--init-timeout", &TIMEOUT_S.to_string()])
        .args(["--grace", &GRACE_S.to_string()])
        // A rank that stops (SIGSTOP) or goes silent (its sockets closed) is found by the
        // heartbeat, well within the timeout.
        .args(["--heartbeat-timeout", HEARTBEAT_S])
        .args(["--job-id", &job, "--output-on-all-devices", "--"])
        .arg(program)
        .args([cell.phase, cell.fault, &VICTIM.to_string()])
        .env("TARANTELLA_RUN_DIR", &run_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tarantella");
    let reader = |mut s: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = s.read_to_string(&mut text);
            text
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let mut hung = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > hard && !hung {
            hung = true;
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        }
        if start.elapsed() > hard + Duration::from_secs(5) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = start.elapsed();
    let mut v = Verdict {
        short: Vec::new(),
        long: Vec::new(),
        wall,
        evidence: String::new(),
    };

    // Leftovers first, while the clock still says "right after tarantella exited".
    let gone_by = Instant::now() + PROCESS_GRACE;
    let mut left = job_processes(&job);
    while !left.is_empty() && Instant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(10));
        left = job_processes(&job);
    }
    if !left.is_empty() {
        let names: Vec<_> = left.iter().map(|(_, d)| d.clone()).collect();
        v.fail(
            "proc",
            format!(
                "{} process(es) of the job alive {PROCESS_GRACE:?} after tarantella exited: {}",
                left.len(),
                names.join(", ")
            ),
        );
    }
    let files = shm_files(&job);
    if !files.is_empty() {
        let names: Vec<_> = files.iter().map(|f| f.display().to_string()).collect();
        v.fail(
            "shm",
            format!("shared-memory files left: {}", names.join(" ")),
        );
    }
    // Nothing of a failed cell survives it.
    for _ in 0..100 {
        let left = job_processes(&job);
        if left.is_empty() {
            break;
        }
        for (pid, _) in left {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for f in shm_files(&job) {
        let _ = std::fs::remove_file(f);
    }

    // Bounded: a rank's output can only outlive tarantella in a leftover process, now killed.
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();

    if hung {
        v.fail(
            "hung",
            format!("tarantella still ran after {hard:?} and was stopped by the test"),
        );
    } else if status.success() {
        v.fail("status", "tarantella exited 0".into());
    }
    if wall > limit {
        v.fail(
            "time",
            format!(
                "tarantella took {:.1} s, over 2 × {TIMEOUT_S} s + {} s",
                wall.as_secs_f64(),
                STARTUP_ALLOWANCE.as_secs()
            ),
        );
    }
    match blamed_rank(&stderr) {
        Some(r) if r == VICTIM => {}
        Some(r) => v.fail(
            &format!("blame {r}"),
            format!("tarantella blamed rank {r}, not the victim rank {VICTIM}"),
        ),
        None => v.fail("blame -", "tarantella named no failed rank".into()),
    }
    let all = format!("{stdout}\n{stderr}");
    for r in (0..cell.n).filter(|r| *r != VICTIM) {
        let tag = format!("[rank {r}] ");
        let mine = all.lines().filter(|l| l.starts_with(&tag));
        if mine
            .clone()
            .any(|l| l.contains("panicked") || l.contains("started without"))
        {
            v.fail(
                "survivor",
                format!("rank {r} panicked or carried on without the victim"),
            );
        }
    }
    if !v.short.is_empty() {
        let status = match (status.code(), status.signal()) {
            (Some(c), _) => format!("status {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "?".into(),
        };
        let ours = all
            .lines()
            .filter(|l| {
                l.starts_with("tarantella: job ")
                    || (l.starts_with("[rank ") && l.contains(": "))
                    || l.contains("warning")
            })
            .map(|l| format!("      | {l}"))
            .collect::<Vec<_>>();
        v.evidence = format!("      | tarantella: {status}\n{}", ours.join("\n"));
    }
    v
}

fn print_table(cells: &[Cell], verdicts: &[Option<Verdict>]) -> String {
    let mut rows: Vec<String> = Vec::new();
    for c in cells {
        if !rows.contains(&c.row()) {
            rows.push(c.row());
        }
    }
    let text = |i: usize| -> String {
        match &verdicts[i] {
            None => "-".into(),
            Some(v) if v.short.is_empty() => format!("ok {:.1}s", v.wall.as_secs_f64()),
            Some(v) => format!("{} {:.1}s", v.short.join(","), v.wall.as_secs_f64()),
        }
    };
    let mut grid = vec![vec![String::new(); FAULTS.len()]; rows.len()];
    for (i, c) in cells.iter().enumerate() {
        let r = rows.iter().position(|r| *r == c.row()).unwrap();
        let f = FAULTS.iter().position(|f| *f == c.fault).unwrap();
        grid[r][f] = text(i);
    }
    let w0 = rows.iter().map(|r| r.len()).max().unwrap_or(0).max(20);
    let widths: Vec<usize> = (0..FAULTS.len())
        .map(|f| {
            grid.iter()
                .map(|row| row[f].len())
                .max()
                .unwrap_or(0)
                .max(FAULTS[f].len())
        })
        .collect();
    let mut s = format!("| {:w0$} |", "ranks transport phase");
    for (f, w) in FAULTS.iter().zip(&widths) {
        s += &format!(" {f:w$} |");
    }
    s += &format!("\n|{}|", "-".repeat(w0 + 2));
    for w in &widths {
        s += &format!("{}|", "-".repeat(w + 2));
    }
    for (row, cells) in rows.iter().zip(&grid) {
        s += &format!("\n| {row:w0$} |");
        for (c, w) in cells.iter().zip(&widths) {
            s += &format!(" {c:w$} |");
        }
    }
    s
}

/// The `tarantella` binary of this build, built first if it is missing or stale (this crate
/// does not depend on the launcher's, so cargo does not build it for this test alone).
fn tarantella() -> PathBuf {
    let target = target_dir();
    gaspi::testing::cargo_build(
        env!("CARGO"),
        &target,
        &["-p", "tarantella-launcher", "--bin", "tarantella"],
    );
    target.join("tarantella")
}

#[test]
fn fault_matrix() {
    let tarantella = tarantella();
    let program = PathBuf::from(env!("CARGO_BIN_EXE_fault_rank"));
    let filter = std::env::var("TNT_FAULT_MATRIX_FILTER").unwrap_or_default();
    let jobs: usize = std::env::var("TNT_FAULT_MATRIX_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(4)
        .max(1);
    let mut cells = Vec::new();
    for n in RANKS {
        for transport in TRANSPORTS {
            for phase in PHASES {
                for fault in FAULTS {
                    cells.push(Cell {
                        n,
                        transport,
                        phase,
                        fault,
                    });
                }
            }
        }
    }
    let chosen: Vec<bool> = cells.iter().map(|c| c.name().contains(&filter)).collect();
    let base = std::env::temp_dir().join(format!("tnt-fault-matrix-{}", std::process::id()));
    let verdicts: Mutex<Vec<Option<Verdict>>> =
        Mutex::new((0..cells.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= cells.len() {
                    break;
                }
                if !chosen[i] {
                    continue;
                }
                let v = run_cell(cells[i], &tarantella, &program, &base);
                verdicts.lock().unwrap()[i] = Some(v);
            });
        }
    });
    let took = started.elapsed();
    let verdicts = verdicts.into_inner().unwrap();
    let ran = verdicts.iter().filter(|v| v.is_some()).count();
    let mut report = format!(
        "fault matrix: {ran} cell(s) in {:.1} s, {jobs} at a time; victim rank {VICTIM}, \
         timeout {TIMEOUT_S} s, grace {GRACE_S} s, limit 2 × {TIMEOUT_S} s + {} s \
         (cells: ok or the failed checks, and tarantella's wall time)\n",
        took.as_secs_f64(),
        STARTUP_ALLOWANCE.as_secs()
    );
    report += &print_table(&cells, &verdicts);
    report.push('\n');
    let mut failing = Vec::new();
    for (c, v) in cells.iter().zip(&verdicts) {
        if let Some(v) = v.as_ref().filter(|v| !v.short.is_empty()) {
            failing.push(format!(
                "{}: {}\n{}",
                c.name(),
                v.long.join("; "),
                v.evidence
            ));
        }
    }
    if !failing.is_empty() {
        report += &format!(
            "{} failing cell(s) (run directories under {}):\n{}\n",
            failing.len(),
            base.display(),
            failing.join("\n")
        );
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
    // Straight to the file descriptor, past the test harness's capture: the table shows on
    // every run.
    let _ = std::io::stderr().write_all(report.as_bytes());
    assert!(
        failing.is_empty(),
        "{} of {ran} fault-matrix cell(s) failed: {}",
        failing.len(),
        cells
            .iter()
            .zip(&verdicts)
            .filter(|(_, v)| v.as_ref().is_some_and(|v| !v.short.is_empty()))
            .map(|(c, _)| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn the_blamed_rank_is_read_from_the_summary() {
    let stderr = "tarantella: rank 3 on vm exited with status 3; stopping the other ranks\n\
                  tarantella: job fm1-x failed: rank 12 on vm was killed by signal 9 (SIGKILL) \
                  (first failure)\n\
                  tarantella: the output of rank 12 on vm is on the terminal, see above\n";
    assert_eq!(blamed_rank(stderr), Some(12));
    assert_eq!(blamed_rank("tarantella: job x failed to start\n"), None);
}
