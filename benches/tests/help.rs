//! Every benchmark binary answers `--help` (exit 0, naming its flags) and refuses flags it
//! does not know (clap's exit status 2) instead of starting a benchmark.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{run_within, text};

const LIMIT: Duration = Duration::from_secs(30);

fn help_of(program: &str) -> String {
    let out = run_within(Command::new(program).arg("--help"), LIMIT);
    assert!(out.status.success(), "{program} --help: {out:?}");
    text(&out.stdout)
}

fn assert_refuses_unknown_flag(program: &str) {
    let out = run_within(Command::new(program).arg("--no-such-flag"), LIMIT);
    assert_eq!(out.status.code(), Some(2), "{program}: {out:?}");
    assert!(
        text(&out.stderr).contains("unexpected argument '--no-such-flag'"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "it must not start measuring");
}

#[test]
fn allreduce_sweep_help_lists_nccl_tests_flags() {
    let help = help_of(env!("CARGO_BIN_EXE_allreduce-sweep"));
    for flag in [
        "-b, --minbytes",
        "-e, --maxbytes",
        "-f, --stepfactor",
        "-i, --stepbytes",
        "-d, --datatype",
        "-o, --op",
        "-r, --root",
        "-n, --iters",
        "-w, --warmup_iters",
        "-c, --check",
        "-T, --timeout",
        "--ranks",
        "--transport",
        "--algorithm",
        "--collective",
        "--batches",
        "--budget",
        "bfloat16",
        "out-of-place",
    ] {
        assert!(help.contains(flag), "no {flag:?} in:\n{help}");
    }
    assert_refuses_unknown_flag(env!("CARGO_BIN_EXE_allreduce-sweep"));
}

#[test]
fn gaspi_p2p_help_lists_quick() {
    let help = help_of(env!("CARGO_BIN_EXE_gaspi-p2p"));
    assert!(help.contains("--quick"), "{help}");
    assert_refuses_unknown_flag(env!("CARGO_BIN_EXE_gaspi-p2p"));
}

#[test]
fn reduce_kernel_help_says_what_it_measures() {
    let help = help_of(env!("CARGO_BIN_EXE_reduce-kernel"));
    assert!(
        help.contains("copy_from_slice") && help.contains("--help"),
        "{help}"
    );
    assert_refuses_unknown_flag(env!("CARGO_BIN_EXE_reduce-kernel"));
}

#[test]
fn allreduce_sweep_rejects_bad_values_before_starting_ranks() {
    let sweep = env!("CARGO_BIN_EXE_allreduce-sweep");
    for (args, says) in [
        (&["-b", "64M", "-e", "4K"][..], "larger than --maxbytes"),
        (&["-d", "int8"], "no 8-bit types"),
        (&["-e", "1.5G"], "not a size"),
        (&["-f", "2", "-i", "1M"], "cannot be used with"),
        (&["--collective", "broadcast", "-r", "2"], "--root 2"),
    ] {
        let out = run_within(Command::new(sweep).args(args), LIMIT);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = text(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn allreduce_sim_help_lists_its_modes() {
    let help = help_of(env!("CARGO_BIN_EXE_allreduce-sim"));
    for flag in [
        "--machine",
        "--ranks",
        "--per-host",
        "--choice-table",
        "--validate",
    ] {
        assert!(help.contains(flag), "{flag} missing from {help}");
    }
    for preset in allreduce::sim::PRESETS {
        assert!(help.contains(preset), "preset {preset} missing from {help}");
    }
    assert_refuses_unknown_flag(env!("CARGO_BIN_EXE_allreduce-sim"));
}

#[test]
fn vm_speed_prints_three_positive_medians() {
    let program = env!("CARGO_BIN_EXE_vm-speed");
    assert!(help_of(program).contains("--samples"));
    assert_refuses_unknown_flag(program);
    let out = run_within(Command::new(program).args(["--samples", "1"]), LIMIT);
    assert!(out.status.success(), "{out:?}");
    let line = text(&out.stdout);
    let values: Vec<f64> = line
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect();
    assert_eq!(values.len(), 3, "{line}");
    assert!(values.iter().all(|v| *v > 0.0), "{line}");
}

#[test]
fn vm_speed_by_size_prints_a_copy_and_a_reduction_rate_per_growing_size() {
    let program = env!("CARGO_BIN_EXE_vm-speed");
    assert!(help_of(program).contains("--by-size"));
    let out = run_within(
        Command::new(program).args(["--by-size", "--samples", "1"]),
        LIMIT,
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let rows: Vec<Vec<f64>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            l.split_whitespace()
                .map(|v| v.parse().expect("a number"))
                .collect()
        })
        .collect();
    assert!(rows.len() >= 10, "{stdout}");
    assert!(
        rows.iter()
            .all(|r| r.len() == 3 && r.iter().all(|v| *v > 0.0)),
        "{stdout}"
    );
    assert!(rows.windows(2).all(|w| w[0][0] < w[1][0]), "{stdout}");
}
