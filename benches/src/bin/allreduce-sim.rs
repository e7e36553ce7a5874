//! Predicted allreduce times from the simulator (`allreduce::sim`): every rank's real
//! schedule replayed on a calibrated model of the machine.
//!
//! ```text
//! allreduce-sim --machine cluster-10gbit --ranks 64 --per-host 8 -b 4 -e 1G -f 4
//! allreduce-sim --choice-table
//! allreduce-sim --validate docs/sim-validation-20b.txt
//! allreduce-sim --validate docs/sim-validation-24.txt:llc_bytes=0 docs/sim-validation-29.txt
//! ```

use std::io::Write;
use std::process::ExitCode;

use allreduce::sim::{self, Cluster, Intra, Machine, Prediction};
use allreduce::Algorithm;
use clap::{Parser, ValueEnum};
use tarantella_benches::validation::{self, Compared};
use tarantella_benches::{median, parse_size};

/// Transport between ranks of one host.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Transport {
    /// Shared memory.
    Shm,
    /// TCP over loopback.
    Tcp,
}

/// Predicted allreduce time and busbw per algorithm, from the simulator.
#[derive(Parser, Debug)]
#[command(name = "allreduce-sim", version)]
struct Args {
    /// Machine model, a preset: shm, tcp (the AMD EPYC VM), xeon-shm, xeon-tcp (the Intel
    /// Xeon VM), netns-2gbit, cluster-10gbit
    #[arg(long, default_value = "cluster-10gbit")]
    machine: String,
    /// Ranks in the group
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Ranks per host [default: all on one host]
    #[arg(long)]
    per_host: Option<usize>,
    /// Transport between ranks of a host
    #[arg(long, value_enum, default_value = "shm")]
    transport: Transport,
    /// Smallest size in bytes (K, M, G suffixes)
    #[arg(short = 'b', long = "minbytes", default_value = "4", value_parser = parse_size)]
    min_bytes: usize,
    /// Largest size in bytes
    #[arg(short = 'e', long = "maxbytes", default_value = "1G", value_parser = parse_size)]
    max_bytes: usize,
    /// Size factor between rows
    #[arg(short = 'f', long = "stepfactor", default_value_t = 4)]
    factor: usize,
    /// Bytes per element (4: f32)
    #[arg(long, default_value_t = 4)]
    elem: usize,
    /// Print the automatic choice for n = 2..1024, k = 1, 2, 4, 8, 4 B..1 GiB instead
    #[arg(long)]
    choice_table: bool,
    /// Print the machine's parameters instead, `NAME=VALUE` per line as `--param` takes
    /// them (after any `--param`)
    #[arg(long)]
    show_params: bool,
    /// Compare with measured runs, each a file of lines `machine ranks per_host shm|tcp
    /// algorithm bytes measured_us [round_us,round_us,...]` ('#' starts a comment), and
    /// optionally `:NAME=VALUE,...` parameters for that run alone. Each point is replayed
    /// as the timed batch that measured it (`allreduce-sweep --budget 64M`'s runs, from a
    /// barrier). One run: every point against its median. Several: every point against
    /// the geometric mean of the runs' medians, each run's summary, and how far the runs
    /// agree with each other
    #[arg(long, num_args = 1.., value_name = "FILE[:NAME=VALUE,...]")]
    validate: Vec<String>,
    /// Overrides one parameter of the machine model, `NAME=VALUE` in the field's unit
    /// (seconds, bytes/s, bytes), e.g. `--param net_alpha=15e-6`; repeatable. With
    /// `--validate`, applies to every line's machine
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
}

/// Why a mode failed: bad input (a message naming it), or standard output that could not be
/// written (told apart so that a reader that stops early, as `head` does, ends the program
/// quietly instead of a panic in `println!`).
enum Failure {
    Input(String),
    Output(std::io::Error),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Input(message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Output(e)
    }
}

/// Short name of an algorithm, as `--algorithm` spells it.
fn name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Auto => "auto",
        Algorithm::Ring => "ring",
        Algorithm::RecursiveDoubling => "rd",
        Algorithm::Rabenseifner => "rabenseifner",
        Algorithm::Hierarchical => "hierarchical",
        Algorithm::OneShot => "one-shot",
        Algorithm::SingleCopy => "single-copy",
    }
}

/// One letter per algorithm for the choice table.
fn letter(a: Algorithm) -> char {
    match a {
        Algorithm::Ring => 'R',
        Algorithm::RecursiveDoubling => 'D',
        Algorithm::Rabenseifner => 'B',
        Algorithm::Hierarchical => 'H',
        Algorithm::SingleCopy => 'S',
        Algorithm::OneShot => 'O',
        Algorithm::Auto => 'A',
    }
}

/// `bytes` with a binary suffix.
fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => format!("{b}"),
    }
}

/// Sizes from `min` to `max`, times `factor`.
fn sizes(min: usize, max: usize, factor: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut b = min.max(1);
    while b <= max {
        v.push(b);
        b = b.saturating_mul(factor.max(2));
    }
    v
}

/// The table of every algorithm per size, best marked `*`, the runtime's choice `<`.
fn per_algorithm(out: &mut impl Write, args: &Args, machine: &Machine) -> Result<(), Failure> {
    let c = Cluster {
        ranks: args.ranks,
        per_host: args.per_host.unwrap_or(args.ranks),
        intra: match args.transport {
            Transport::Shm => Intra::Shm,
            Transport::Tcp => Intra::Tcp,
        },
    };
    writeln!(out,
        "# machine {}, {} ranks, {} per host ({} hosts), {:?} inside hosts; time us (busbw GB/s); * fastest Auto candidate, < runtime's choice",
        machine.name, c.ranks, c.per_host, c.hosts(), c.intra
    )?;
    write!(out, "{:>6}", "size")?;
    for a in sim::ALL {
        write!(out, " {:>22}", name(*a))?;
    }
    writeln!(out)?;
    for bytes in sizes(args.min_bytes, args.max_bytes, args.factor) {
        let runtime = sim::runtime_choice(&c, bytes);
        let (best, _) = sim::best(&c, bytes, args.elem, machine).map_err(|e| e.to_string())?;
        write!(out, "{:>6}", size(bytes))?;
        for a in sim::ALL {
            let cell = match sim::predict(*a, &c, bytes, args.elem, machine) {
                Ok(Prediction { seconds, busbw, .. }) => {
                    let mark = match (*a == best.algorithm, *a == runtime) {
                        (true, true) => "*<",
                        (true, false) => "* ",
                        (false, true) => " <",
                        _ => "  ",
                    };
                    format!("{:.1} ({:.2}){mark}", seconds * 1e6, busbw / 1e9)
                }
                Err(sim::SimError::Infeasible { .. }) => "-  ".into(),
                Err(e) => return Err(e.to_string().into()),
            };
            write!(out, " {cell:>22}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Ranks of the choice table.
const TABLE_RANKS: &[usize] = &[2, 3, 4, 6, 8, 12, 16, 32, 48, 64, 128, 256, 512, 1024];

/// The automatic choice over n, k and sizes: the fastest algorithm's letter, followed by
/// the runtime's in lower case where the runtime's is more than 5% slower.
fn choice_table(out: &mut impl Write, args: &Args, machine: &Machine) -> Result<(), Failure> {
    let sizes = sizes(4, 1 << 30, 4);
    writeln!(out,
        "# machine {}: fastest of rd (D), Rabenseifner (B), ring (R), hierarchical (H), single-copy (S);",
        machine.name
    )?;
    writeln!(
        out,
        "# a lower-case letter after it: the runtime's choice, where that is >5% slower"
    )?;
    for k in [1, 2, 4, 8] {
        writeln!(out, "\nk = {k} per host")?;
        write!(out, "{:>5} |", "n")?;
        for b in &sizes {
            write!(out, "{:>5}", size(*b))?;
        }
        writeln!(out)?;
        for &n in TABLE_RANKS {
            write!(out, "{n:>5} |")?;
            for &bytes in &sizes {
                let c = Cluster::new(n, k);
                let (best, all) =
                    sim::best(&c, bytes, args.elem, machine).map_err(|e| e.to_string())?;
                let runtime = sim::runtime_choice(&c, bytes);
                let rt = all.iter().find(|p| p.algorithm == runtime);
                let cell = match rt {
                    Some(p) if p.seconds > 1.05 * best.seconds => {
                        format!(
                            "{}{}",
                            letter(best.algorithm),
                            letter(runtime).to_ascii_lowercase()
                        )
                    }
                    Some(_) => format!("{}", letter(runtime)),
                    None => format!("{}?", letter(best.algorithm)),
                };
                write!(out, "{cell:>5}")?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// A validation file's points with their predictions: the machine of each line with
/// `params` applied, then the run's own; each point replayed as the timed batch that
/// measured it.
fn predicted(
    arg: &str,
    elem: usize,
    params: &[String],
) -> Result<(Vec<validation::Line>, Vec<Compared>), Failure> {
    let (path, own) = validation::split_run(arg);
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let lines = validation::parse(path, &text)?;
    let mut compared = Vec::with_capacity(lines.len());
    for l in &lines {
        let bad = || format!("{path}: cannot read line {:?}", l.text);
        let mut machine = Machine::preset(&l.machine).ok_or_else(bad)?;
        apply(&mut machine, params)?;
        apply(&mut machine, &own)?;
        let c = Cluster {
            ranks: l.ranks,
            per_host: l.per_host,
            intra: if l.transport == "tcp" {
                Intra::Tcp
            } else {
                Intra::Shm
            },
        };
        let alg = sim::ALL
            .iter()
            .find(|x| name(**x) == l.algorithm)
            .copied()
            .ok_or_else(bad)?;
        let bytes = parse_size(&l.bytes)?;
        let iters = validation::measured_batch(bytes);
        let p =
            sim::predict_batch(alg, &c, bytes, elem, &machine, iters).map_err(|e| e.to_string())?;
        compared.push(Compared {
            point: l.point.clone(),
            measured_us: l.measured_us,
            predicted_us: p.seconds * 1e6,
        });
    }
    Ok((lines, compared))
}

/// The summary of `(measured, predicted)` pairs: points, within 25%, mean and largest
/// error, as `--validate` prints it.
fn summary(pairs: impl Iterator<Item = (f64, f64)>) -> String {
    let (mut points, mut within, mut sum, mut worst) = (0usize, 0usize, 0.0f64, 0.0f64);
    for (measured, predicted) in pairs {
        let err = (predicted / measured - 1.0).abs() * 100.0;
        points += 1;
        within += usize::from(err <= 25.0);
        sum += err;
        worst = worst.max(err);
    }
    format!(
        "{points} points: {within} within 25%, mean error {:.0}%, largest {worst:.0}%",
        sum / points.max(1) as f64
    )
}

/// Measured over predicted at the median point, and the points within 25% once every
/// prediction is scaled by it. Why: this VM's speed drifts between runs, uniformly across
/// sizes and transports (docs/allreduce.md, "Simulator", session 30), which no fixed
/// machine follows; this tells that drift from the model's own misses.
fn speed(compared: &[Compared]) -> (f64, usize) {
    let slower: Vec<f64> = compared
        .iter()
        .map(|c| c.measured_us / c.predicted_us)
        .collect();
    let speed = median(slower.clone());
    // A prediction scaled by `speed` over the measured time is `speed / r`.
    let scaled = slower
        .iter()
        .filter(|&&r| (speed / r - 1.0).abs() <= 0.25)
        .count();
    (speed, scaled)
}

/// Predicted against measured for every line of one run. A line may end in every round's
/// time (comma-separated); the comparison then also says how far the rounds spread and
/// whether the prediction lies within them, so a miss can be told from a noisy point.
fn validate_run(
    out: &mut impl Write,
    arg: &str,
    elem: usize,
    params: &[String],
) -> Result<(), Failure> {
    let (lines, compared) = predicted(arg, elem, params)?;
    writeln!(
        out,
        "machine ranks per_host transport algorithm bytes measured_us predicted_us error_% \
         [rounds_spread_% in_rounds]"
    )?;
    // Points outside 25%, and those of them whose prediction lies within their rounds.
    let (mut missed, mut missed_in_rounds) = (0usize, 0usize);
    for (l, c) in lines.iter().zip(&compared) {
        let (measured, predicted) = (c.measured_us, c.predicted_us);
        let err = (predicted / measured - 1.0) * 100.0;
        let mut row = format!("{} {measured:.1} {predicted:.1} {err:+.0}", c.point);
        if let Some(rounds) = &l.rounds {
            let lo = rounds.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = rounds.iter().copied().fold(0.0, f64::max);
            let inside = (lo..=hi).contains(&predicted);
            if err.abs() > 25.0 {
                missed += 1;
                missed_in_rounds += usize::from(inside);
            }
            let spread = (hi - lo) / measured * 100.0;
            row += &format!(" {spread:.0} {}", if inside { "yes" } else { "no" });
        }
        writeln!(out, "{row}")?;
    }
    let pairs = compared.iter().map(|c| (c.measured_us, c.predicted_us));
    writeln!(out, "# {}", summary(pairs))?;
    if missed > 0 {
        writeln!(
            out,
            "# of the {missed} points outside 25% that list their rounds, {missed_in_rounds} \
             are predicted within their rounds' range"
        )?;
    }
    if !compared.is_empty() {
        let (speed, scaled) = speed(&compared);
        writeln!(
            out,
            "# measured / predicted at the median point: {speed:.2}; with every prediction \
             scaled by it, {scaled} within 25%"
        )?;
    }
    Ok(())
}

/// Predicted against several runs pooled: per point the geometric mean of the runs'
/// medians and their range, then each run's own summary, and how far the runs reproduce
/// each other (`validation::reproduced`), the bound for any model against one run.
fn validate_pooled(
    out: &mut impl Write,
    args: &[String],
    elem: usize,
    params: &[String],
) -> Result<(), Failure> {
    let runs = args
        .iter()
        .map(|a| predicted(a, elem, params).map(|(_, c)| c))
        .collect::<Result<Vec<_>, _>>()?;
    writeln!(
        out,
        "machine ranks per_host transport algorithm bytes runs measured_us predicted_us \
         error_% runs_lo_us runs_hi_us in_runs"
    )?;
    let pooled = validation::pool(&runs);
    for p in &pooled {
        let err = (p.predicted_us / p.measured_us - 1.0) * 100.0;
        let inside = (p.lo_us..=p.hi_us).contains(&p.predicted_us);
        writeln!(
            out,
            "{} {} {:.1} {:.1} {err:+.0} {:.1} {:.1} {}",
            p.point,
            p.runs,
            p.measured_us,
            p.predicted_us,
            p.lo_us,
            p.hi_us,
            if inside { "yes" } else { "no" }
        )?;
    }
    let reproduced = validation::reproduced(&runs, 0.25);
    for ((arg, run), (agree, shared)) in args.iter().zip(&runs).zip(reproduced) {
        let (speed, scaled) = speed(run);
        let pairs = run.iter().map(|c| (c.measured_us, c.predicted_us));
        writeln!(
            out,
            "# run {arg}: {}; median measured / predicted {speed:.2} ({scaled} within 25% \
             scaled); {agree} of {shared} within 25% of the other runs pooled",
            summary(pairs)
        )?;
    }
    let pairs = pooled.iter().map(|p| (p.measured_us, p.predicted_us));
    writeln!(out, "# pooled over {} runs: {}", runs.len(), summary(pairs))?;
    Ok(())
}

/// Applies `--param NAME=VALUE` overrides to `machine`.
fn apply(machine: &mut Machine, params: &[String]) -> Result<(), String> {
    for p in params {
        let (name, value) = p
            .split_once('=')
            .ok_or_else(|| format!("--param {p:?}: expected NAME=VALUE"))?;
        machine.set(name, value).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(mut machine) = Machine::preset(&args.machine) else {
        eprintln!(
            "allreduce-sim: unknown machine {:?} (one of {:?})",
            args.machine,
            sim::PRESETS
        );
        return ExitCode::from(2);
    };
    if let Err(e) = apply(&mut machine, &args.params) {
        eprintln!("allreduce-sim: {e}");
        return ExitCode::from(2);
    }
    // Line-buffered, not block-buffered: the choice table's rows take minutes and show as
    // they are done.
    let mut out = std::io::stdout().lock();
    let r = if let [run] = &args.validate[..] {
        validate_run(&mut out, run, args.elem, &args.params)
    } else if !args.validate.is_empty() {
        validate_pooled(&mut out, &args.validate, args.elem, &args.params)
    } else if args.show_params {
        machine
            .params()
            .into_iter()
            .try_for_each(|(name, value)| writeln!(out, "{name}={value:e}"))
            .map_err(Failure::Output)
    } else if args.choice_table {
        choice_table(&mut out, &args, &machine)
    } else {
        per_algorithm(&mut out, &args, &machine)
    };
    let r = r.and_then(|()| out.flush().map_err(Failure::Output));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        // The reader has gone (`| head`): what it wanted was written.
        Err(Failure::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("allreduce-sim: writing the output: {e}");
            ExitCode::FAILURE
        }
        Err(Failure::Input(e)) => {
            eprintln!("allreduce-sim: {e}");
            ExitCode::FAILURE
        }
    }
}
