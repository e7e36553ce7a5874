//! `allreduce-sweep`: nccl-tests' `all_reduce_perf` (or `broadcast_perf`) over this
//! workspace's collectives. [`cli`] is the command line, [`check`] the inputs and the
//! `#wrong` count, [`table`] the output, [`binding`] a rank's CPU (`--map-cpu`); [`run_rank`]
//! is what every rank runs.
//!
//! Our collectives own their buffer (a gaspi segment), so the two forms nccl-tests times
//! map onto the two ways of feeding it: out-of-place is `start_from(input)`, which copies
//! an input vector in and reduces it there (the input stays as it was, like NCCL's send
//! buffer); in-place is `start()` on the buffer as it stands, so each timed run reduces
//! the previous result, as NCCL's in-place runs do.

pub mod binding;
pub mod check;
pub mod cli;
pub mod table;

use std::sync::Arc;
use std::time::Instant;

use allreduce::{bf16, f16, Allreduce, Broadcast, DataType, Options, Reduction};
use gaspi::env::JobEnv;
use gaspi::{Config, Context, Group, Rank};

use crate::{max_over_ranks, sum_over_ranks, STEP_TIMEOUT};
use check::Sample;
use cli::{Collective, Step, SweepArgs};
use table::Measured;

/// The two forms nccl-tests reports side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    OutOfPlace,
    InPlace,
}

/// The collective under test, set up for one size, type and operation.
enum Under<T: Sample> {
    Allreduce(Allreduce<T>),
    Broadcast(Broadcast<T>),
}

impl<T: Sample> Under<T> {
    fn buffer_mut(&mut self) -> allreduce::Result<&mut [T]> {
        match self {
            Under::Allreduce(a) => a.input_mut(),
            Under::Broadcast(b) => b.buffer_mut(),
        }
    }

    fn start(&mut self, form: Form, input: &[T]) -> allreduce::Result<()> {
        match (self, form) {
            (Under::Allreduce(a), Form::OutOfPlace) => a.start_from(input),
            (Under::Allreduce(a), Form::InPlace) => a.start(),
            (Under::Broadcast(b), Form::OutOfPlace) => b.start_from(input),
            (Under::Broadcast(b), Form::InPlace) => b.start(),
        }
    }

    fn wait(&mut self) -> allreduce::Result<&[T]> {
        match self {
            Under::Allreduce(a) => a.wait(STEP_TIMEOUT),
            Under::Broadcast(b) => b.wait(STEP_TIMEOUT),
        }
    }

    fn run_once(&mut self, form: Form, input: &[T]) -> allreduce::Result<()> {
        self.start(form, input)?;
        self.wait().map(|_| ())
    }
}

type BoxError = Box<dyn std::error::Error>;

/// One printed row and its two measurements.
struct Row {
    text: String,
    forms: [Measured; 2],
}

/// What a whole sweep found, the same on every rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Wrong elements over all rows, forms and ranks; `None` with `--check 0`.
    pub wrong: Option<u64>,
}

/// The rank's side of one row: everything needed to set up and check the collective.
struct RowSpec<'a> {
    ctx: &'a Arc<Context>,
    args: &'a SweepArgs,
    op: Option<Reduction>,
    bytes: usize,
}

/// Runs the sweep on this rank of the job `env` describes (a `--transport` on the command
/// line replaces the job's); rank 0 prints the table.
pub fn run_rank(args: &SweepArgs, mut env: JobEnv) -> Result<Summary, BoxError> {
    if let Some(transport) = args.transport {
        env.transport = transport;
    }
    let transport = env.transport;
    let ctx = Arc::new(Context::init_job(Config::default(), env)?);
    let nranks = ctx.num_ranks();
    let prints = ctx.rank() == Rank(0);
    if prints {
        println!("{}", preamble(args, nranks, transport.as_str()));
        println!("{}", table::header());
    }
    let mut summary = Summary {
        wrong: (args.check > 0).then_some(0),
    };
    let mut busbw = Vec::new();
    for datatype in args.datatype.list() {
        for op in args.ops() {
            for bytes in args.sizes() {
                let spec = RowSpec {
                    ctx: &ctx,
                    args,
                    op,
                    bytes,
                };
                let Some(row) = sweep_row(datatype, &spec)? else {
                    continue;
                };
                if prints {
                    println!("{}", row.text);
                }
                for m in row.forms {
                    busbw.push(m.busbw);
                    if let (Some(total), Some(wrong)) = (summary.wrong.as_mut(), m.wrong) {
                        *total += wrong;
                    }
                }
            }
        }
    }
    if prints {
        println!("{}", table::footer(summary.wrong, &busbw));
    }
    // Nobody leaves while a peer may still read from its segments.
    ctx.barrier(Group::ALL, STEP_TIMEOUT)?;
    Ok(summary)
}

/// The lines above the table: what runs, on what, and how it is timed.
fn preamble(args: &SweepArgs, nranks: u16, transport: &str) -> String {
    let step = match args.step() {
        Step::Factor(f) => format!("{f}(factor)"),
        Step::Bytes(b) => format!("{b}(bytes)"),
    };
    let iters = args.iters.map_or_else(
        || format!("auto ({} B per batch)", args.budget),
        |n| n.to_string(),
    );
    let what = match args.collective {
        Collective::Allreduce => format!("allreduce, algorithm {}", args.algorithm.name()),
        Collective::Broadcast => format!("broadcast from rank {}", args.root),
    };
    let bound = if args.map_cpu.is_empty() {
        String::new()
    } else {
        let cpus: Vec<String> = (0..nranks)
            .filter_map(|r| args.cpu_for(Rank(r)))
            .map(|c| c.to_string())
            .collect();
        format!(", by rank on CPUs {}", cpus.join(","))
    };
    format!(
        "# allreduce-sweep: {what}, {nranks} ranks{bound}, transport {transport}\n\
         # minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {iters} batches: {} validation: {}\n\
         # time: the largest over ranks of each rank's median batch; out-of-place: start_from(input) \
         copies the input into the collective's buffer; in-place: runs on that buffer as it stands\n#",
        args.min_bytes, args.max_bytes, args.warmup_iters, args.batches, args.check
    )
}

/// One row of the table for `datatype`; `None` when the size holds no whole element.
fn sweep_row(datatype: DataType, spec: &RowSpec<'_>) -> Result<Option<Row>, BoxError> {
    Ok(match datatype {
        DataType::F32 => sweep_row_of::<f32>(spec)?,
        DataType::F64 => sweep_row_of::<f64>(spec)?,
        DataType::F16 => sweep_row_of::<f16>(spec)?,
        DataType::Bf16 => sweep_row_of::<bf16>(spec)?,
        DataType::I32 => sweep_row_of::<i32>(spec)?,
        DataType::I64 => sweep_row_of::<i64>(spec)?,
        DataType::U32 => sweep_row_of::<u32>(spec)?,
        DataType::U64 => sweep_row_of::<u64>(spec)?,
    })
}

fn sweep_row_of<T: Sample>(spec: &RowSpec<'_>) -> Result<Option<Row>, BoxError> {
    let RowSpec {
        ctx,
        args,
        op,
        bytes,
    } = *spec;
    let count = bytes / std::mem::size_of::<T>();
    if count == 0 {
        return Ok(None);
    }
    let bytes = count * std::mem::size_of::<T>();
    let me = usize::from(ctx.rank().0);
    let nranks = usize::from(ctx.num_ranks());
    let options = Options {
        algorithm: args.algorithm.into(),
        ..Options::default()
    };
    let (mut under, bus_factor) = match op {
        Some(op) => (
            Under::Allreduce(Allreduce::<T>::new(ctx, Group::ALL, count, op, options)?),
            table::allreduce_bus_factor(nranks),
        ),
        None => (
            Under::Broadcast(Broadcast::<T>::new(
                ctx,
                Group::ALL,
                count,
                Rank(args.root),
                options,
            )?),
            1.0,
        ),
    };
    let input = check::inputs::<T>(op, me, count);
    // Costs `nranks` passes over the vector on every rank; `--check 0` skips it.
    let expected =
        (args.check > 0).then(|| check::expected::<T>(op, args.root.into(), nranks, count));
    let mut measure = |form: Form| -> Result<Measured, BoxError> {
        let secs = time_form(ctx, &mut under, form, &input, args.iters_for(bytes), args)?;
        let wrong = match &expected {
            Some(expected) => Some(check_form(
                ctx, &mut under, form, &input, expected, args.check,
            )?),
            None => None,
        };
        Ok(Measured::new(bytes, secs, bus_factor, wrong))
    };
    let out_of_place = measure(Form::OutOfPlace)?;
    let in_place = measure(Form::InPlace)?;
    let redop = op.map_or("none", cli::op_name);
    let text = table::row(
        bytes,
        count,
        T::DATA_TYPE.name(),
        redop,
        &out_of_place,
        &in_place,
    );
    Ok(Some(Row {
        text,
        forms: [out_of_place, in_place],
    }))
}

/// Seconds per operation: warm-up runs, then `--batches` timed batches of `iters` runs;
/// the largest over ranks of each rank's median batch.
fn time_form<T: Sample>(
    ctx: &Context,
    under: &mut Under<T>,
    form: Form,
    input: &[T],
    iters: usize,
    args: &SweepArgs,
) -> Result<f64, BoxError> {
    for _ in 0..args.warmup_iters {
        under.run_once(form, input)?;
    }
    let mut per_op = Vec::new();
    for _ in 0..args.batches {
        // Every rank starts a batch together, so no rank times its wait for a late peer.
        ctx.barrier(Group::ALL, STEP_TIMEOUT)?;
        let started = Instant::now();
        for _ in 0..iters {
            under.run_once(form, input)?;
        }
        per_op.push(started.elapsed().as_secs_f64() / iters as f64);
    }
    per_op.sort_by(f64::total_cmp);
    Ok(max_over_ranks(ctx, per_op[per_op.len() / 2])?)
}

/// Wrong elements over all ranks in `checks` runs of `form`, each from a fresh input (the
/// timed in-place runs have reduced the buffer many times over).
fn check_form<T: Sample>(
    ctx: &Context,
    under: &mut Under<T>,
    form: Form,
    input: &[T],
    expected: &[T],
    checks: u64,
) -> Result<u64, BoxError> {
    let nranks = usize::from(ctx.num_ranks());
    let mut wrong = 0;
    for _ in 0..checks {
        if form == Form::InPlace {
            under.buffer_mut()?.copy_from_slice(input);
        }
        under.start(form, input)?;
        wrong += check::count_wrong(under.wait()?, expected, nranks);
    }
    Ok(sum_over_ranks(ctx, wrong)?)
}
