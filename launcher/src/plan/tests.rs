//! Unit tests of the plan: placement, environment, GPUs and the dry run.

use super::env::CUDA_VISIBLE_DEVICES;
use super::*;
use crate::dry_run::describe;
use clap::Parser;

fn cli(args: &[&str]) -> Cli {
    let line = ["tarantella"].iter().chain(args).chain(&["--", "true"]);
    Cli::try_parse_from(line).unwrap()
}

/// The plan for `args` on a host outside Slurm with `gpus_here` GPUs.
fn local_plan(args: &[&str], gpus_here: fn() -> usize) -> Plan {
    Plan::for_host(&cli(args), false, gpus_here).unwrap()
}

fn no_gpus() -> usize {
    0
}

fn four_gpus() -> usize {
    4
}

fn gpus_must_not_be_looked_for() -> usize {
    panic!("looked for GPUs although no warning depends on them")
}

/// The values of CUDA_VISIBLE_DEVICES in `vars`, in the order they are applied.
fn cuda_visible_devices(vars: &[(String, String)]) -> Vec<&str> {
    vars.iter()
        .filter(|(k, _)| k == CUDA_VISIBLE_DEVICES)
        .map(|(_, v)| v.as_str())
        .collect()
}

#[test]
fn ranks_get_no_cuda_visible_devices_from_us_so_the_inherited_one_stands() {
    for gpus in [no_gpus, four_gpus] {
        let plan = local_plan(&["-n", "3"], gpus);
        assert_eq!(plan.ranks.len(), 3);
        for r in &plan.ranks {
            assert_eq!(
                cuda_visible_devices(&plan.rank_env(r)),
                Vec::<&str>::new(),
                "rank {}",
                r.rank
            );
        }
    }
    let slurm = Plan::for_host(&cli(&[]), true, four_gpus).unwrap();
    assert_eq!(cuda_visible_devices(&slurm.slurm_env()), Vec::<&str>::new());
}

#[test]
fn no_gpu_hides_gpus_from_every_rank() {
    let plan = local_plan(&["-n", "3", "--no-gpu"], gpus_must_not_be_looked_for);
    for r in &plan.ranks {
        assert_eq!(
            cuda_visible_devices(&plan.rank_env(r)),
            [""],
            "rank {}",
            r.rank
        );
    }
    let slurm = Plan::for_host(&cli(&["--no-gpu"]), true, four_gpus).unwrap();
    assert_eq!(cuda_visible_devices(&slurm.slurm_env()), [""]);
}

#[test]
fn an_exported_cuda_visible_devices_reaches_every_rank_unchanged() {
    let plan = local_plan(&["-n", "2", "-x", "CUDA_VISIBLE_DEVICES=3,5"], four_gpus);
    for r in &plan.ranks {
        assert_eq!(cuda_visible_devices(&plan.rank_env(r)), ["3,5"]);
    }
    // -x is applied last, so it also wins over --no-gpu.
    let plan = local_plan(&["--no-gpu", "-x", "CUDA_VISIBLE_DEVICES=1"], four_gpus);
    let env = plan.rank_env(&plan.ranks[0]);
    assert_eq!(cuda_visible_devices(&env).last(), Some(&"1"));
}

#[test]
fn default_rank_count_is_one_whatever_the_gpus() {
    for gpus in [no_gpus, four_gpus] {
        assert_eq!(local_plan(&[], gpus).nranks, 1);
    }
    assert_eq!(
        local_plan(&["--devices-per-node", "2"], four_gpus).nranks,
        2
    );
    assert_eq!(local_plan(&["--n-per-node", "3"], four_gpus).nranks, 3);
    assert_eq!(local_plan(&["-n", "5"], four_gpus).nranks, 5);
    let too_many = Plan::for_host(
        &cli(&["-n", "3", "--devices-per-node", "2"]),
        false,
        no_gpus,
    );
    assert!(
        matches!(too_many, Err(Error::NotEnoughSlots { ref detail, .. })
            if detail.starts_with("--devices-per-node 2")),
        "{too_many:?}"
    );
    let zero = Plan::for_host(&cli(&["--devices-per-node", "0"]), false, no_gpus);
    assert!(zero.is_err_and(|e| e
        .to_string()
        .contains("--devices-per-node must be at least 1")));
}

#[test]
fn devices_per_node_on_a_host_without_gpus_warns_once() {
    let plan = local_plan(&["--devices-per-node", "2"], no_gpus);
    assert_eq!(
        plan.warnings,
        ["no GPU found on this host; the 2 ranks run on CPU"]
    );
    let plan = local_plan(&["-n", "1", "--devices-per-node", "2"], no_gpus);
    assert_eq!(
        plan.warnings,
        ["no GPU found on this host; the rank runs on CPU"]
    );
    assert!(local_plan(&["--devices-per-node", "2"], four_gpus)
        .warnings
        .is_empty());
    // No GPU asked for, GPUs hidden on purpose, or ranks on other hosts: nothing to
    // warn about, and no reason to look for GPUs.
    for args in [
        &[][..],
        &["-n", "2"],
        &["--n-per-node", "2"],
        &["--devices-per-node", "2", "--no-gpu"],
    ] {
        let plan = local_plan(args, gpus_must_not_be_looked_for);
        assert!(plan.warnings.is_empty(), "{args:?}: {:?}", plan.warnings);
    }
    let slurm = Plan::for_host(
        &cli(&["--devices-per-node", "2"]),
        true,
        gpus_must_not_be_looked_for,
    )
    .unwrap();
    assert!(slurm.warnings.is_empty());
}

#[test]
fn dry_run_says_how_ranks_get_their_gpus() {
    let rank_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let hidden = describe(&local_plan(&["-n", "2", "--no-gpu"], no_gpus), &[]).unwrap();
    assert!(
        hidden.contains("# GPUs: hidden by --no-gpu (CUDA_VISIBLE_DEVICES= on every rank)"),
        "{hidden}"
    );
    let lines = rank_lines(&hidden);
    assert_eq!(lines.len(), 2, "{hidden}");
    assert!(
        lines.iter().all(|l| crate::shell::split(l)
            .unwrap()
            .contains(&"CUDA_VISIBLE_DEVICES=".to_string())),
        "{hidden}"
    );

    let shared = describe(&local_plan(&["-n", "2"], four_gpus), &[]).unwrap();
    assert!(
        shared.contains("# GPUs: none assigned by tarantella; every rank "),
        "{shared}"
    );
    assert!(
        shared.contains("the trainer uses visible GPU number (GASPI_LOCAL_RANK mod their count)"),
        "{shared}"
    );
    assert!(
        rank_lines(&shared)
            .iter()
            .all(|l| !l.contains("CUDA_VISIBLE_DEVICES")),
        "{shared}"
    );

    let exported = describe(
        &local_plan(&["--no-gpu", "-x", "CUDA_VISIBLE_DEVICES=3,5"], no_gpus),
        &[],
    )
    .unwrap();
    assert!(
        exported.contains("every rank gets CUDA_VISIBLE_DEVICES=3,5 from -x"),
        "{exported}"
    );
}

#[test]
fn exports_cannot_replace_the_launchers_own_variables() {
    for var in [
        "GASPI_RANK",
        "GASPI_NRANKS",
        "GASPI_LOCAL_RANK",
        "GASPI_LOCAL_NRANKS",
        "GASPI_RENDEZVOUS",
        "GASPI_JOB_TOKEN",
        "GASPI_JOB_ID",
        "GASPI_INIT_TIMEOUT_MS",
        "GASPI_TRANSPORT",
        "GASPI_HEARTBEAT_TIMEOUT_MS",
        "TARANTELLA_JOB_ID",
    ] {
        let secret = "00112233445566778899aabbccddeeff";
        let export = format!("{var}={secret}");
        let refused = Plan::for_host(&cli(&["-x", &export]), false, no_gpus);
        let message = refused.as_ref().err().map(ToString::to_string);
        assert!(
            matches!(refused, Err(Error::LauncherVariable { var: v, .. }) if v == var),
            "{var}: {message:?}"
        );
        let message = message.unwrap_or_default();
        assert!(message.contains(var), "{message}");
        assert!(!message.contains(secret), "the value is shown: {message}");
    }
    // Not the job's wiring: a finer log filter, the GPUs, the user's own variables.
    for allowed in [
        "GASPI_LOG=gaspi=debug",
        "CUDA_VISIBLE_DEVICES=1",
        "GASPI_X=1",
    ] {
        assert!(env::parse_export(allowed, |_| None).is_ok(), "{allowed}");
    }
}

/// A plan for `args` with a hostfile of `hosts` (ssh mode; nothing is contacted).
fn ssh_plan(hosts: &str, args: &[&str]) -> Result<Plan> {
    ssh_plan_via("--hostfile", hosts, args)
}

/// [`ssh_plan`] with the hostfile given by `flag` (`--hostfile`, `-m`, `--machinefile`).
fn ssh_plan_via(flag: &str, hosts: &str, args: &[&str]) -> Result<Plan> {
    let dir = std::env::temp_dir().join(format!(
        "tnt-plan-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("hosts");
    std::fs::write(&path, hosts).unwrap();
    let mut all = vec![flag, path.to_str().unwrap()];
    all.extend(args);
    let plan = Plan::for_host(&cli(&all), false, gpus_must_not_be_looked_for);
    std::fs::remove_dir_all(&dir).unwrap();
    plan
}

#[test]
fn ranks_per_host_above_a_hosts_slots_is_an_error_naming_the_host() {
    let hosts = "big slots=4\nsmall slots=2\nopen\n";
    for flag in ["--n-per-node", "--devices-per-node"] {
        let err = ssh_plan(hosts, &[flag, "3"]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{flag} 3 is more than the 2 slots of host small")),
            "{err}"
        );
        // Also when -n would not need the small host's slots: the request is wrong as such.
        assert!(ssh_plan(hosts, &[flag, "3", "-n", "3"]).is_err());
    }
    // Within every host's slots, or hosts without slots=: block placement as asked.
    let plan = ssh_plan(hosts, &["--n-per-node", "2"]).unwrap();
    let per_host: Vec<(String, usize)> = plan
        .ranks
        .iter()
        .filter(|r| r.local_rank == 0)
        .map(|r| (r.host.clone().unwrap(), r.local_nranks))
        .collect();
    assert_eq!(
        per_host,
        [("big".into(), 2), ("small".into(), 2), ("open".into(), 2)]
    );
    assert_eq!(ssh_plan(hosts, &[]).unwrap().nranks, 4 + 2 + 1);
}

/// (host, local rank, local ranks) of every rank, in rank order.
fn placement(plan: &Plan) -> Vec<(String, usize, usize)> {
    plan.ranks
        .iter()
        .map(|r| (r.host.clone().unwrap(), r.local_rank, r.local_nranks))
        .collect()
}

#[test]
fn hosts_on_the_command_line_are_placed_like_a_hostfile_and_start_through_ssh() {
    let plan = Plan::for_host(
        &cli(&["-H", "a:2,b", "-H", "a"]),
        true,
        gpus_must_not_be_looked_for,
    )
    .unwrap();
    assert_eq!(plan.mode, Mode::Ssh, "-H wins over a Slurm allocation");
    assert_eq!(
        placement(&plan),
        [
            ("a".into(), 0, 3),
            ("a".into(), 1, 3),
            ("a".into(), 2, 3),
            ("b".into(), 0, 1)
        ]
    );
    let err = Plan::for_host(&cli(&["-H", "a:1", "--n-per-node", "2"]), false, no_gpus)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--n-per-node 2 is more than the 1 slots of host a"),
        "{err}"
    );
    let conflict = Cli::try_parse_from(["tarantella", "-H", "a", "--hostfile", "h", "--", "p"]);
    assert_eq!(
        conflict.unwrap_err().kind(),
        clap::error::ErrorKind::ArgumentConflict
    );
}

#[test]
fn a_gpi2_machine_file_places_a_rank_per_line() {
    for flag in ["--hostfile", "-m", "--machinefile"] {
        let plan = ssh_plan_via(flag, "n1\nn1\nn2\nn2\n", &[]).unwrap();
        assert_eq!(
            placement(&plan),
            [
                ("n1".into(), 0, 2),
                ("n1".into(), 1, 2),
                ("n2".into(), 0, 2),
                ("n2".into(), 1, 2)
            ],
            "{flag}"
        );
    }
}

#[test]
fn max_slots_is_the_limit_for_ranks_per_host() {
    let hosts = "a slots=2 max_slots=4\nb slots=2\n";
    let err = ssh_plan(hosts, &["--n-per-node", "5"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--n-per-node 5 is more than the 4 max_slots of host a"),
        "{err}"
    );
    let err = ssh_plan(hosts, &["--n-per-node", "3"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--n-per-node 3 is more than the 2 slots of host b"),
        "{err}"
    );
    let plan = ssh_plan("a slots=2 max_slots=4\n", &["--n-per-node", "3"]).unwrap();
    assert_eq!(plan.nranks, 3);
    // Without --n-per-node a host gets its slots, not its max_slots.
    assert_eq!(ssh_plan(hosts, &[]).unwrap().nranks, 4);
}

#[test]
fn one_log_level_reaches_runtime_and_trainer_on_rank_zero_and_errors_elsewhere() {
    let level_of = |vars: &[(String, String)], key: &str| -> Vec<String> {
        vars.iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let plan = local_plan(&["-n", "2", "--log-level", "info"], no_gpus);
    for (r, want) in [(0, "info"), (1, "error")] {
        let vars = plan.rank_env(&plan.ranks[r]);
        assert_eq!(level_of(&vars, genv::LOG), [want], "rank {r}");
        assert_eq!(level_of(&vars, tnt_env::LOG), [want], "rank {r}");
        assert!(vars.iter().all(|(k, _)| !k.starts_with("TNT_LOG_")));
    }
    let plan = local_plan(&["-n", "2", "--log-on-all-devices"], no_gpus);
    let vars = plan.rank_env(&plan.ranks[1]);
    assert_eq!(
        level_of(&vars, tnt_env::LOG),
        ["warn"],
        "the default level, on every rank"
    );
}

/// The value of `var` in `vars` (the last one, as applied).
fn value<'a>(vars: &'a [(String, String)], var: &str) -> Option<&'a str> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == var)
        .map(|(_, v)| v.as_str())
}

/// `vars`' values of `names`, `-` for an unset one.
fn values(vars: &[(String, String)], names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| value(vars, n).unwrap_or("-").to_string())
        .collect()
}

const TORCHRUN: [&str; 7] = TORCHRUN_VARIABLES;

#[test]
fn ranks_get_torchruns_variables() {
    let mut plan = local_plan(&["-n", "3"], no_gpus);
    let env = plan.rank_env(&plan.ranks[2]);
    assert_eq!(
        values(&env, &TORCHRUN),
        ["2", "3", "2", "3", "0", "127.0.0.1", "-"],
        "MASTER_PORT is only known at start"
    );
    plan.master_port = Some(23456);
    let env = plan.rank_env(&plan.ranks[0]);
    assert_eq!(
        values(&env, &TORCHRUN),
        ["0", "3", "0", "3", "0", "127.0.0.1", "23456"]
    );

    let mut plan = ssh_plan("user@a slots=2\nb slots=2\n", &["-n", "3"]).unwrap();
    plan.master_port = Some(23456);
    let env = plan.rank_env(&plan.ranks[2]);
    assert_eq!(
        values(&env, &TORCHRUN),
        ["2", "3", "0", "1", "1", "a", "23456"]
    );
    let plan = ssh_plan("a slots=2\nb slots=2\n", &["--map-by", "node"]).unwrap();
    let nodes: Vec<String> = plan
        .ranks
        .iter()
        .map(|r| values(&plan.rank_env(r), &["RANK", "LOCAL_RANK", "NODE_RANK"]).join(" "))
        .collect();
    assert_eq!(nodes, ["0 0 0", "1 0 1", "2 1 0", "3 1 1"]);
}

#[test]
fn torchruns_variables_cannot_be_exported_over() {
    for var in TORCHRUN {
        let export = format!("{var}=7");
        let refused = Plan::for_host(&cli(&["-x", &export]), false, no_gpus);
        assert!(
            matches!(refused, Err(Error::LauncherVariable { var: v, .. }) if v == var),
            "{var}: {refused:?}"
        );
    }
}

const GPI2: [&str; 5] = [
    "GASPI_RANK",
    "GASPI_NRANKS",
    "GASPI_SOCKET",
    "GASPI_MASTER",
    "GASPI_MFILE",
];

#[test]
fn ranks_get_gpi2s_variables_and_the_machine_file_names_each_ranks_host() {
    let plan = local_plan(&["-n", "2"], no_gpus);
    let here = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(plan.machine_file, [here.clone(), here.clone()]);
    let mfile = plan.run_dir.join("machines").to_string_lossy().into_owned();
    let env = plan.rank_env(&plan.ranks[1]);
    assert_eq!(values(&env, &GPI2), ["1", "2", "1", &here, &mfile]);

    // ssh ranks: each wrapper writes the file on its host and sets GASPI_MFILE itself.
    let plan = ssh_plan("user@a slots=2\nb\n", &[]).unwrap();
    assert_eq!(plan.machine_file, ["a", "a", "b"]);
    let env = plan.rank_env(&plan.ranks[2]);
    assert_eq!(values(&env, &GPI2), ["2", "3", "0", "a", "-"]);
    let plan = ssh_plan("a slots=2\nb slots=2\n", &["--map-by", "node"]).unwrap();
    assert_eq!(plan.machine_file, ["a", "b", "a", "b"]);
    let sockets: Vec<String> = plan
        .ranks
        .iter()
        .map(|r| values(&plan.rank_env(r), &["GASPI_SOCKET"]).join(""))
        .collect();
    assert_eq!(sockets, ["0", "0", "1", "1"]);
}

#[test]
fn a_rank_beyond_gpi2s_256_per_host_gets_no_socket() {
    let plan = local_plan(&["-n", "257"], no_gpus);
    let env = plan.rank_env(&plan.ranks[255]);
    assert_eq!(value(&env, "GASPI_SOCKET"), Some("255"));
    let env = plan.rank_env(&plan.ranks[256]);
    assert_eq!(value(&env, "GASPI_SOCKET"), None);
}

#[test]
fn gaspi_runs_numa_flag_pins_ranks_and_tells_gpi2_programs() {
    let plan = ssh_plan("a slots=2\n", &["-N"]).unwrap();
    for r in &plan.ranks {
        let argv = plan.rank_argv(r);
        assert_eq!(argv[0], "numactl", "{argv:?}");
        assert!(argv[1].starts_with("--cpunodebind="), "{argv:?}");
        assert_eq!(value(&plan.rank_env(r), "GASPI_SET_NUMA_SOCKET"), Some("1"));
    }
    let plan = ssh_plan("a slots=2\n", &[]).unwrap();
    assert_eq!(
        value(&plan.rank_env(&plan.ranks[0]), "GASPI_SET_NUMA_SOCKET"),
        None
    );
    assert_ne!(plan.rank_argv(&plan.ranks[0])[0], "numactl");
}

#[test]
fn gaspi_runs_debug_flag_shows_all_output_at_debug_level() {
    let plan = local_plan(&["-n", "2", "-d"], no_gpus);
    assert!(plan.show_all_output);
    let env = plan.rank_env(&plan.ranks[0]);
    assert_eq!(values(&env, &["GASPI_LOG", "TNT_LOG"]), ["debug", "debug"]);
    let plan = local_plan(&["-n", "2", "-d", "--log-level", "error"], no_gpus);
    assert_eq!(
        value(&plan.rank_env(&plan.ranks[0]), "GASPI_LOG"),
        Some("debug")
    );
}

#[test]
fn gpi2s_variables_cannot_be_exported_over() {
    for var in [
        "GASPI_SOCKET",
        "GASPI_MFILE",
        "GASPI_MASTER",
        "GASPI_SET_NUMA_SOCKET",
    ] {
        let export = format!("{var}=x");
        let refused = Plan::for_host(&cli(&["-x", &export]), false, no_gpus);
        assert!(
            matches!(refused, Err(Error::LauncherVariable { var: v, .. }) if v == var),
            "{var}: {refused:?}"
        );
    }
}

#[test]
fn the_heartbeat_timeout_reaches_every_rank_only_when_given() {
    let heartbeat = |vars: &[(String, String)]| -> Vec<String> {
        vars.iter()
            .filter(|(k, _)| k == gaspi::env::HEARTBEAT_TIMEOUT_MS)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let plan = local_plan(&["-n", "3", "--heartbeat-timeout", "1"], no_gpus);
    for r in &plan.ranks {
        assert_eq!(heartbeat(&plan.rank_env(r)), ["1000"]);
    }
    assert_eq!(heartbeat(&plan.slurm_env()), ["1000"]);
    let plan = local_plan(&["-n", "3"], no_gpus);
    for r in &plan.ranks {
        assert!(heartbeat(&plan.rank_env(r)).is_empty());
    }
    assert!(heartbeat(&plan.slurm_env()).is_empty());
}
