//! Unit tests of the job description read from the environment.

use super::*;

use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> Result<JobEnv> {
    let m: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    JobEnv::from_lookup(|k| m.get(k).cloned())
}

#[test]
fn single_rank_defaults() {
    let e = env(&[]).unwrap();
    assert_eq!(
        (e.rank, e.nranks, e.local_rank, e.local_nranks),
        (Rank(0), 1, 0, 1)
    );
    assert_eq!(e.transport, TransportChoice::Auto);
    assert!(e.rendezvous.is_none());
    assert_eq!(
        e.heartbeat_timeout_ms, None,
        "the heartbeat is off by default"
    );
}

#[test]
fn the_heartbeat_timeout_is_off_at_zero_and_refused_below_the_minimum() {
    assert_eq!(
        env(&[(HEARTBEAT_TIMEOUT_MS, "1500")])
            .unwrap()
            .heartbeat_timeout_ms,
        Some(1500)
    );
    assert_eq!(
        env(&[(HEARTBEAT_TIMEOUT_MS, "0")])
            .unwrap()
            .heartbeat_timeout_ms,
        None
    );
    let low = env_error(&[(HEARTBEAT_TIMEOUT_MS, "5")]);
    assert!(low.contains(HEARTBEAT_TIMEOUT_MS), "{low}");
    assert!(env(&[(HEARTBEAT_TIMEOUT_MS, "soon")]).is_err());
}

#[test]
fn roundtrip_through_vars() {
    let e = env(&[
        (NRANKS, "4"),
        (RANK, "3"),
        (LOCAL_RANK, "1"),
        (LOCAL_NRANKS, "2"),
        (RENDEZVOUS, "10.0.0.1:4000"),
        (JOB_TOKEN, "00112233445566778899aabbccddeeff"),
        (JOB_ID, "j-1"),
        (TRANSPORT, "tcp"),
        (HEARTBEAT_TIMEOUT_MS, "2000"),
    ])
    .unwrap();
    let vars: HashMap<String, String> = e
        .to_vars()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let back = JobEnv::from_lookup(|k| vars.get(k).cloned()).unwrap();
    assert_eq!(back.rank, Rank(3));
    assert_eq!(back.token, e.token);
    assert_eq!(back.transport, TransportChoice::Tcp);
    assert_eq!(back.rendezvous.as_deref(), Some("10.0.0.1:4000"));
    assert_eq!(back.heartbeat_timeout_ms, Some(2000));
}

#[test]
fn rejects_bad_values() {
    assert!(env(&[(NRANKS, "2"), (RANK, "2"), (RENDEZVOUS, "h:1")]).is_err());
    assert!(
        env(&[(NRANKS, "2"), (RANK, "0")]).is_err(),
        "missing rendezvous"
    );
    assert!(env(&[(TRANSPORT, "carrier-pigeon")]).is_err());
    assert!(env(&[(JOB_TOKEN, "xyz")]).is_err());
    assert!(env(&[(NRANKS, "-1")]).is_err());
    assert!(env(&[(JOB_ID, "../etc")]).is_err());
}

#[test]
fn slurm_variables() {
    let e = env(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_STEP_TASKS_PER_NODE", "4(x2)"),
        ("SLURM_STEP_NODELIST", "node[03-04]"),
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
    ])
    .unwrap();
    assert_eq!(
        (e.rank, e.nranks, e.local_rank, e.local_nranks),
        (Rank(5), 8, 1, 4)
    );
    assert_eq!(e.rendezvous.as_deref(), Some("node03:21232"));
    assert_eq!(e.job_id, "slurm-77.0");
}

/// What Slurm sets in a batch script (`sbatch -N 2 -n 8`): the job's variables,
/// `SLURM_PROCID=0` and the allocation's `SLURM_NTASKS`, but no step id.
const BATCH_SCRIPT: &[(&str, &str)] = &[
    ("SLURM_JOB_ID", "77"),
    ("SLURM_JOBID", "77"),
    ("SLURM_PROCID", "0"),
    ("SLURM_LOCALID", "0"),
    ("SLURM_NODEID", "0"),
    ("SLURM_NTASKS", "8"),
    ("SLURM_NPROCS", "8"),
    ("SLURM_TASKS_PER_NODE", "4(x2)"),
    ("SLURM_JOB_NODELIST", "node[03-04]"),
    ("SLURM_NODELIST", "node[03-04]"),
];

#[test]
fn a_batch_script_is_a_single_rank_not_rank_0_of_the_allocation() {
    let single = |extra: &[(&str, &str)]| {
        let mut vars = BATCH_SCRIPT.to_vec();
        vars.extend_from_slice(extra);
        let e = env(&vars).unwrap();
        assert_eq!((e.rank, e.nranks), (Rank(0), 1), "{extra:?}");
        assert_eq!(e.rendezvous, None, "{extra:?}");
        assert_eq!(e.job_id, "local", "{extra:?}");
    };
    single(&[]);
    // Slurm's pseudo steps, as some tools print them: by name, or by number (batch is
    // 0xFFFFFFFB since Slurm 20.11, 0xFFFFFFFE before).
    single(&[("SLURM_STEP_ID", "batch")]);
    single(&[("SLURM_STEP_ID", "4294967291")]);
    single(&[("SLURM_STEPID", "4294967294")]);
    single(&[("SLURM_STEP_ID", "interactive")]);
}

#[test]
fn torchrun_in_a_batch_script_describes_the_job() {
    let mut vars = torchrun_vars("3", "4");
    vars.extend(BATCH_SCRIPT.iter().map(|(k, v)| (*k, v.to_string())));
    let e = env_owned(&vars).unwrap();
    assert_eq!((e.rank, e.nranks, e.local_rank), (Rank(3), 4, 1));
    assert!(e.job_id.starts_with("torchrun-"), "{}", e.job_id);
}

#[test]
fn srun_steps_under_either_name_of_the_step_id() {
    for name in ["SLURM_STEP_ID", "SLURM_STEPID"] {
        let mut vars = BATCH_SCRIPT.to_vec();
        vars.extend([("SLURM_PROCID", "5"), (name, "3")]);
        let e = env(&vars).unwrap();
        assert_eq!((e.rank, e.nranks), (Rank(5), 8), "{name}");
        assert_eq!(e.job_id, "slurm-77.3", "{name}");
    }
    let mut vars = BATCH_SCRIPT.to_vec();
    vars.push(("SLURM_STEP_ID", "second"));
    let message = env_error(&vars);
    assert!(message.contains("SLURM_STEP_ID=\"second\""), "{message}");
}

#[test]
fn reference_master_variables() {
    let e = env(&[
        (NRANKS, "2"),
        (RANK, "1"),
        (MASTER, "head"),
        (SN_PORT, "999"),
    ])
    .unwrap();
    assert_eq!(e.rendezvous.as_deref(), Some("head:999"));
}

#[test]
fn reference_machine_file_and_socket() {
    let dir = std::env::temp_dir().join(format!("tnt-mfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("machines");
    std::fs::write(&path, "# job\nnodeA\nnodeA\n\nnodeB slots=1\nnodeA\n").unwrap();
    let p = path.to_str().unwrap();
    let e = env(&[(RANK, "3"), (MFILE, p), (SOCKET, "1")]).unwrap();
    assert_eq!((e.rank, e.nranks), (Rank(3), 4));
    assert_eq!((e.local_rank, e.local_nranks), (2, 3));
    assert_eq!(e.rendezvous.as_deref(), Some("nodeA:10840"));
    let e = env(&[(RANK, "2"), (NRANKS, "3"), (MFILE, p), (MASTER, "head")]).unwrap();
    assert_eq!((e.local_rank, e.local_nranks), (0, 1));
    assert_eq!(e.rendezvous.as_deref(), Some("head:10840"));
    assert!(
        env(&[(RANK, "0"), (NRANKS, "5"), (MFILE, p)]).is_err(),
        "too few lines"
    );
    assert!(env(&[(MFILE, "/nonexistent/machines")]).is_err());
    assert!(env(&[(SOCKET, "north")]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What torchrun sets for rank `rank` of `world` ranks, two per host.
fn torchrun_vars(rank: &str, world: &str) -> Vec<(&'static str, String)> {
    let local = rank
        .parse::<u16>()
        .map_or(rank.to_string(), |r| (r % 2).to_string());
    vec![
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("LOCAL_RANK", local),
        ("LOCAL_WORLD_SIZE", "2".to_string()),
        ("MASTER_ADDR", "head".to_string()),
        ("MASTER_PORT", "29500".to_string()),
        ("TORCHELASTIC_RUN_ID", "run 7".to_string()),
    ]
}

fn env_owned(vars: &[(&str, String)]) -> Result<JobEnv> {
    let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env(&pairs)
}

fn env_error(pairs: &[(&str, &str)]) -> String {
    match env(pairs) {
        Err(Error::Env(message)) => message,
        other => panic!("expected an environment error, got {other:?}"),
    }
}

#[test]
fn torchrun_variables_describe_the_job() {
    let e = env_owned(&torchrun_vars("3", "4")).unwrap();
    assert_eq!(
        (e.rank, e.nranks, e.local_rank, e.local_nranks),
        (Rank(3), 4, 1, 2)
    );
    assert_eq!(
        e.rendezvous.as_deref(),
        Some("head:29501"),
        "MASTER_PORT + 1"
    );
    assert_eq!(e.job_id, "torchrun-run_7.29500");
    assert_eq!(e.token, JobToken::derived_from("torchrun-run_7.29500"));
}

#[test]
fn torchrun_rendezvous_port_wraps_and_yields_to_gaspi_sn_port() {
    assert_eq!(torchrun::rendezvous_port(65535), 65534);
    let mut vars = torchrun_vars("0", "2");
    vars.push((SN_PORT, "4000".to_string()));
    let e = env_owned(&vars).unwrap();
    assert_eq!(e.rendezvous.as_deref(), Some("head:4000"));
    let mut vars = torchrun_vars("0", "2");
    vars.retain(|(k, _)| *k != "MASTER_ADDR");
    vars.push(("MASTER_ADDR", "fe80::1".to_string()));
    let e = env_owned(&vars).unwrap();
    assert_eq!(e.rendezvous.as_deref(), Some("[fe80::1]:29501"));
}

#[test]
fn torchrun_world_size_one_is_a_single_rank_job() {
    let e = env(&[("RANK", "0"), ("WORLD_SIZE", "1")]).unwrap();
    assert_eq!((e.rank, e.nranks, e.local_nranks), (Rank(0), 1, 1));
    assert!(e.rendezvous.is_none());
    assert_eq!(e.job_id, "torchrun-none");
}

#[test]
fn torchrun_bad_values_name_the_variable() {
    let message = env_error(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")]);
    assert!(
        message.contains("RANK=2") && message.contains("WORLD_SIZE=2"),
        "{message}"
    );
    let message = env_error(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "http"),
    ]);
    assert!(message.contains("MASTER_PORT=\"http\""), "{message}");
    let message = env_error(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")]);
    assert!(message.contains("MASTER_ADDR"), "{message}");
    let message = env_error(&[("RANK", "x"), ("WORLD_SIZE", "2")]);
    assert!(message.contains("RANK=\"x\""), "{message}");
    let message = env_error(&[("RANK", "0"), ("WORLD_SIZE", "0")]);
    assert!(message.contains("WORLD_SIZE=0"), "{message}");
    let message = env_error(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "1"),
    ]);
    assert!(message.contains("LOCAL_RANK=1"), "{message}");
}

#[test]
fn gaspi_variables_win_over_slurm_and_torchrun() {
    // What our launcher exports: GASPI_* for the runtime, torchrun's names for the program.
    let mut vars = torchrun_vars("1", "4");
    vars.extend([
        (NRANKS, "2".to_string()),
        (RANK, "0".to_string()),
        (RENDEZVOUS, "10.0.0.1:4000".to_string()),
        ("SLURM_PROCID", "5".to_string()),
        ("SLURM_NTASKS", "8".to_string()),
        ("OMPI_COMM_WORLD_SIZE", "6".to_string()),
    ]);
    let e = env_owned(&vars).unwrap();
    assert_eq!((e.rank, e.nranks), (Rank(0), 2));
    assert_eq!(e.rendezvous.as_deref(), Some("10.0.0.1:4000"));
    assert_eq!(e.job_id, "local");
}

/// What Slurm gives each task of a 2-node `srun --ntasks-per-node 1` step, which every
/// process that task starts inherits.
fn slurm_task_vars(task: u16) -> Vec<(&'static str, String)> {
    vec![
        ("SLURM_PROCID", task.to_string()),
        ("SLURM_LOCALID", "0".to_string()),
        ("SLURM_NTASKS", "2".to_string()),
        ("SLURM_STEP_TASKS_PER_NODE", "1(x2)".to_string()),
        ("SLURM_STEP_ID", "0".to_string()),
        ("SLURM_STEP_NODELIST", "node[1-2]".to_string()),
        ("SLURM_JOB_ID", "77".to_string()),
    ]
}

#[test]
fn torchruns_workers_under_srun_take_torchruns_job() {
    // `srun -N 2 --ntasks-per-node 1 torchrun --nnodes 2 --nproc-per-node 2 ...`: one agent
    // per Slurm task, two workers per agent. Slurm's variables count the agents (2); the
    // job has 4 workers.
    for rank in 0..4u16 {
        let mut vars = slurm_task_vars(rank / 2);
        vars.extend(torchrun_vars(&rank.to_string(), "4"));
        let e = env_owned(&vars).unwrap();
        assert_eq!(
            (e.rank, e.nranks, e.local_rank, e.local_nranks),
            (Rank(rank), 4, rank % 2, 2),
            "worker {rank}"
        );
        assert_eq!(e.rendezvous.as_deref(), Some("head:29501"));
        assert_eq!(e.job_id, "torchrun-run_7.29500");
    }
}

#[test]
fn slurm_wins_over_rank_variables_set_by_hand() {
    // A script under srun that exports `RANK`/`WORLD_SIZE` for torch.distributed itself (no
    // torchrun agent, so no TORCHELASTIC_RUN_ID): Slurm's step describes the job.
    let mut vars = slurm_task_vars(1);
    vars.extend(
        torchrun_vars("1", "2")
            .into_iter()
            .filter(|(k, _)| *k != "TORCHELASTIC_RUN_ID"),
    );
    let e = env_owned(&vars).unwrap();
    assert_eq!((e.rank, e.nranks), (Rank(1), 2));
    assert_eq!(e.job_id, "slurm-77.0");
    // Outside a Slurm step, the same variables alone describe the job, and an agent without
    // `RANK`/`WORLD_SIZE` leaves it to Slurm.
    let mut vars = torchrun_vars("1", "4");
    vars.retain(|(k, _)| *k != "TORCHELASTIC_RUN_ID");
    assert_eq!(env_owned(&vars).unwrap().nranks, 4);
    let mut vars = slurm_task_vars(1);
    vars.push(("TORCHELASTIC_RUN_ID", "none".to_string()));
    assert_eq!(env_owned(&vars).unwrap().job_id, "slurm-77.0");
}

#[test]
fn torchrun_wins_over_mpirun() {
    let mut vars = torchrun_vars("1", "4");
    vars.push(("OMPI_COMM_WORLD_SIZE", "4".to_string()));
    let e = env_owned(&vars).unwrap();
    assert_eq!((e.rank, e.nranks), (Rank(1), 4));
}

#[test]
fn mpirun_with_several_processes_is_refused_with_the_fix() {
    for (size, rank) in [
        ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
        ("PMI_SIZE", "PMI_RANK"),
    ] {
        let message = env_error(&[(size, "4"), (rank, "2")]);
        assert!(message.contains("mpirun"), "{message}");
        assert!(message.contains("with 4 processes"), "{message}");
        assert!(message.contains("tarantella -n 4 --"), "{message}");
        assert!(message.contains("srun -n 4"), "{message}");
    }
    let message = env_error(&[("PMI_SIZE", "many")]);
    assert!(message.contains("PMI_SIZE=\"many\""), "{message}");
}

#[test]
fn mpirun_with_one_process_is_a_single_rank_job() {
    for size in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
        let e = env(&[(size, "1")]).unwrap();
        assert_eq!((e.rank, e.nranks), (Rank(0), 1));
    }
}
