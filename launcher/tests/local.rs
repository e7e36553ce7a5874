//! `tarantella` on this host: ranks, environment, dry run, failures, Ctrl-C and cleanup.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn local_one_to_five_ranks() {
    for n in 1..=5usize {
        let ns = n.to_string();
        let mut job = Job::start(&[
            "-n",
            &ns,
            "--output-on-all-devices",
            "--",
            PROBE,
            "--rendezvous",
        ]);
        let st = job.wait(LIMIT);
        assert!(st.success(), "n={n}: {st:?} {}", job.stderr_text());
        let lines: Vec<&String> = job
            .out
            .iter()
            .filter(|l| l.contains("probe rank="))
            .collect();
        assert_eq!(lines.len(), n, "{:?}", job.out);
        let ranks: BTreeSet<String> = lines.iter().map(|l| field(l, "rank").unwrap()).collect();
        assert_eq!(ranks, (0..n).map(|r| r.to_string()).collect());
        let jobs: BTreeSet<String> = lines.iter().map(|l| field(l, "job").unwrap()).collect();
        assert_eq!(jobs.len(), 1, "one job id for all ranks");
        for l in &lines {
            assert_eq!(field(l, "nranks").unwrap(), ns);
            assert_eq!(field(l, "local_nranks").unwrap(), ns);
            assert_eq!(field(l, "token_len").unwrap(), "32");
            let r = field(l, "rank").unwrap();
            assert!(l.starts_with(&format!("[rank {r}] ")), "prefixed: {l}");
        }
        if n > 1 {
            job.assert_rendezvous_ok(n);
        }
    }
}

#[test]
fn only_rank_zero_is_shown_by_default_others_go_to_logs() {
    let id = job_id("logs");
    let mut job = Job::start(&["-n", "3", "--job-id", &id, "--", PROBE]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let shown: Vec<&String> = job
        .out
        .iter()
        .filter(|l| l.starts_with("probe rank="))
        .collect();
    assert_eq!(shown.len(), 1, "{:?}", job.out);
    assert_eq!(field(shown[0], "rank").unwrap(), "0");
    for r in 1..3 {
        let log =
            std::fs::read_to_string(job.run_dir.path().join(&id).join(format!("rank-{r}.log")))
                .unwrap();
        assert!(log.contains(&format!("probe rank={r} ")), "{log}");
    }
}

#[test]
fn exports_reach_every_rank_in_order() {
    let mut job = Job::start(&[
        "-n",
        "3",
        "--output-on-all-devices",
        "-x",
        "TNT_A=first",
        "-x",
        "TNT_B=with space",
        "-x",
        "TNT_A=second",
        "--fusion-threshold",
        "64",
        "--transport",
        "tcp",
        "--init-timeout",
        "7",
        "--",
        PROBE,
        "--env",
        "TNT_A",
        "--env",
        "TNT_B",
        "--env",
        "TNT_FUSION_THRESHOLD_KB",
        "--env",
        "GASPI_INIT_TIMEOUT_MS",
        "--env",
        "GASPI_TRANSPORT",
    ]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    for (var, val) in [
        ("TNT_A", "second"),
        ("TNT_B", "with space"),
        ("TNT_FUSION_THRESHOLD_KB", "64"),
        ("GASPI_INIT_TIMEOUT_MS", "7000"),
        ("GASPI_TRANSPORT", "tcp"),
    ] {
        let want = format!("env {var}={val}");
        let n = job.out.iter().filter(|l| l.ends_with(&want)).count();
        assert_eq!(n, 3, "{want:?} on every rank: {:?}", job.out);
    }
}

/// Runs PROBE as the ranks of `tarantella ARGS`, with `CUDA_VISIBLE_DEVICES` set to
/// `inherited` in tarantella's environment (removed for `None`); returns the value each rank
/// saw (`<unset>` when it had none).
fn cuda_visible_devices_on_ranks(inherited: Option<&str>, args: &[&str]) -> Vec<String> {
    let run = TempDir::new("gpu");
    let mut cmd = tarantella(run.path());
    match inherited {
        Some(v) => cmd.env("CUDA_VISIBLE_DEVICES", v),
        None => cmd.env_remove("CUDA_VISIBLE_DEVICES"),
    };
    cmd.args(args).args([
        "--output-on-all-devices",
        "--",
        PROBE,
        "--env",
        "CUDA_VISIBLE_DEVICES",
    ]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{args:?}: {}", job.stderr_text());
    job.out
        .iter()
        .filter_map(|l| l.split_once("env CUDA_VISIBLE_DEVICES="))
        .map(|(_, v)| v.to_string())
        .collect()
}

#[test]
fn ranks_keep_the_inherited_cuda_visible_devices_and_no_gpu_hides_all() {
    assert_eq!(
        cuda_visible_devices_on_ranks(Some("3,5"), &["-n", "3"]),
        ["3,5"; 3]
    );
    assert_eq!(
        cuda_visible_devices_on_ranks(Some("3,5"), &["-n", "3", "--no-gpu"]),
        [""; 3]
    );
    assert_eq!(
        cuda_visible_devices_on_ranks(None, &["-n", "2"]),
        ["<unset>"; 2]
    );
    assert_eq!(
        cuda_visible_devices_on_ranks(None, &["-n", "2", "-x", "CUDA_VISIBLE_DEVICES=3,5"]),
        ["3,5"; 2]
    );
}

/// Whether this host has an NVIDIA GPU, looked for as tarantella does.
fn host_has_nvidia_gpu() -> bool {
    let numbered_device = |e: std::fs::DirEntry| {
        e.file_name()
            .to_string_lossy()
            .strip_prefix("nvidia")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    Path::new("/proc/driver/nvidia/gpus").exists()
        || std::fs::read_dir("/dev").is_ok_and(|rd| rd.flatten().any(numbered_device))
}

#[test]
fn devices_per_node_without_a_gpu_warns_once_and_runs_on_cpu() {
    let warnings_of = |args: &[&str]| {
        let mut job = Job::start(args);
        assert!(job.wait(LIMIT).success(), "{args:?}: {}", job.stderr_text());
        let probes = job.out.iter().filter(|l| l.contains("probe rank=")).count();
        assert_eq!(probes, 2, "{args:?}: {:?}", job.out);
        job.err
            .iter()
            .filter(|l| l.contains("warning"))
            .cloned()
            .collect::<Vec<_>>()
    };
    let asked = warnings_of(&[
        "--devices-per-node",
        "2",
        "--output-on-all-devices",
        "--",
        PROBE,
    ]);
    if host_has_nvidia_gpu() {
        println!("this host has a GPU: checking that there is no warning");
        assert_eq!(asked, Vec::<String>::new());
    } else {
        assert_eq!(
            asked,
            ["tarantella: warning: no GPU found on this host; the 2 ranks run on CPU"]
        );
    }
    for quiet in [
        &["--n-per-node", "2"][..],
        &["--devices-per-node", "2", "--no-gpu"],
    ] {
        let args: Vec<&str> = quiet
            .iter()
            .copied()
            .chain(["--output-on-all-devices", "--", PROBE])
            .collect();
        assert_eq!(warnings_of(&args), Vec::<String>::new(), "{quiet:?}");
    }
}

#[test]
fn one_rank_by_default() {
    let mut job = Job::start(&["--output-on-all-devices", "--", PROBE]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let probes: Vec<&String> = job
        .out
        .iter()
        .filter(|l| l.contains("probe rank="))
        .collect();
    assert_eq!(probes.len(), 1, "{:?}", job.out);
    assert_eq!(field(probes[0], "nranks").unwrap(), "1");
}

#[test]
fn dry_run_prints_every_rank_and_starts_nothing() {
    let run = TempDir::new("dry");
    let out = tarantella(run.path())
        .args([
            "--dry-run",
            "-n",
            "2",
            "-x",
            "FOO=bar baz",
            "--job-id",
            "dryjob",
            "--timeout",
            "3600",
            "--",
            PROBE,
            "--touch-shm",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# time limit: 3600 s (--timeout)"), "{text}");
    assert!(text.contains("# rank 0 on localhost"), "{text}");
    assert!(text.contains("# rank 1 on localhost"), "{text}");
    assert!(text.contains("GASPI_RANK=1"), "{text}");
    assert!(text.contains("GASPI_NRANKS=2"), "{text}");
    assert!(text.contains("GASPI_JOB_ID=dryjob"), "{text}");
    assert!(text.contains("'FOO=bar baz'"), "{text}");
    assert!(text.contains(&format!("{PROBE} --touch-shm")), "{text}");
    assert!(shm_files("dryjob").is_empty(), "dry run started a rank");
    assert!(
        !run.path().join("dryjob").exists(),
        "dry run made a run directory"
    );

    let hidden = tarantella(run.path())
        .args(["--dry-run", "-n", "2", "--no-gpu", "--", PROBE])
        .output()
        .unwrap();
    assert!(hidden.status.success());
    let text = String::from_utf8_lossy(&hidden.stdout);
    assert!(text.contains("# GPUs: hidden by --no-gpu"), "{text}");
    assert_eq!(
        text.matches(" 'CUDA_VISIBLE_DEVICES=' ").count(),
        2,
        "{text}"
    );
}

#[test]
fn failing_rank_stops_the_job_and_leaves_no_orphans() {
    let id = job_id("fail");
    let mut job = Job::start(&[
        "-n",
        "4",
        "--output-on-all-devices",
        "--job-id",
        &id,
        "--",
        PROBE,
        "--touch-shm",
        "--child",
        "--rendezvous",
        "--fail-rank",
        "2:3",
        "--sleep",
    ]);
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(3), "{}", job.stderr_text());
    let err = job.stderr_text();
    assert!(
        err.contains("rank 2 on ") && err.contains("exited with status 3"),
        "{err}"
    );
    let pids = pids_of(&job);
    assert!(pids.len() >= 4, "{:?}", job.out);
    assert_torn_down(&pids, &id, Duration::from_secs(1));
}

#[test]
fn rank_killed_by_a_signal_is_named() {
    let mut job = Job::start(&["-n", "2", "--", PROBE, "--kill-rank", "1:9", "--sleep"]);
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(128 + 9));
    let err = job.stderr_text();
    assert!(
        err.contains("rank 1 on ") && err.contains("signal 9 (SIGKILL)"),
        "{err}"
    );
}

/// `n` probe ranks of job `id` (tarantella's `options` first) that touch shared memory,
/// start a child and sleep until stopped.
fn sleeping_ranks(n: &str, id: &str, options: &[&str]) -> Job {
    let mut args = vec!["-n", n, "--output-on-all-devices", "--job-id", id];
    args.extend(options);
    args.extend(["--", PROBE, "--touch-shm", "--child", "--sleep"]);
    Job::start(&args)
}

#[test]
fn ctrl_c_stops_every_rank_and_removes_shared_memory() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let id = job_id(&format!("int{}", sig as i32));
        let mut job = sleeping_ranks("3", &id, &[]);
        let ready = job.wait_lines("probe ready", 3, LIMIT);
        assert_eq!(ready.len(), 3);
        assert_eq!(shm_files(&id).len(), 3);
        let pids = pids_of(&job);
        assert_eq!(pids.len(), 6);
        let t = Instant::now();
        signal(job.child.id(), sig);
        let st = job.wait(LIMIT);
        assert_eq!(st.code(), Some(128 + sig as i32), "{}", job.stderr_text());
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_torn_down(&pids, &id, Duration::from_secs(1));
        assert!(!job.run_dir.path().join(&id).join("pids").exists());
    }
}

/// `--timeout` is the job's wall-clock limit, as mpirun's: when it is up, every rank is
/// stopped as on SIGTERM, and tarantella says so and exits with 124 (`timeout(1)`'s status).
#[test]
fn the_time_limit_stops_every_rank_and_exits_with_124() {
    let id = job_id("limit");
    let started = Instant::now();
    let mut job = sleeping_ranks("2", &id, &["--timeout", "1", "--grace", "0.5"]);
    let st = job.wait(Duration::from_secs(20));
    let took = started.elapsed();
    let err = job.stderr_text();
    assert_eq!(st.code(), Some(124), "{err}");
    assert!(
        err.contains(&format!(
            "tarantella: job {id} exceeded its time limit of 1 s (--timeout); stopping all ranks"
        )),
        "{err}"
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(10),
        "took {took:?}"
    );
    let pids = pids_of(&job);
    assert_eq!(pids.len(), 4, "{:?}", job.out);
    assert_torn_down(&pids, &id, Duration::from_secs(1));
}

#[test]
fn cleanup_stops_leftovers_of_a_killed_tarantella() {
    let id = job_id("cleanup");
    let mut job = sleeping_ranks("2", &id, &[]);
    job.wait_lines("probe ready", 2, LIMIT);
    let children: Vec<i32> = job
        .out
        .iter()
        .filter_map(|l| field(l, "child"))
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(children.len(), 2);
    signal(job.child.id(), Signal::SIGKILL);
    job.wait(LIMIT);
    // The grandchildren survive a SIGKILLed tarantella, and so do the shm files.
    assert!(children.iter().all(|&c| alive(c)));
    assert_eq!(shm_files(&id).len(), 2);

    let out = tarantella(job.run_dir.path())
        .args(["--cleanup", "--job-id", &id, "--grace", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        wait_dead(&children, Duration::from_secs(5)),
        Vec::<i32>::new()
    );
    assert!(shm_files(&id).is_empty());
    // A second cleanup finds nothing left to do; an unknown job is an error.
    let again = tarantella(job.run_dir.path())
        .args(["--cleanup", "--job-id", &id])
        .output()
        .unwrap();
    assert!(again.status.success());
    let unknown = tarantella(job.run_dir.path())
        .args(["--cleanup", "--job-id", "nosuchjob"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
}

/// Waits until process `pid` (not a child of this one) has ended, at most `limit`; whether
/// it did. A pidfd becomes readable when the process ends: no polling of `/proc`.
fn ended_within(pid: i32, limit: Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if fd < 0 {
        return !alive(pid); // ESRCH: already gone and reaped
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(limit.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid pollfd; `fd` is ours and closed once.
    let ready = unsafe { libc::poll(&mut p, 1, ms) } == 1;
    // SAFETY: as above.
    unsafe { libc::close(fd) };
    ready
}

/// When `tarantella` is SIGKILLed, its gaspi ranks get SIGTERM (parent-death signal) and
/// unlink their shared-memory segments before they die: nothing of the job is left in
/// `/dev/shm`, with no `--cleanup`.
#[test]
fn ranks_of_a_killed_tarantella_leave_no_shared_memory() {
    let id = job_id("pdeath");
    let mut job = Job::start(&[
        "-n",
        "2",
        "--output-on-all-devices",
        "--job-id",
        &id,
        "--",
        PROBE,
        "--gaspi",
        "--sleep",
    ]);
    let ready = job.wait_lines("probe ready", 2, LIMIT);
    assert_eq!(ready.len(), 2, "{:?} {}", job.out, job.stderr_text());
    let pids = pids_of(&job);
    assert_eq!(pids.len(), 2, "{:?}", job.out);
    assert!(
        shm_files(&id).len() >= 4,
        "two segments per rank: {:?}",
        shm_files(&id)
    );
    signal(job.child.id(), Signal::SIGKILL);
    job.wait(LIMIT);
    for &pid in &pids {
        assert!(
            ended_within(pid, Duration::from_secs(10)),
            "rank {pid} lives"
        );
    }
    assert!(shm_files(&id).is_empty(), "{:?}", shm_files(&id));
}

#[test]
fn cleanup_refuses_a_running_job_without_force() {
    let id = job_id("force");
    let mut job = Job::start(&["-n", "1", "--job-id", &id, "--", PROBE, "--sleep"]);
    job.wait_lines("probe ready", 1, LIMIT);
    let pid: i32 = field(&job.out[0], "pid").unwrap().parse().unwrap();
    let out = tarantella(job.run_dir.path())
        .args(["--cleanup", "--job-id", &id])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert!(alive(pid));
    let out = tarantella(job.run_dir.path())
        .args(["--cleanup", "--force", "--job-id", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(wait_dead(&[pid], Duration::from_secs(5)), Vec::<i32>::new());
    assert!(!job.wait(LIMIT).success());
}

fn fails_with(args: &[&str], needle: &str) {
    let run = TempDir::new("err");
    let out = tarantella(run.path()).args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn clear_errors() {
    let dir = TempDir::new("hf");
    let dup = dir.path().join("dup");
    std::fs::write(&dup, "a\nb\na slots=x\n").unwrap();
    let two = dir.path().join("two");
    std::fs::write(&two, "h1 slots=1 # one\nh2 slots=1\n").unwrap();
    let bad = dir.path().join("bad");
    std::fs::write(&bad, "h1 slots=zero\n").unwrap();
    let (dup, two, bad) = (
        dup.to_str().unwrap(),
        two.to_str().unwrap(),
        bad.to_str().unwrap(),
    );
    fails_with(&["--", "/no/such/program"], "not found");
    fails_with(&["--", "no-such-program-tnt"], "not found");
    fails_with(&[], "no program given");
    // Past an hour, refused (it used to panic converting it, or adding it to the clock).
    fails_with(&["--grace", "1e20", "-n", "1", "--", "true"], "--grace");
    fails_with(&["--grace", "1e19", "-n", "1", "--", "true"], "--grace");
    fails_with(
        &["--hostfile", "/no/such/hostfile", "--", "true"],
        "cannot read hostfile",
    );
    fails_with(&["--hostfile", dup, "--", "true"], "line 3");
    fails_with(&["--hostfile", bad, "--", "true"], "line 1");
    fails_with(
        &["--hostfile", two, "-n", "3", "--", "true"],
        "-n 3 is larger than the 2 slots",
    );
    fails_with(
        &["-n", "3", "--n-per-node", "2", "--", "true"],
        "larger than",
    );
    fails_with(
        &["-n", "3", "--devices-per-node", "2", "--", "true"],
        "--devices-per-node 2 on this host",
    );
    fails_with(
        &["--n-per-node", "1", "--devices-per-node", "1", "--", "true"],
        "cannot be used with",
    );
    fails_with(
        &["-x", "TNT_NOT_SET_ANYWHERE", "--", "true"],
        "TNT_NOT_SET_ANYWHERE is not set",
    );
    fails_with(&["-x", "1X=2", "--", "true"], "bad -x");
    fails_with(&["--frobnicate", "--", "true"], "unexpected argument");
    fails_with(&["--log-level", "loud", "--", "true"], "invalid value");
    // A time limit that is no time, or too long to count (no panic adding it to the clock).
    for limit in ["0", "-1", "nan", "1e30"] {
        fails_with(
            &[&format!("--timeout={limit}"), "--", "true"],
            "must be a positive number of seconds",
        );
    }
    fails_with(&["--init-timeout", "0", "--", "true"], "--init-timeout");
}

#[test]
fn version_and_help() {
    let run = TempDir::new("v");
    let v = tarantella(run.path()).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("tarantella "));
    let h = tarantella(run.path()).arg("--help").output().unwrap();
    let h = String::from_utf8_lossy(&h.stdout);
    for opt in [
        "--hostfile",
        "--n-per-node",
        "--devices-per-node",
        "--dry-run",
        "--cleanup",
        "--python-interpreter",
    ] {
        assert!(h.contains(opt), "{opt} missing from --help");
    }
}

#[test]
fn interpreter_runs_the_program() {
    let mut job = Job::start(&[
        "-n",
        "2",
        "--output-on-all-devices",
        "--interpreter",
        "env TNT_VIA=interp",
        "--",
        PROBE,
        "--env",
        "TNT_VIA",
    ]);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("env TNT_VIA=interp"))
            .count(),
        2
    );
}

#[test]
fn pinning_uses_numactl_or_says_it_is_missing() {
    let numactl = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("numactl").is_file()));
    let mut job = Job::start(&["-n", "1", "--pin-memory-to-socket", "--", PROBE]);
    let st = job.wait(LIMIT);
    if numactl {
        assert!(st.success(), "{}", job.stderr_text());
    } else {
        println!("numactl not installed: checking the error message only");
        assert!(job.stderr_text().contains("numactl"));
    }
}

/// Ctrl-C after the reader of tarantella's stderr went away (`2>&1 | tee log`, and the
/// terminal's SIGINT killed `tee` too): its message is lost, but the ranks are still torn
/// down and the status is 130 (it used to panic writing the message).
#[test]
fn ctrl_c_with_stderr_gone_still_tears_down() {
    let id = job_id("epipe");
    let run = TempDir::new("epipe");
    let mut child = tarantella(run.path())
        .args(["-n", "2", "--output-on-all-devices", "--grace", "1"])
        .args(["--job-id", &id, "--", PROBE, "--touch-shm", "--sleep"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let (mut pids, mut ready) = (Vec::new(), 0);
    let mut line = String::new();
    while ready < 2 {
        line.clear();
        assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0);
        if let Some(pid) = field(&line, "pid") {
            pids.push(pid.parse::<i32>().unwrap());
        }
        ready += usize::from(line.contains("probe ready"));
    }
    assert_eq!(pids.len(), 2);
    signal(child.id(), Signal::SIGINT);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_torn_down(&pids, &id, Duration::from_secs(5));
}

/// A signal that tarantella was started ignoring stays ignored, as for any program:
/// `nohup tarantella ...` goes on after SIGHUP. The rank runs for two seconds after it
/// says it is up; SIGHUP comes at once, and the job still ends by itself, with status 0
/// (129 before: it stopped the ranks).
#[test]
fn an_ignored_sighup_stays_ignored() {
    use std::os::unix::process::CommandExt;
    let run = TempDir::new("nohup");
    let mut cmd = tarantella(run.path());
    cmd.args(["-n", "1", "--", "sh", "-c", "echo up; exec sleep 2"]);
    // SAFETY: between fork and exec only async-signal-safe calls: signal(2).
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut job = Job::spawn(cmd, run);
    job.wait_lines("up", 1, LIMIT);
    signal(job.child.id(), Signal::SIGHUP);
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(0), "{}", job.stderr_text());
}
