//! Unit tests of the ssh spawner: the wrapper run here as a remote shell would run it, and
//! the command lines of a job's ranks.

use super::*;
use std::path::Path;

#[test]
fn picks_an_unused_port_below_the_ephemeral_range() {
    let text = "32768\t60999\n  sl  local_address rem_address   st\n   0: 0100007F:2710 00000000:0000 0A\n";
    for _ in 0..50 {
        let p = pick_ports(text, 1).unwrap()[0];
        assert!((10_001..32_768).contains(&p), "{p}");
    }
    let two = pick_ports(text, 2).unwrap();
    assert_ne!(two[0], two[1]);
    // Only 10000 and 10001 lie below this range, and 10001 is taken.
    let crowded = "10002\t60999\n  sl  local_address\n   0: 0100007F:2711 00000000:0000 0A\n";
    assert_eq!(pick_ports(crowded, 1), Some(vec![10_000]));
    assert_eq!(pick_ports(crowded, 2), None);
}

/// This host's ports for a local job: distinct, below the kernel's ephemeral range (where no
/// outgoing connection can take them between the choice and rank 0's bind), and free.
#[test]
fn local_ports_lie_below_this_hosts_ephemeral_range() {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ports = free_local_ports(2).unwrap();
    assert_ne!(ports[0], ports[1]);
    for p in ports {
        assert!((10_000..low).contains(&p), "{p} not below {low}");
        std::net::TcpListener::bind(("127.0.0.1", p)).expect("free");
    }
}

/// The ssh command line of every rank of a two-host job, as `spawn` builds it.
fn ssh_job_command_lines() -> (crate::plan::Plan, Vec<Vec<String>>) {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("tnt-ssh-argv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, "node1 slots=2\nuser@node2\n").unwrap();
    let cli = crate::cli::Cli::try_parse_from([
        "tarantella".as_ref(),
        "--hostfile".as_ref(),
        hosts.as_os_str(),
        "--".as_ref(),
        "prog".as_ref(),
    ])
    .unwrap();
    let mut plan = crate::plan::Plan::new(&cli).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    plan.rendezvous = Some("node1:12345".into());
    let base = vec!["ssh".to_string(), "-p".into(), "2222".into()];
    let lines = plan
        .ranks
        .iter()
        .map(|r| {
            let remote = RemoteRank {
                host: r.host.as_deref().unwrap(),
                cwd: "/home/u",
                job_id: &plan.job_id,
                env: &plan.rank_env(r),
                argv: &plan.rank_argv(r),
            };
            rank_command_line(&base, &remote).unwrap()
        })
        .collect();
    (plan, lines)
}

#[test]
fn the_ssh_command_line_of_a_rank_carries_no_job_token() {
    let (plan, lines) = ssh_job_command_lines();
    let token = plan.token.to_hex();
    assert_eq!(lines.len(), 3);
    for (rank, line) in lines.iter().enumerate() {
        assert!(
            line.iter().all(|w| !w.contains(&token)),
            "the token is on the command line {line:?}"
        );
        let remote = shell::split(line.last().unwrap()).unwrap();
        assert!(remote.contains(&format!("GASPI_RANK={rank}")), "{remote:?}");
        let token_var = format!("{}=", gaspi::env::JOB_TOKEN);
        assert!(
            remote.iter().all(|w| !w.starts_with(&token_var)),
            "{remote:?}"
        );
    }
}

/// The job id the wrapper is run with in these tests.
const WRAPPER_TEST_JOB: &str = "wrapper-test";

/// Runs the wrapper here (as the remote shell would) with `stdin` on its stdin, kept open
/// until it exits; returns its exit status, stdout and stderr.
fn run_wrapper(stdin: Option<&str>, argv: &[&str]) -> (Option<i32>, String, String) {
    run_wrapper_in(Command::new("sh"), stdin, argv)
}

/// [`run_wrapper`] with `sh`, the command it starts as, set up by the caller.
fn run_wrapper_in(
    mut sh: Command,
    stdin: Option<&str>,
    argv: &[&str],
) -> (Option<i32>, String, String) {
    let mut child = sh
        .args(["-c", &WRAPPER, "tarantella-rank", "/", WRAPPER_TEST_JOB])
        .args(argv)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take();
    if let (Some(i), Some(text)) = (&mut input, stdin) {
        i.write_all(text.as_bytes()).unwrap();
    }
    let read_all = |s: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = s {
                let _ = s.read_to_string(&mut text);
            }
            text
        })
    };
    let out = read_all(child.stdout.take().map(|s| Box::new(s) as _));
    let err = read_all(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the wrapper did not exit within 20 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(input);
    (status.code(), out.join().unwrap(), err.join().unwrap())
}

#[test]
fn the_wrapper_takes_the_token_from_its_stdin_and_runs_nothing_without_one() {
    let token = "00112233445566778899aabbccddeeff";
    let show = ["A=1", "sh", "-c", "echo \"token=$GASPI_JOB_TOKEN A=$A\""];
    let (code, out, err) = run_wrapper(Some(&wrapper_input(token, &[])), &show);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, format!("token={token} A=1\n"), "{err}");
    assert!(err.contains("\x1eTNT exit 0"), "{err}");

    let (code, out, err) = run_wrapper(None, &show);
    assert_eq!(code, Some(97), "{err}");
    assert_eq!(out, "", "ran without a token");
    assert!(err.contains("no job token"), "{err}");
}

#[test]
fn the_wrapper_writes_the_machine_file_for_the_rank_and_removes_it_after() {
    let token = "00112233445566778899aabbccddeeff";
    let hosts = ["n1".to_string(), "n1".into(), "n2".into()];
    let show = [
        "sh",
        "-c",
        "echo \"mfile=$GASPI_MFILE\"; cat \"$GASPI_MFILE\"",
    ];
    let (code, out, err) = run_wrapper(Some(&wrapper_input(token, &hosts)), &show);
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    let mfile = lines.next().and_then(|l| l.strip_prefix("mfile=")).unwrap();
    let tmp = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    assert!(
        mfile.starts_with(&format!("{tmp}/tnt-{WRAPPER_TEST_JOB}-machines.")),
        "{mfile}"
    );
    assert_eq!(lines.collect::<Vec<_>>(), ["n1", "n1", "n2"]);
    assert!(!Path::new(mfile).exists(), "{mfile} left behind");
}

#[test]
fn leftovers_of_a_job_are_matched_exactly() {
    let cmd = leftovers_rm_command("j1");
    assert!(
        cmd.starts_with("rm -f /dev/shm/tnt-j1-[0-9a-f]")
            && cmd.ends_with(" \"${TMPDIR:-/tmp}\"/tnt-j1-machines.??????"),
        "{cmd}"
    );
}

#[test]
fn remote_command_quotes_everything() {
    let c = remote_rank_command(&RemoteRank {
        host: "h",
        cwd: "/home/u/my dir",
        job_id: "j1",
        env: &[("A".into(), "x y".into())],
        argv: &["prog".into(), "it's".into()],
    })
    .unwrap();
    let words = shell::split(&c).unwrap();
    assert_eq!(words[0], "sh");
    assert_eq!(words[2], *WRAPPER);
    assert_eq!(
        &words[4..],
        ["/home/u/my dir", "j1", "A=x y", "prog", "it's"]
    );
}

const TOKEN: &str = "00112233445566778899aabbccddeeff";

/// Where the host has `perl`, the rank's reaper reports an exit status above 128 as the
/// exit status it is, and a death by a signal as that signal, ahead of the shell's
/// ambiguous `$?` (which the wrapper still reports, and exits with).
#[test]
fn the_reaper_tells_an_exit_status_above_128_from_a_signal() {
    if Command::new("perl").arg("-v").output().is_err() {
        println!("SKIPPED: no perl on this host");
        return;
    }
    let input = wrapper_input(TOKEN, &[]);
    let (code, _, err) = run_wrapper(Some(&input), &["sh", "-c", "exit 130"]);
    assert_eq!(code, Some(130), "{err}");
    assert!(
        err.contains("\x1eTNT exited 130\n\x1eTNT exit 130\n"),
        "{err:?}"
    );
    let (code, _, err) = run_wrapper(Some(&input), &["sh", "-c", "kill -TERM $$; sleep 5"]);
    assert_eq!(code, Some(128 + 15), "{err}");
    assert!(
        err.contains("\x1eTNT killed 15\n\x1eTNT exit 143\n"),
        "{err:?}"
    );
}

/// Without `perl` the rank runs directly under the wrapper, which reports the shell's `$?`.
#[test]
fn without_perl_the_wrapper_reports_the_shells_status() {
    let bin = std::env::temp_dir().join(format!("tnt-no-perl-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    // What the wrapper runs besides shell builtins, and nothing else.
    for tool in ["sh", "env", "setsid", "mktemp", "rm", "sleep"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = String::from_utf8(found.stdout).unwrap();
        let _ = std::fs::remove_file(bin.join(tool));
        std::os::unix::fs::symlink(path.trim(), bin.join(tool)).unwrap();
    }
    let mut sh = Command::new(bin.join("sh"));
    sh.env("PATH", &bin);
    let input = wrapper_input(TOKEN, &[]);
    let (code, _, err) = run_wrapper_in(sh, Some(&input), &["sh", "-c", "exit 3"]);
    std::fs::remove_dir_all(&bin).unwrap();
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("\x1eTNT exit 3\n"), "{err:?}");
    assert!(!err.contains("exited"), "{err:?}");
}
