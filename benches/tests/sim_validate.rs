//! `allreduce-sim --validate` compares the simulator with measurements: it reads the
//! measured median and, where a line lists them, every round's time, and says how far the
//! rounds spread and whether the prediction lies within them. A malformed line is an error
//! naming the line, not a panic or a silent skip.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use common::{run_within, text};

const LIMIT: Duration = Duration::from_secs(60);

/// A file holding `lines`, named after the test and this process.
fn file(name: &str, lines: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("sim-validate-{name}-{}.txt", std::process::id()));
    std::fs::write(&path, lines).unwrap();
    path
}

/// Runs `allreduce-sim --validate` with `runs` (paths, each maybe with `:NAME=VALUE`s).
fn validate_runs(runs: &[String]) -> Output {
    run_within(
        Command::new(env!("CARGO_BIN_EXE_allreduce-sim"))
            .arg("--validate")
            .args(runs),
        LIMIT,
    )
}

/// Runs `allreduce-sim --validate` on a file holding `lines`.
fn validate(name: &str, lines: &str) -> Output {
    let path = file(name, lines);
    let out = validate_runs(&[path.display().to_string()]);
    let _ = std::fs::remove_file(&path);
    out
}

/// The predicted time (µs) that `--validate` printed for the only point of a file.
fn predicted_us(stdout: &str) -> f64 {
    let row = stdout
        .lines()
        .find(|l| l.starts_with("shm "))
        .expect("a row for the point");
    row.split_whitespace().nth(7).unwrap().parse().unwrap()
}

#[test]
fn rounds_give_their_spread_and_whether_the_prediction_lies_within_them() {
    // The prediction of this point, from a line without rounds.
    let out = validate("bare", "# a comment\nshm 2 2 shm ring 1M 100\n");
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let p = predicted_us(&stdout);
    assert!(p > 0.0, "{stdout}");
    assert!(stdout.contains("# 1 points:"), "{stdout}");

    // Rounds around the prediction, and a median far from it: a miss within its rounds.
    let (lo, hi) = (p / 4.0, p * 4.0);
    let median = p * 2.0;
    let line = format!("shm 2 2 shm ring 1M {median} {lo},{median},{hi}\n");
    let out = validate("inside", &line);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("shm ")).unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(f[8], "-50", "{row}");
    let spread = (hi - lo) / median * 100.0;
    assert_eq!(f[9], format!("{spread:.0}"), "{row}");
    assert_eq!(f[10], "yes", "{row}");
    assert!(
        stdout.contains("of the 1 points outside 25% that list their rounds, 1 are predicted"),
        "{stdout}"
    );

    // Rounds that all lie above the prediction: outside them.
    let line = format!("shm 2 2 shm ring 1M {median} {median},{hi}\n");
    let out = validate("outside", &line);
    let stdout = text(&out.stdout);
    assert!(stdout.contains(" no\n"), "{stdout}");
    assert!(
        stdout.contains("list their rounds, 0 are predicted"),
        "{stdout}"
    );
}

/// The run's speed against the model: the median point's measured over predicted time,
/// and the points within 25% once every prediction is scaled by it.
#[test]
fn the_median_ratio_tells_a_uniformly_slower_run_from_misses() {
    let out = validate(
        "predictions",
        "shm 2 2 shm ring 1M 100\nshm 2 2 shm ring 4M 100\nshm 2 2 shm ring 16M 100\n",
    );
    let stdout = text(&out.stdout);
    let rows: Vec<f64> = stdout
        .lines()
        .filter(|l| l.starts_with("shm "))
        .map(|l| l.split_whitespace().nth(7).unwrap().parse().unwrap())
        .collect();
    // Measured 1.5 times the prediction at every point but one, which is 3 times it.
    let lines = format!(
        "shm 2 2 shm ring 1M {}\nshm 2 2 shm ring 4M {}\nshm 2 2 shm ring 16M {}\n",
        rows[0] * 1.5,
        rows[1] * 1.5,
        rows[2] * 3.0,
    );
    let out = validate("slower", &lines);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# 3 points: 0 within 25%"), "{stdout}");
    assert!(
        stdout.contains("measured / predicted at the median point: 1.50; with every prediction scaled by it, 2 within 25%"),
        "{stdout}"
    );
}

/// Several runs: each point against the geometric mean of the runs' medians, each run's
/// own summary, and how far the runs agree with each other. A run's own parameters apply
/// to it alone.
#[test]
fn several_runs_are_pooled_and_their_agreement_is_reported() {
    let p = predicted_us(&text(
        &validate("pool-bare", "shm 2 2 shm ring 1M 100\n").stdout,
    ));
    // Half the prediction in one run, twice it in the other: pooled, exactly it.
    let slow = file("pool-slow", &format!("shm 2 2 shm ring 1M {}\n", p * 2.0));
    let fast = file("pool-fast", &format!("shm 2 2 shm ring 1M {}\n", p / 2.0));
    let runs = [slow.display().to_string(), fast.display().to_string()];
    let out = validate_runs(&runs);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("shm ")).unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    // Runs, pooled measured, predicted, error, the runs' range, inside it.
    assert_eq!(f[6], "2", "{row}");
    // The prediction as printed (to 0.1 µs) against the exact one: within a percent.
    let err: f64 = f[9].parse().unwrap();
    assert!(err.abs() < 1.0, "{row}");
    assert_eq!(f[12], "yes", "{row}");
    for run in &runs {
        let summary = format!("# run {run}: 1 points: 0 within 25%");
        assert!(stdout.contains(&summary), "{stdout}");
    }
    // Each run is 4 times or a quarter of the other.
    assert!(
        stdout.contains("; 0 of 1 within 25% of the other runs pooled"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# pooled over 2 runs: 1 points: 1 within 25%"),
        "{stdout}"
    );

    // One core instead of two, for the fast run alone: its prediction changes, so the
    // pooled prediction does.
    let runs = [runs[0].clone(), format!("{}:cores=1", runs[1])];
    let out = validate_runs(&runs);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("shm ")).unwrap();
    let err: f64 = row.split_whitespace().nth(9).unwrap().parse().unwrap();
    assert!(err.abs() >= 1.0, "{stdout}");
    // A parameter the model does not have is an error naming it.
    let out = validate_runs(&[runs[0].clone(), format!("{}:no_such=1", slow.display())]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(text(&out.stderr).contains("no_such"), "{out:?}");
    let _ = std::fs::remove_file(&slow);
    let _ = std::fs::remove_file(&fast);
}

#[test]
fn malformed_lines_are_errors_naming_the_line() {
    for (name, line) in [
        ("words", "shm 2 2 shm ring 1M 100 1,x,3"),
        ("negative", "shm 2 2 shm ring 1M 100 1,-2,3"),
        ("zero", "shm 2 2 shm ring 1M 0"),
        ("short", "shm 2 2 shm ring 1M"),
        ("long", "shm 2 2 shm ring 1M 100 1,2 extra"),
        ("machine", "nowhere 2 2 shm ring 1M 100"),
    ] {
        let out = validate(name, &format!("{line}\n"));
        assert_eq!(out.status.code(), Some(1), "{name}: {out:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("cannot read line"), "{name}: {stderr}");
        assert!(stderr.contains(line), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

#[test]
fn a_reader_that_stops_early_ends_the_program_quietly() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;
    use std::sync::mpsc;

    let mut child = Command::new(env!("CARGO_BIN_EXE_allreduce-sim"))
        .args(["--machine", "shm", "--ranks", "3", "-b", "4", "-e", "1G"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line and go, as `| head -1` does.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("# machine shm"), "{first}");
    // Its standard error ends when it exits: the signal to wait for, with a deadline.
    let mut stderr = child.stderr.take().unwrap();
    let (done, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        let _ = done.send(bytes);
    });
    let Ok(stderr) = exited.recv_timeout(LIMIT) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("allreduce-sim went on writing to a closed pipe");
    };
    let status = child.wait().unwrap();
    let stderr = text(&stderr);
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--show-params` prints the machine's parameters as `--param` takes them (what
/// `benches/sim/fit.py` starts from), overrides applied.
#[test]
fn a_machine_shows_its_parameters_as_param_takes_them() {
    let out = run_within(
        Command::new(env!("CARGO_BIN_EXE_allreduce-sim")).args([
            "--machine",
            "xeon-shm",
            "--show-params",
            "--param",
            "net_alpha=1e-6",
        ]),
        LIMIT,
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let lines: Vec<(&str, f64)> = stdout
        .lines()
        .map(|l| {
            let (name, value) = l.split_once('=').expect(l);
            (name, value.parse().expect(l))
        })
        .collect();
    assert!(lines.contains(&("net_alpha", 1e-6)), "{stdout}");
    assert!(
        lines.contains(&("llc_bytes", (300u64 << 20) as f64)),
        "{stdout}"
    );
    assert!(lines.len() > 20, "{stdout}");
}

/// A measured point is the time per run of one of the sweep's timed batches, and the
/// validation replays that batch: from 16 MiB up five runs, whose first starts every rank
/// at once and whose last no next run overlaps, not the steady state the choice table uses.
#[test]
fn points_are_replayed_as_the_batches_that_measured_them() {
    use allreduce::sim::{predict, predict_batch, Cluster, Intra, Machine};
    use allreduce::Algorithm;
    use tarantella_benches::validation::{measured_batch, MEASURED_BUDGET};

    let dir = env!("CARGO_MANIFEST_DIR");
    let measure = std::fs::read_to_string(format!("{dir}/sim/measure.sh")).unwrap();
    assert!(
        measure.contains(&format!("--budget {}M", MEASURED_BUDGET >> 20)),
        "measure.sh's batches are not the validation's"
    );
    // The netns points (16 and 64 MiB) are timed in batches of 5.
    let netns = std::fs::read_to_string(format!("{dir}/netns/run.sh")).unwrap();
    assert!(
        netns.contains("-n 5 "),
        "netns/run.sh's batches are not the validation's"
    );
    assert_eq!((measured_batch(16 << 20), measured_batch(64 << 20)), (5, 5));
    assert_eq!(measured_batch(4096), 2000);

    let out = validate("batch", "xeon-tcp 2 2 tcp rabenseifner 16M 7000\n");
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let row = stdout.lines().find(|l| l.starts_with("xeon-tcp ")).unwrap();
    let printed: f64 = row.split_whitespace().nth(7).unwrap().parse().unwrap();
    let (c, m) = (
        Cluster {
            ranks: 2,
            per_host: 2,
            intra: Intra::Tcp,
        },
        Machine::xeon_tcp(),
    );
    let rab = Algorithm::Rabenseifner;
    let batch = predict_batch(rab, &c, 16 << 20, 4, &m, 5).unwrap().seconds * 1e6;
    let steady = predict(rab, &c, 16 << 20, 4, &m).unwrap().seconds * 1e6;
    assert_eq!(format!("{printed:.1}"), format!("{batch:.1}"), "{row}");
    // A point where the batch's first and last runs do not average out to the steady
    // state, so that the line above tells the two apart.
    assert!((batch / steady - 1.0).abs() > 0.05, "{batch} {steady}");
}
