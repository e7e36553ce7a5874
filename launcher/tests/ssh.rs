//! `tarantella --hostfile` through a private `sshd` on 127.0.0.1, and across two network
//! namespaces joined by a veth pair. Skipped (with the reason printed) when `sshd` or the
//! permissions are missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;

const LIMIT: Duration = Duration::from_secs(90);
const SSHD: &str = "/usr/sbin/sshd";

/// An sshd (run with -D, so it is our child) with a throw-away host key and user key.
struct Sshd {
    child: Child,
    /// `TARANTELLA_SSH` value that reaches it.
    ssh: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn keygen(path: &Path) -> Result<(), String> {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    st.success()
        .then_some(())
        .ok_or_else(|| format!("ssh-keygen failed: {st}"))
}

fn start_sshd(dir: &Path, addr: &str, port: u16, netns: Option<&str>) -> Result<Sshd, String> {
    if !Path::new(SSHD).exists() {
        return Err(format!(
            "{SSHD} is not installed (apt-get install openssh-server)"
        ));
    }
    let (host, user) = (dir.join("hostkey"), dir.join("userkey"));
    if !host.exists() {
        keygen(&host)?;
    }
    if !user.exists() {
        keygen(&user)?;
        std::fs::copy(dir.join("userkey.pub"), dir.join("authorized_keys"))
            .map_err(|e| e.to_string())?;
    }
    if nix::unistd::geteuid().is_root() {
        let _ = std::fs::create_dir_all("/run/sshd");
    }
    let tag = format!("{addr}-{port}");
    let cfg = dir.join(format!("sshd_config-{tag}"));
    let log = dir.join(format!("sshd-{tag}.log"));
    std::fs::write(
        &cfg,
        format!(
            "Port {port}\nListenAddress {addr}\nHostKey {}\nPidFile none\nAuthorizedKeysFile {}\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\n",
            host.display(),
            dir.join("authorized_keys").display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, SSHD]);
            c
        }
        None => Command::new(SSHD),
    };
    cmd.arg("-D")
        .arg("-f")
        .arg(&cfg)
        .arg("-E")
        .arg(&log)
        .stdin(Stdio::null());
    let mut child = cmd.spawn().map_err(|e| format!("cannot start sshd: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("Server listening on") {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("sshd exited ({st}): {text}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("sshd did not start listening: {text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ssh = format!(
        "ssh -F /dev/null -p {port} -i {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
        user.display()
    );
    Ok(Sshd { child, ssh })
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn loopback_sshd(dir: &TempDir) -> Option<Sshd> {
    match start_sshd(dir.path(), "127.0.0.1", free_port(), None) {
        Ok(s) => Some(s),
        Err(why) => {
            println!("SKIPPED: {why}");
            None
        }
    }
}

fn ssh_job(sshd: &Sshd, hostfile: &Path, args: &[&str]) -> Job {
    let run = TempDir::new("sshrun");
    let mut cmd = tarantella(run.path());
    cmd.env("TARANTELLA_SSH", &sshd.ssh)
        .arg("--hostfile")
        .arg(hostfile)
        .args(args);
    Job::spawn(cmd, run)
}

fn hostfile(dir: &TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("hosts");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn ssh_ranks_on_loopback_get_the_environment() {
    let dir = TempDir::new("ssh1");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "# private sshd\n127.0.0.1 slots=3\n");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "-x",
            "TNT_X=a b",
            "-x",
            "CUDA_VISIBLE_DEVICES=3,5",
            "--",
            PROBE,
            "--rendezvous",
            "--env",
            "TNT_X",
            "--env",
            "CUDA_VISIBLE_DEVICES",
        ],
    );
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.contains("rendezvous ok"))
            .count(),
        3,
        "{:?}",
        job.out
    );
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("env TNT_X=a b"))
            .count(),
        3
    );
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.ends_with("env CUDA_VISIBLE_DEVICES=3,5"))
            .count(),
        3,
        "-x CUDA_VISIBLE_DEVICES reaches every remote rank unchanged: {:?}",
        job.out
    );
    for r in 0..3 {
        assert!(job
            .out
            .iter()
            .any(|l| l.starts_with(&format!("[rank {r}] probe rank={r} "))));
    }
}

#[test]
fn ssh_failure_and_ctrl_c_tear_everything_down() {
    let dir = TempDir::new("ssh2");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");

    let id = job_id("sshfail");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--rendezvous",
            "--fail-rank",
            "1:3",
            "--sleep",
        ],
    );
    let st = job.wait(LIMIT);
    assert_eq!(st.code(), Some(3), "{}", job.stderr_text());
    let err = job.stderr_text();
    assert!(
        err.contains("rank 1 on 127.0.0.1 exited with status 3"),
        "{err}"
    );
    let pids = pids_of(&job);
    assert_eq!(pids.len(), 4, "{:?}", job.out);
    assert_torn_down(&pids, &id, Duration::from_secs(5));

    let id = job_id("sshint");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--sleep",
        ],
    );
    job.wait_lines("probe ready", 2, LIMIT);
    signal(job.child.id(), Signal::SIGINT);
    assert_eq!(job.wait(LIMIT).code(), Some(130), "{}", job.stderr_text());
    assert_eq!(
        wait_dead(&pids_of(&job), Duration::from_secs(5)),
        Vec::<i32>::new(),
        "left behind"
    );
    assert!(shm_files(&id).is_empty());
}

#[test]
fn ssh_ranks_stop_when_tarantella_dies_and_cleanup_removes_shm() {
    let dir = TempDir::new("ssh3");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let id = job_id("sshkill");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--job-id",
            &id,
            "--",
            PROBE,
            "--touch-shm",
            "--child",
            "--sleep",
        ],
    );
    job.wait_lines("probe ready", 2, LIMIT);
    let pids = pids_of(&job);
    signal(job.child.id(), Signal::SIGKILL);
    job.wait(LIMIT);
    // The ssh connections close, and the remote wrappers stop their ranks.
    assert_eq!(
        wait_dead(&pids, Duration::from_secs(15)),
        Vec::<i32>::new(),
        "left behind"
    );
    assert_eq!(shm_files(&id).len(), 2);
    let out = tarantella(job.run_dir.path())
        .env("TARANTELLA_SSH", &sshd.ssh)
        .args(["--cleanup", "--job-id", &id, "--grace", "0.5"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shm_files(&id).is_empty());
}

/// Two network namespaces joined by a veth pair, an sshd in each; deleted on drop.
struct Namespaces {
    names: [String; 2],
    /// One end of the veth pair (gone with its namespace; deleted here if never moved).
    veth: String,
    sshds: Vec<Sshd>,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        self.sshds.clear();
        for n in &self.names {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    out.status.success().then_some(()).ok_or_else(|| {
        format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })
}

fn namespaces(dir: &TempDir, addrs: [&str; 2]) -> Result<Namespaces, String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("network namespaces need root".into());
    }
    let pid = std::process::id();
    let mut ns = Namespaces {
        names: [format!("tnt{pid}a"), format!("tnt{pid}b")],
        veth: format!("tv{pid}a"),
        sshds: Vec::new(),
    };
    for n in &ns.names {
        ip(&["netns", "add", n])?;
    }
    let veth = [format!("tv{pid}a"), format!("tv{pid}b")];
    ip(&[
        "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
    ])?;
    for i in 0..2 {
        ip(&["link", "set", &veth[i], "netns", &ns.names[i]])?;
        ip(&[
            "-n",
            &ns.names[i],
            "addr",
            "add",
            &format!("{}/24", addrs[i]),
            "dev",
            &veth[i],
        ])?;
        ip(&["-n", &ns.names[i], "link", "set", &veth[i], "up"])?;
        ip(&["-n", &ns.names[i], "link", "set", "lo", "up"])?;
    }
    for (addr, name) in addrs.iter().zip(ns.names.clone()) {
        ns.sshds
            .push(start_sshd(dir.path(), addr, 2222, Some(&name))?);
    }
    Ok(ns)
}

#[test]
fn ranks_in_two_network_namespaces() {
    let dir = TempDir::new("netns");
    if !Path::new(SSHD).exists() {
        println!("SKIPPED: {SSHD} is not installed (apt-get install openssh-server)");
        return;
    }
    let pid = std::process::id();
    let (x, y) = (100 + pid % 100, (pid / 100) % 250);
    let addrs = [format!("10.{x}.{y}.1"), format!("10.{x}.{y}.2")];
    let ns = match namespaces(&dir, [&addrs[0], &addrs[1]]) {
        Ok(ns) => ns,
        Err(why) => {
            println!("SKIPPED: network namespaces not available: {why}");
            return;
        }
    };
    let hf = hostfile(
        &dir,
        &format!("{} slots=1\n{} slots=1\n", addrs[0], addrs[1]),
    );
    let run = TempDir::new("netnsrun");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.names[0], TARANTELLA])
        .env("TARANTELLA_RUN_DIR", run.path())
        .env("TARANTELLA_SSH", &ns.sshds[0].ssh)
        .env_remove("SLURM_JOB_ID")
        .arg("--hostfile")
        .arg(&hf)
        .args(["--output-on-all-devices", "--", PROBE, "--rendezvous"]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.contains("rendezvous ok"))
            .count(),
        2,
        "{:?}",
        job.out
    );
    let nets: Vec<String> = job
        .out
        .iter()
        .filter(|l| l.contains("probe rank="))
        .filter_map(|l| field(l, "netns"))
        .collect();
    assert_eq!(nets.len(), 2);
    assert_ne!(
        nets[0], nets[1],
        "ranks should run in different network namespaces"
    );
    let rdv: Vec<String> = job
        .out
        .iter()
        .filter_map(|l| field(l, "rendezvous"))
        .collect();
    assert!(
        rdv.iter().all(|r| r.starts_with(&format!("{}:", addrs[0]))),
        "{rdv:?}"
    );
    drop(ns);
}

#[test]
fn ssh_ranks_get_the_job_token_without_it_showing_on_any_command_line() {
    let dir = TempDir::new("ssh4");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = hostfile(&dir, "127.0.0.1 slots=2\n");
    let mut job = ssh_job(
        &sshd,
        &hf,
        &[
            "--output-on-all-devices",
            "--",
            PROBE,
            "--rendezvous",
            "--token-on-cmdlines",
        ],
    );
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    // Both ranks hold the launcher's token (not one derived from the job id) and presented
    // it to each other; meanwhile their ssh clients, remote shells and wrappers were alive,
    // and none showed it on its command line.
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.contains("rendezvous ok"))
            .count(),
        2,
        "{:?}",
        job.out
    );
    let seen: Vec<(String, String)> = job
        .out
        .iter()
        .filter_map(|l| Some((field(l, "token_in_env")?, field(l, "token_on_cmdlines")?)))
        .collect();
    assert_eq!(
        seen,
        [("1".to_string(), "0".to_string()), ("1".into(), "0".into())],
        "{:?}",
        job.out
    );
}

#[test]
fn ssh_ranks_from_a_host_list_on_the_command_line() {
    let dir = TempDir::new("ssh-H");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let run = TempDir::new("sshrun");
    let mut cmd = tarantella(run.path());
    cmd.env("TARANTELLA_SSH", &sshd.ssh).args([
        "-H",
        "127.0.0.1:2",
        "--output-on-all-devices",
        "--",
        PROBE,
        "--rendezvous",
    ]);
    let mut job = Job::spawn(cmd, run);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    assert_eq!(
        job.out
            .iter()
            .filter(|l| l.contains("rendezvous ok"))
            .count(),
        2,
        "{:?}",
        job.out
    );
    let rdv: Vec<String> = job
        .out
        .iter()
        .filter_map(|l| field(l, "rendezvous"))
        .collect();
    assert!(
        rdv.len() == 2 && rdv.iter().all(|r| r.starts_with("127.0.0.1:")),
        "{rdv:?}"
    );
}

/// A hostfile naming this host twice, as two hosts: `127.0.0.1` (`slots` ranks) and
/// `USER@localhost` (one rank), both reaching the private sshd.
fn two_names_for_this_host(dir: &TempDir, slots: usize) -> PathBuf {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| "root".into())
        });
    hostfile(dir, &format!("127.0.0.1 slots={slots}\n{user}@localhost\n"))
}

/// Each rank's `env NAME=value` lines (and its rendezvous), by rank.
fn env_by_rank(job: &Job, nranks: usize) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut by_rank = vec![std::collections::BTreeMap::new(); nranks];
    for line in &job.out {
        let Some(rest) = line.strip_prefix("[rank ") else {
            continue;
        };
        let (rank, rest) = rest.split_once("] ").unwrap();
        let rank: usize = rank.parse().unwrap();
        if let Some((name, value)) = rest.strip_prefix("env ").and_then(|e| e.split_once('=')) {
            by_rank[rank].insert(name.to_string(), value.to_string());
        }
        if let Some(rendezvous) = field(rest, "rendezvous") {
            by_rank[rank].insert("rendezvous".into(), rendezvous);
        }
    }
    by_rank
}

#[test]
fn ssh_ranks_get_torchruns_variables() {
    let dir = TempDir::new("ssh-torchrun");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let hf = two_names_for_this_host(&dir, 2);
    let mut args = vec!["--output-on-all-devices", "--", PROBE, "--rendezvous"];
    for var in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    ] {
        args.extend(["--env", var]);
    }
    let mut job = ssh_job(&sshd, &hf, &args);
    assert!(job.wait(LIMIT).success(), "{}", job.stderr_text());
    let seen = env_by_rank(&job, 3);
    let port = seen[0]["MASTER_PORT"].clone();
    assert!(port.parse::<u16>().is_ok(), "{port}");
    assert_ne!(seen[0]["rendezvous"], format!("127.0.0.1:{port}"));
    let row = |r: usize| -> Vec<&str> {
        [
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "NODE_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
        ]
        .iter()
        .map(|v| seen[r][*v].as_str())
        .collect()
    };
    assert_eq!(
        row(0),
        ["0", "3", "0", "2", "0", "127.0.0.1", port.as_str()]
    );
    assert_eq!(
        row(1),
        ["1", "3", "1", "2", "0", "127.0.0.1", port.as_str()]
    );
    assert_eq!(
        row(2),
        ["2", "3", "0", "1", "1", "127.0.0.1", port.as_str()]
    );
}

/// `PROBE --gpi2`'s view of each rank, by rank: (socket, host, master, mfile).
fn gpi2_views(job: &Job, nranks: usize) -> Vec<(String, String, String, String)> {
    let mut views = vec![Default::default(); nranks];
    for line in job
        .out
        .iter()
        .filter_map(|l| l.split_once("] gpi2 ").map(|(_, v)| v))
    {
        let f = |k: &str| field(line, k).unwrap_or_default();
        let rank: usize = f("rank").parse().unwrap();
        views[rank] = (f("socket"), f("host"), f("master"), f("mfile"));
    }
    views
}

#[test]
fn ssh_ranks_see_the_job_as_gaspi_run_shows_it_to_a_gpi2_program() {
    let dir = TempDir::new("ssh-gpi2");
    let Some(sshd) = loopback_sshd(&dir) else {
        return;
    };
    let two_hosts = two_names_for_this_host(&dir, 2);
    // A GPI-2 machine file: a line per rank.
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "127.0.0.1\n127.0.0.1\nlocalhost\n").unwrap();
    let (a, b) = ("127.0.0.1", "localhost");
    for (hosts_flag, hosts, map_by, expected) in [
        ("--hostfile", &two_hosts, "slot", [(0, a), (1, a), (0, b)]),
        ("-m", &machines, "slot", [(0, a), (1, a), (0, b)]),
        ("--hostfile", &two_hosts, "node", [(0, a), (0, b), (1, a)]),
    ] {
        let run = TempDir::new("sshrun");
        let mut cmd = tarantella(run.path());
        cmd.env("TARANTELLA_SSH", &sshd.ssh)
            .arg(hosts_flag)
            .arg(hosts)
            .args([
                "--map-by",
                map_by,
                "--output-on-all-devices",
                "--",
                PROBE,
                "--rendezvous",
                "--gpi2",
            ]);
        let mut job = Job::spawn(cmd, run);
        let what = format!("{hosts_flag} --map-by {map_by}");
        assert!(job.wait(LIMIT).success(), "{what}: {}", job.stderr_text());
        let views = gpi2_views(&job, 3);
        let seen: Vec<(usize, &str)> = views
            .iter()
            .map(|(socket, host, _, _)| (socket.parse().unwrap(), host.as_str()))
            .collect();
        assert_eq!(seen, expected, "{what}: {:?}", job.out);
        for (_, _, master, mfile) in &views {
            assert_eq!(master, a, "{what}");
            // Each rank's wrapper wrote its own copy, and removed it when the rank ended.
            assert!(mfile.contains("-machines."), "{what}: {mfile}");
            assert!(!Path::new(mfile).exists(), "{what}: {mfile} left behind");
        }
    }
}
