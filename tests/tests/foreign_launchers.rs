//! Programs started by another launcher than ours: torchrun's variables form one job, and
//! `mpirun` with more than one process is refused instead of giving N 1-rank jobs.

use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longer than the runtime's default 30 s init timeout, so a hang is the runtime's to report.
const DEADLINE: Duration = Duration::from_secs(60);

/// `hello_ring` with exactly `vars` as its environment: nothing inherited, so neither our
/// launcher's `GASPI_*` nor a surrounding Slurm or MPI job can change what it sees.
fn hello_ring(vars: &[(&str, String)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_hello_ring"))
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hello_ring starts")
}

/// The outputs of `children`, in order; kills all of them if they are not done by `DEADLINE`.
fn outputs(children: Vec<Child>) -> Vec<Output> {
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let (tx, rx) = mpsc::channel();
    for (i, child) in children.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, child.wait_with_output()));
        });
    }
    let start = Instant::now();
    let mut done: Vec<Option<Output>> = pids.iter().map(|_| None).collect();
    for _ in 0..pids.len() {
        let left = DEADLINE.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok((i, out)) => done[i] = Some(out.expect("wait for hello_ring")),
            Err(_) => {
                for pid in &pids {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*pid as i32),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                panic!("hello_ring ranks did not finish in {DEADLINE:?}");
            }
        }
    }
    done.into_iter().map(Option::unwrap).collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn torchrun_variables_alone_form_one_job() {
    const N: u16 = 3;
    // Our rendezvous is MASTER_PORT + 1 (torchrun's agent holds MASTER_PORT itself), so
    // pick a free port and hand torchrun's the one below it.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run_id = format!("foreign-test-{}", std::process::id());
    let children = (0..N)
        .map(|rank| {
            hello_ring(&[
                ("RANK", rank.to_string()),
                ("WORLD_SIZE", N.to_string()),
                ("LOCAL_RANK", rank.to_string()),
                ("LOCAL_WORLD_SIZE", N.to_string()),
                ("MASTER_ADDR", "127.0.0.1".to_string()),
                ("MASTER_PORT", (free - 1).to_string()),
                ("TORCHELASTIC_RUN_ID", run_id.clone()),
            ])
        })
        .collect();
    let outs = outputs(children);
    gaspi::env::remove_job_shm_files(&format!("torchrun-{run_id}.{}", free - 1));
    for (rank, out) in outs.iter().enumerate() {
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "rank {rank}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            text(&out.stderr)
        );
        // hello_ring's allreduce sums the ranks: 0 + 1 + 2 = 3 only if all three joined.
        let expected = format!("rank {rank}/{N}: token ring ok, sum of ranks = 3");
        assert!(stdout.contains(&expected), "rank {rank} printed:\n{stdout}");
    }
}

#[test]
fn mpirun_with_two_processes_fails_with_the_documented_message() {
    let child = hello_ring(&[
        ("OMPI_COMM_WORLD_SIZE", "2".to_string()),
        ("OMPI_COMM_WORLD_RANK", "0".to_string()),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0".to_string()),
    ]);
    let out = outputs(vec![child]).remove(0);
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "a 2-process mpirun must not run as 1 rank"
    );
    assert!(
        stderr.contains("started by Open MPI's mpirun with 2 processes"),
        "{stderr}"
    );
    assert!(stderr.contains("tarantella -n 2 --"), "{stderr}");
}
