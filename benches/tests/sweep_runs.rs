//! `allreduce-sweep` on 2 and 3 ranks over a tiny size range with results checked: started
//! by hand (it starts its own ranks) and by a launcher (`gaspi::testing::Job` sets the same
//! variables as `tarantella`). Each run checks nccl-tests' header, the column count of every
//! row and that no element is wrong.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{run_within, text};
use gaspi::testing::Job;

const SWEEP: &str = env!("CARGO_BIN_EXE_allreduce-sweep");
const LIMIT: Duration = Duration::from_secs(120);
/// Rank processes started by the binary itself are killed after this (`-T`), so that a
/// hung run ends before the test's own deadline.
const RANKS_TIMEOUT_SECS: &str = "90";

const COLUMN_NAMES: &str = "#       size         count      type   redop     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong";

/// 4, 128 and 4096 bytes, as few runs as give a figure.
const TINY: [&str; 12] = [
    "-b",
    "4",
    "-e",
    "4K",
    "-f",
    "32",
    "-n",
    "2",
    "-w",
    "1",
    "--batches",
    "1",
];
const TINY_SIZES: [usize; 3] = [4, 128, 4096];

/// Rows a sweep over [`TINY_SIZES`] prints for types of these sizes and `ops` reductions
/// (sizes smaller than one element are left out).
fn rows_for(type_sizes: &[usize], ops: usize) -> usize {
    let per_op: usize = type_sizes
        .iter()
        .map(|t| TINY_SIZES.iter().filter(|b| *b >= t).count())
        .sum();
    per_op * ops
}

const ALL_TYPE_SIZES: [usize; 8] = [4, 4, 8, 8, 2, 4, 8, 2];

/// Checks the table rank 0 printed; returns its rows' (type, redop) pairs.
fn assert_checked_table(stdout: &str, rows: usize) -> Vec<(String, String)> {
    let lines: Vec<&str> = stdout.lines().collect();
    let names_at = lines
        .iter()
        .position(|l| *l == COLUMN_NAMES)
        .unwrap_or_else(|| panic!("no nccl-tests column names in:\n{stdout}"));
    let groups = lines[names_at - 1];
    assert!(
        groups.starts_with('#') && groups.contains("out-of-place") && groups.contains("in-place"),
        "{groups:?}"
    );
    let units = lines[names_at + 1];
    assert!(
        units.starts_with("#        (B)    (elements)") && units.contains("(us)  (GB/s)  (GB/s)"),
        "{units:?}"
    );
    let table: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(table.len(), rows, "rows of:\n{stdout}");
    let mut kinds = Vec::new();
    for row in table {
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields.len(), 12, "{row:?}");
        for numeric in [0, 1, 4, 5, 6, 8, 9, 10] {
            let v: f64 = fields[numeric]
                .parse()
                .unwrap_or_else(|_| panic!("field {numeric} of {row:?}"));
            assert!(v >= 0.0 && v.is_finite(), "{row:?}");
        }
        assert_eq!((fields[7], fields[11]), ("0", "0"), "#wrong in {row:?}");
        kinds.push((fields[2].to_string(), fields[3].to_string()));
    }
    assert!(lines.contains(&"# Wrong elements       : 0 OK"), "{stdout}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("# Avg bus bandwidth    : ")),
        "{stdout}"
    );
    kinds
}

fn sweep_by_hand(args: &[&str]) -> String {
    let out = run_within(
        Command::new(SWEEP)
            .args(TINY)
            .args(["-c", "1", "-T", RANKS_TIMEOUT_SECS])
            .args(args),
        LIMIT,
    );
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {:?}\n{stdout}\n{}",
        out.status,
        text(&out.stderr)
    );
    stdout
}

fn sweep_under_launcher(nranks: u16, args: &[&str]) -> String {
    let mut job = Job::new(nranks, SWEEP);
    job.args = TINY
        .iter()
        .chain(&["-c", "1"])
        .chain(args)
        .map(|a| a.to_string())
        .collect();
    job.timeout = LIMIT;
    let outcome = job.run();
    outcome.assert_success();
    for other in &outcome.ranks[1..] {
        assert!(other.stdout.is_empty(), "rank {} printed", other.rank);
    }
    outcome.ranks[0].stdout.clone()
}

#[test]
fn by_hand_two_ranks_by_default_float_sum() {
    let stdout = sweep_by_hand(&[]);
    assert!(stdout.contains(", 2 ranks, transport shm"), "{stdout}");
    let kinds = assert_checked_table(&stdout, rows_for(&[4], 1));
    assert!(kinds.iter().all(|k| k == &("float".into(), "sum".into())));
}

#[test]
fn by_hand_three_ranks_every_type_and_reduction() {
    let stdout = sweep_by_hand(&["--ranks", "3", "-d", "all", "-o", "all"]);
    assert!(stdout.contains(", 3 ranks, "), "{stdout}");
    let kinds = assert_checked_table(&stdout, rows_for(&ALL_TYPE_SIZES, 5));
    for t in [
        "float", "double", "half", "bfloat16", "int32", "int64", "uint32", "uint64",
    ] {
        for op in ["sum", "prod", "min", "max", "avg"] {
            assert!(kinds.contains(&(t.into(), op.into())), "no {t} {op}");
        }
    }
}

#[test]
fn by_hand_three_ranks_bound_to_one_cpu_take_turns_on_it() {
    let stdout = sweep_by_hand(&["--ranks", "3", "--map-cpu", "0"]);
    assert!(
        stdout.contains(", 3 ranks, by rank on CPUs 0,0,0, transport shm"),
        "{stdout}"
    );
    assert_checked_table(&stdout, rows_for(&[4], 1));
}

#[test]
fn a_cpu_the_host_lacks_fails_the_ranks_and_is_named() {
    let out = run_within(
        Command::new(SWEEP)
            .args(TINY)
            .args(["-T", RANKS_TIMEOUT_SECS, "--map-cpu", "0,1023"]),
        LIMIT,
    );
    assert!(!out.status.success(), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("rank 1: --map-cpu: cannot bind to CPU 1023"),
        "{stderr}"
    );
}

#[test]
fn under_a_launcher_two_ranks_every_type_and_reduction_over_tcp() {
    let stdout = sweep_under_launcher(2, &["-d", "all", "-o", "all", "--transport", "tcp"]);
    assert!(stdout.contains(", 2 ranks, transport tcp"), "{stdout}");
    assert_checked_table(&stdout, rows_for(&ALL_TYPE_SIZES, 5));
}

#[test]
fn under_a_launcher_three_ranks_broadcast_from_the_last() {
    let stdout = sweep_under_launcher(3, &["--collective", "broadcast", "-r", "2", "-d", "all"]);
    assert!(
        stdout.contains("broadcast from rank 2, 3 ranks"),
        "{stdout}"
    );
    let kinds = assert_checked_table(&stdout, rows_for(&ALL_TYPE_SIZES, 1));
    assert!(kinds.iter().all(|(_, op)| op == "none"));
}

#[test]
fn under_a_launcher_ranks_must_match_the_job() {
    let mut job = Job::new(2, SWEEP);
    job.args = ["--ranks", "3"].map(String::from).to_vec();
    job.timeout = LIMIT;
    let outcome = job.run();
    for rank in &outcome.ranks {
        assert_eq!(
            rank.status.and_then(|s| s.code()),
            Some(2),
            "{}",
            outcome.report()
        );
        assert!(rank.stderr.contains("leave --ranks out"), "{}", rank.stderr);
    }
}
