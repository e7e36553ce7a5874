//! Programs started by another launcher than ours: srun's and torchrun's variables form one
//! job (torchrun's workers under srun too), a program run directly in a Slurm batch script
//! is one rank (not rank 0 of the allocation), and `mpirun` with more than one process is
//! refused instead of giving N 1-rank jobs.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

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
    let waited = gaspi::testing::wait_all(children, DEADLINE);
    assert!(
        !waited.timed_out,
        "hello_ring ranks did not finish in {DEADLINE:?}"
    );
    waited
        .outputs
        .into_iter()
        .map(|o| o.expect("wait for hello_ring"))
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every one of the three `hello_ring` processes succeeded in one 3-rank job: its allreduce
/// sums the ranks, 0 + 1 + 2 = 3 only if all three joined.
fn three_ranks_formed_one_job(outs: &[Output]) {
    for (rank, out) in outs.iter().enumerate() {
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "rank {rank}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            text(&out.stderr)
        );
        let expected = format!("rank {rank}/3: token ring ok, sum of ranks = 3");
        assert!(stdout.contains(&expected), "rank {rank} printed:\n{stdout}");
    }
}

/// A torchrun job of `n` workers on this host: `MASTER_PORT` is the port below a free one
/// (our rendezvous is `MASTER_PORT + 1`; torchrun's agent holds `MASTER_PORT` itself), and
/// the job id our runtime derives from it, whose shared-memory files the test removes.
struct TorchrunJob {
    n: u16,
    master_port: u16,
    run_id: String,
}

impl TorchrunJob {
    fn new(n: u16, name: &str) -> Self {
        let free = gaspi::testing::free_port("127.0.0.1".parse().unwrap());
        let run_id = format!("{name}-{}", std::process::id());
        TorchrunJob {
            n,
            master_port: free - 1,
            run_id,
        }
    }

    /// What torchrun's agent sets for worker `rank`.
    fn worker(&self, rank: u16) -> Vec<(&'static str, String)> {
        vec![
            ("RANK", rank.to_string()),
            ("WORLD_SIZE", self.n.to_string()),
            ("LOCAL_RANK", rank.to_string()),
            ("LOCAL_WORLD_SIZE", self.n.to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            ("MASTER_PORT", self.master_port.to_string()),
            ("TORCHELASTIC_RUN_ID", self.run_id.clone()),
        ]
    }

    fn remove_shm_files(&self) {
        gaspi::env::remove_job_shm_files(&format!("torchrun-{}.{}", self.run_id, self.master_port));
    }
}

#[test]
fn torchrun_variables_alone_form_one_job() {
    let job = TorchrunJob::new(3, "foreign-test");
    let children = (0..job.n)
        .map(|rank| hello_ring(&job.worker(rank)))
        .collect();
    let outs = outputs(children);
    job.remove_shm_files();
    three_ranks_formed_one_job(&outs);
}

#[test]
fn torchruns_workers_under_srun_form_one_job() {
    let job = TorchrunJob::new(3, "foreign-srun-test");
    // `srun -n 1 torchrun --nproc-per-node 3 hello_ring`: the three workers inherit the one
    // Slurm task's variables (task 0 of 1). Taken as the job, they would make three 1-rank
    // jobs.
    let slurm_task = [
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "0"),
        ("SLURM_NTASKS", "1"),
        ("SLURM_STEP_TASKS_PER_NODE", "1"),
        ("SLURM_STEP_NODELIST", "127.0.0.1"),
        ("SLURM_JOB_ID", "1"),
        ("SLURM_STEP_ID", "0"),
    ];
    let children = (0..job.n)
        .map(|rank| {
            let mut vars = job.worker(rank);
            vars.extend(slurm_task.iter().map(|(k, v)| (*k, v.to_string())));
            hello_ring(&vars)
        })
        .collect();
    let outs = outputs(children);
    job.remove_shm_files();
    three_ranks_formed_one_job(&outs);
}

/// A Slurm job id and step id whose rendezvous port (`20000 + (job * 16 + step) % 40000`,
/// see `gaspi::env`) is free on this host now: one of the harness's ports (below the
/// ephemeral range, where no connection takes it before rank 0 binds it) from 20000 up.
fn slurm_ids_with_a_free_rendezvous_port() -> (u64, u64) {
    let ip = "127.0.0.1".parse().unwrap();
    let port = (0..10_000)
        .map(|_| gaspi::testing::free_port(ip))
        .find(|p| *p >= 20_000)
        .expect("a free port from 20000 below the ephemeral range");
    let offset = u64::from(port - 20_000);
    (offset / 16, offset % 16)
}

#[test]
fn srun_variables_alone_form_one_job() {
    const N: u16 = 3;
    let (job, step) = slurm_ids_with_a_free_rendezvous_port();
    // What srun sets for the tasks of `srun -n 3` on one node (the step id says that this is
    // a step of srun's, not the batch script).
    let children = (0..N)
        .map(|rank| {
            hello_ring(&[
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_LOCALID", rank.to_string()),
                ("SLURM_NODEID", "0".to_string()),
                ("SLURM_NTASKS", N.to_string()),
                ("SLURM_STEP_NUM_TASKS", N.to_string()),
                ("SLURM_STEP_TASKS_PER_NODE", N.to_string()),
                ("SLURM_TASKS_PER_NODE", N.to_string()),
                ("SLURM_STEP_NODELIST", "127.0.0.1".to_string()),
                ("SLURM_JOB_NODELIST", "127.0.0.1".to_string()),
                ("SLURM_JOB_ID", job.to_string()),
                ("SLURM_STEP_ID", step.to_string()),
            ])
        })
        .collect();
    let outs = outputs(children);
    gaspi::env::remove_job_shm_files(&format!("slurm-{job}.{step}"));
    three_ranks_formed_one_job(&outs);
}

#[test]
fn a_program_run_directly_in_a_batch_script_is_one_rank() {
    // What Slurm sets in the batch script of `sbatch -n 3`: SLURM_PROCID=0 and the
    // allocation's SLURM_NTASKS, but no step id. Taken as rank 0 of 3, the program would wait
    // for peers nobody starts until the init timeout (kept short here so that such a
    // regression fails fast).
    let (job, _) = slurm_ids_with_a_free_rendezvous_port();
    let child = hello_ring(&[
        ("SLURM_PROCID", "0".to_string()),
        ("SLURM_LOCALID", "0".to_string()),
        ("SLURM_NODEID", "0".to_string()),
        ("SLURM_NTASKS", "3".to_string()),
        ("SLURM_TASKS_PER_NODE", "3".to_string()),
        ("SLURM_JOB_NODELIST", "127.0.0.1".to_string()),
        ("SLURM_JOB_ID", job.to_string()),
        ("GASPI_INIT_TIMEOUT_MS", "5000".to_string()),
    ]);
    let out = outputs(vec![child]).remove(0);
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        stdout.contains("rank 0/1: token ring ok, sum of ranks = 0"),
        "{stdout}"
    );
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
