//! The command line of `allreduce-sweep`: nccl-tests' flags (`-b -e -f -i -d -o -r -n -w -c
//! -T`, same meaning and size syntax) beside this workspace's own (`--ranks --transport
//! --algorithm --collective --batches --budget`).

use allreduce::{Algorithm, DataType, Reduction};
use clap::{Parser, ValueEnum};
use gaspi::env::TransportChoice;
use gaspi::Rank;

use crate::{iterations, parse_size};

/// Ranks started on this host when no launcher started the job.
pub const DEFAULT_LOCAL_RANKS: u16 = 2;
/// Size factor between rows when neither `-f` nor `-i` is given.
pub const DEFAULT_STEP_FACTOR: usize = 4;
/// nccl-tests' increment when the factor is 1 and no `-i` is given.
pub const DEFAULT_STEP_BYTES: usize = 1 << 20;

/// `--algorithm`: the allreduce algorithm to time, as the command line spells it (see
/// [`Algorithm`] for what each one does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Algo {
    /// By message size, as applications get it
    Auto,
    /// Pipelined ring
    Ring,
    /// Recursive doubling
    Rd,
    /// Recursive halving, then doubling
    Rabenseifner,
    /// Inside each host, then between hosts, then inside each host again
    Hierarchical,
    /// Every rank sends to every other, one step
    OneShot,
    /// Reduce from the peers' buffers in place (one host)
    SingleCopy,
}

impl Algo {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Auto => "auto",
            Algo::Ring => "ring",
            Algo::Rd => "rd",
            Algo::Rabenseifner => "rabenseifner",
            Algo::Hierarchical => "hierarchical",
            Algo::OneShot => "one-shot",
            Algo::SingleCopy => "single-copy",
        }
    }
}

impl From<Algo> for Algorithm {
    fn from(a: Algo) -> Self {
        match a {
            Algo::Auto => Algorithm::Auto,
            Algo::Ring => Algorithm::Ring,
            Algo::Rd => Algorithm::RecursiveDoubling,
            Algo::Rabenseifner => Algorithm::Rabenseifner,
            Algo::Hierarchical => Algorithm::Hierarchical,
            Algo::OneShot => Algorithm::OneShot,
            Algo::SingleCopy => Algorithm::SingleCopy,
        }
    }
}

/// `--collective`: which collective each row times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Collective {
    /// With the reduction of `--op`
    Allreduce,
    /// From `--root`; busbw = algbw, as nccl-tests reports it
    Broadcast,
}

/// The types `-d all` sweeps, in nccl-tests' order (it also has int8 and uint8, which the
/// allreduce crate does not reduce).
pub const ALL_DATATYPES: [DataType; 8] = [
    DataType::I32,
    DataType::U32,
    DataType::I64,
    DataType::U64,
    DataType::F16,
    DataType::F32,
    DataType::F64,
    DataType::Bf16,
];

/// The operations `-o all` sweeps, in nccl-tests' order.
pub const ALL_OPS: [Reduction; 5] = [
    Reduction::Sum,
    Reduction::Prod,
    Reduction::Max,
    Reduction::Min,
    Reduction::Avg,
];

/// `-d`: one element type or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataTypes {
    /// A type by its nccl-tests name (`float`, `bfloat16`, ...).
    One(DataType),
    /// `all`: every type of [`ALL_DATATYPES`].
    All,
}

impl DataTypes {
    /// The types to sweep, in the order their tables are printed.
    pub fn list(self) -> Vec<DataType> {
        match self {
            DataTypes::One(t) => vec![t],
            DataTypes::All => ALL_DATATYPES.to_vec(),
        }
    }
}

/// `-o`: one reduction or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ops {
    /// A reduction by its nccl-tests name (`sum`, `prod`, ...).
    One(Reduction),
    /// `all`: every reduction of [`ALL_OPS`].
    All,
}

impl Ops {
    /// The reductions to sweep, in the order their tables are printed.
    pub fn list(self) -> Vec<Reduction> {
        match self {
            Ops::One(op) => vec![op],
            Ops::All => ALL_OPS.to_vec(),
        }
    }
}

/// nccl-tests' name of a reduction.
pub fn op_name(op: Reduction) -> &'static str {
    match op {
        Reduction::Sum => "sum",
        Reduction::Prod => "prod",
        Reduction::Min => "min",
        Reduction::Max => "max",
        Reduction::Avg => "avg",
    }
}

/// `-d NAME`: nccl-tests' names (`float`, `double`, `half`, `bfloat16`, `int32`, `int64`,
/// `uint32`, `uint64`, `all`), plus this workspace's short ones (`f32`, `bf16`, ...).
pub fn parse_datatypes(text: &str) -> Result<DataTypes, String> {
    let name = text.trim().to_ascii_lowercase();
    if name == "all" {
        return Ok(DataTypes::All);
    }
    let short = |t: DataType| match t {
        DataType::F32 => "f32",
        DataType::F64 => "f64",
        DataType::F16 => "f16",
        DataType::Bf16 => "bf16",
        DataType::I32 => "i32",
        DataType::I64 => "i64",
        DataType::U32 => "u32",
        DataType::U64 => "u64",
    };
    if let Some(t) = ALL_DATATYPES
        .into_iter()
        .find(|t| t.name() == name || short(*t) == name)
    {
        return Ok(DataTypes::One(t));
    }
    let known: Vec<&str> = ALL_DATATYPES.iter().map(|t| t.name()).collect();
    let why = if matches!(name.as_str(), "int8" | "uint8" | "char") {
        "the allreduce crate has no 8-bit types"
    } else {
        "unknown type"
    };
    Err(format!(
        "{text:?}: {why}; use one of {}, all",
        known.join(", ")
    ))
}

/// `-o NAME`: `sum`, `prod`, `min`, `max`, `avg` or `all`.
pub fn parse_ops(text: &str) -> Result<Ops, String> {
    let name = text.trim().to_ascii_lowercase();
    if name == "all" {
        return Ok(Ops::All);
    }
    ALL_OPS
        .into_iter()
        .find(|op| op_name(*op) == name)
        .map(Ops::One)
        .ok_or_else(|| format!("{text:?} is not a reduction; use sum, prod, min, max, avg or all"))
}

/// How the message size grows from one row to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Each size is this many times the last (`-f`).
    Factor(usize),
    /// Each size is this many bytes more than the last (`-i`, or `-f 1`).
    Bytes(usize),
}

const EXAMPLES: &str = "\
Examples:
  allreduce-sweep                                   2 ranks on this host, 4K..64M by 4x, float sum
  allreduce-sweep --ranks 4 --transport tcp -b 8 -e 128M -f 2
  allreduce-sweep -d all -o all -b 1K -e 1M -c 1    every type and reduction, results checked
  tarantella --hostfile hosts -- allreduce-sweep -b 8 -e 1G -f 2
                                                    one rank per host: under a launcher (GASPI_RANK
                                                    set) the job's ranks are used, --ranks is not

Columns (nccl-tests): size in bytes, count in elements, time in us per operation (the largest
over ranks of each rank's median batch), algbw = size/time, busbw = algbw * 2(n-1)/n for
allreduce (= algbw for broadcast), #wrong = elements that differ from the exact result, summed
over ranks (N/A with -c 0). out-of-place: start_from(input) copies an input buffer into the
collective's own buffer and reduces it there; in-place: reduces that buffer as it stands.";

/// Sweeps message sizes for one collective and prints nccl-tests' table on rank 0.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "allreduce-sweep",
    about = "nccl-tests style sweep of the tarantella allreduce (or broadcast) over message sizes",
    after_help = EXAMPLES
)]
pub struct SweepArgs {
    /// Smallest message in bytes (K, M, G suffixes: powers of 1024)
    #[arg(short = 'b', long = "minbytes", alias = "min-bytes", value_name = "SIZE",
          default_value = "4K", value_parser = parse_size)]
    pub min_bytes: usize,

    /// Largest message in bytes
    #[arg(short = 'e', long = "maxbytes", alias = "max-bytes", value_name = "SIZE",
          default_value = "64M", value_parser = parse_size)]
    pub max_bytes: usize,

    /// Multiply the size by this between rows [default: 4; 1 steps by --stepbytes]
    #[arg(short = 'f', long = "stepfactor", alias = "factor", value_name = "FACTOR",
          conflicts_with = "step_bytes", value_parser = clap::value_parser!(u64).range(1..))]
    pub step_factor: Option<u64>,

    /// Add this many bytes between rows instead of multiplying
    #[arg(short = 'i', long = "stepbytes", value_name = "SIZE", value_parser = parse_size)]
    pub step_bytes: Option<usize>,

    /// Element type: float, double, half, bfloat16, int32, int64, uint32, uint64 or all
    #[arg(short = 'd', long = "datatype", value_name = "TYPE", default_value = "float",
          value_parser = parse_datatypes)]
    pub datatype: DataTypes,

    /// Reduction: sum, prod, min, max, avg or all (allreduce only)
    #[arg(short = 'o', long = "op", value_name = "OP", default_value = "sum",
          value_parser = parse_ops)]
    pub op: Ops,

    /// Root rank of the broadcast
    #[arg(short = 'r', long = "root", value_name = "RANK", default_value_t = 0)]
    pub root: u16,

    /// Timed operations per batch [default: enough for --budget bytes, 5 to 2000]
    #[arg(short = 'n', long = "iters", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: Option<u64>,

    /// Untimed operations before the timed batches, per size and form
    #[arg(
        short = 'w',
        long = "warmup_iters",
        alias = "warmup-iters",
        value_name = "N",
        default_value_t = 5
    )]
    pub warmup_iters: u64,

    /// Checked operations per size and form (0: no check, #wrong is N/A)
    #[arg(short = 'c', long = "check", value_name = "N", default_value_t = 1)]
    pub check: u64,

    /// Timed batches per size; the median batch is reported
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub batches: u64,

    /// Bytes of traffic per timed batch when -n is not given
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = parse_size)]
    pub budget: usize,

    /// Ranks to start on this host [default: 2]; under a launcher the job's own ranks
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub ranks: Option<u16>,

    /// Transport between ranks [default: shm on this host, the launcher's under one]
    #[arg(long, value_enum)]
    pub transport: Option<TransportChoice>,

    /// Allreduce algorithm (auto: chosen by size, see docs/allreduce.md)
    #[arg(long, value_enum, default_value_t = Algo::Auto)]
    pub algorithm: Algo,

    /// Collective to time
    #[arg(long, value_enum, default_value_t = Collective::Allreduce)]
    pub collective: Collective,

    /// Bind rank i to CPU i of this comma-separated list, repeated when shorter than the
    /// job (srun's `--cpu-bind=map_cpu:LIST`): where ranks outnumber cores, which of them
    /// share a core decides the time (docs/allreduce.md, "Simulator")
    #[arg(long = "map-cpu", value_name = "LIST", value_delimiter = ',')]
    pub map_cpu: Vec<usize>,

    /// Seconds before the ranks started on this host are killed (not used under a launcher)
    #[arg(short = 'T', long = "timeout", value_name = "SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
}

impl SweepArgs {
    /// How sizes grow from row to row: `-i` wins over `-f`, `-f 1` means nccl-tests'
    /// default increment, and neither means a factor of [`DEFAULT_STEP_FACTOR`].
    pub fn step(&self) -> Step {
        match (self.step_factor, self.step_bytes) {
            (_, Some(bytes)) => Step::Bytes(bytes),
            (Some(1), None) => Step::Bytes(DEFAULT_STEP_BYTES),
            (Some(factor), None) => Step::Factor(usize::try_from(factor).unwrap_or(usize::MAX)),
            (None, None) => Step::Factor(DEFAULT_STEP_FACTOR),
        }
    }

    /// Checks what clap cannot check flag by flag: the size range and the step.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_bytes == 0 {
            return Err("--minbytes must be at least 1 byte".into());
        }
        if self.min_bytes > self.max_bytes {
            return Err(format!(
                "--minbytes {} is larger than --maxbytes {}",
                self.min_bytes, self.max_bytes
            ));
        }
        if self.step() == Step::Bytes(0) {
            return Err("--stepbytes must be at least 1 byte".into());
        }
        let smallest_element = self.datatype.list().iter().map(|t| t.size()).min();
        // Sizes grow, so the first one that holds an element ends the search.
        if !self.sizes().any(|bytes| Some(bytes) >= smallest_element) {
            return Err(format!(
                "no size from --minbytes {} to --maxbytes {} holds a whole element of the type",
                self.min_bytes, self.max_bytes
            ));
        }
        Ok(())
    }

    /// Checks the flags that depend on the job's size.
    pub fn validate_for_job(&self, nranks: u16) -> Result<(), String> {
        if self.collective == Collective::Broadcast && self.root >= nranks {
            return Err(format!(
                "--root {} is not a rank of this {nranks}-rank job",
                self.root
            ));
        }
        Ok(())
    }

    /// The CPU `--map-cpu` binds `rank` to, if it binds any.
    pub fn cpu_for(&self, rank: Rank) -> Option<usize> {
        let list = &self.map_cpu;
        (!list.is_empty()).then(|| list[usize::from(rank.0) % list.len()])
    }

    /// The message sizes in bytes, `--minbytes` up to `--maxbytes` (call
    /// [`validate`](Self::validate) first: a zero step would repeat one size forever).
    pub fn sizes(&self) -> impl Iterator<Item = usize> {
        let step = self.step();
        let max = self.max_bytes;
        std::iter::successors(Some(self.min_bytes), move |&size| match step {
            Step::Factor(f) => size.checked_mul(f),
            Step::Bytes(b) => size.checked_add(b),
        })
        .take_while(move |&size| size <= max)
    }

    /// Timed operations per batch for a message of `bytes`.
    pub fn iters_for(&self, bytes: usize) -> usize {
        match self.iters {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => iterations(bytes, self.budget),
        }
    }

    /// The reductions to sweep: none apply to a broadcast.
    pub fn ops(&self) -> Vec<Option<Reduction>> {
        match self.collective {
            Collective::Allreduce => self.op.list().into_iter().map(Some).collect(),
            Collective::Broadcast => vec![None],
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<SweepArgs, clap::Error> {
        SweepArgs::try_parse_from(std::iter::once("allreduce-sweep").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_sweep_4k_to_64m_by_four_in_float_sum() {
        let a = parse(&[]).unwrap();
        a.validate().unwrap();
        let sizes: Vec<usize> = a.sizes().collect();
        assert_eq!(sizes.first(), Some(&4096));
        assert_eq!(sizes.last(), Some(&(64 << 20)));
        assert_eq!(sizes.len(), 8);
        assert_eq!(a.datatype, DataTypes::One(DataType::F32));
        assert_eq!(a.ops(), vec![Some(Reduction::Sum)]);
        assert_eq!((a.check, a.warmup_iters, a.batches), (1, 5, 5));
        assert_eq!((a.ranks, a.transport), (None, None));
    }

    #[test]
    fn nccl_tests_flags_parse() {
        let a = parse(&[
            "-b", "8", "-e", "128M", "-f", "2", "-d", "bfloat16", "-o", "max", "-n", "20", "-w",
            "1", "-c", "0",
        ])
        .unwrap();
        assert_eq!((a.min_bytes, a.max_bytes), (8, 128 << 20));
        assert_eq!(a.step(), Step::Factor(2));
        assert_eq!(a.sizes().count(), 25);
        assert_eq!(a.datatype, DataTypes::One(DataType::Bf16));
        assert_eq!(a.op, Ops::One(Reduction::Max));
        assert_eq!((a.iters, a.warmup_iters, a.check), (Some(20), 1, 0));
        assert_eq!(a.iters_for(1 << 30), 20);
        let long = parse(&[
            "--minbytes=1K",
            "--maxbytes=1G",
            "--stepfactor=8",
            "--datatype=int64",
            "--op=avg",
            "--iters=3",
            "--warmup_iters=0",
            "--check=1",
        ])
        .unwrap();
        assert_eq!((long.min_bytes, long.max_bytes), (1024, 1 << 30));
        assert_eq!(long.step(), Step::Factor(8));
        assert_eq!(long.datatype, DataTypes::One(DataType::I64));
        assert_eq!(long.op, Ops::One(Reduction::Avg));
    }

    #[test]
    fn the_former_long_names_still_parse() {
        let a = parse(&["--min-bytes", "1K", "--max-bytes", "4K", "--factor", "2"]).unwrap();
        assert_eq!(a.sizes().collect::<Vec<_>>(), [1024, 2048, 4096]);
    }

    #[test]
    fn every_nccl_tests_type_name_maps_to_its_type() {
        for (name, t) in [
            ("float", DataType::F32),
            ("double", DataType::F64),
            ("half", DataType::F16),
            ("bfloat16", DataType::Bf16),
            ("int32", DataType::I32),
            ("int64", DataType::I64),
            ("uint32", DataType::U32),
            ("uint64", DataType::U64),
            ("FLOAT", DataType::F32),
            ("bf16", DataType::Bf16),
        ] {
            assert_eq!(parse_datatypes(name), Ok(DataTypes::One(t)), "{name}");
        }
        assert_eq!(parse_datatypes("all").unwrap().list(), ALL_DATATYPES);
    }

    #[test]
    fn unsupported_type_names_say_why() {
        let err = parse_datatypes("int8").unwrap_err();
        assert!(
            err.contains("no 8-bit types") && err.contains("bfloat16"),
            "{err}"
        );
        let err = parse_datatypes("fp8").unwrap_err();
        assert!(err.contains("unknown type"), "{err}");
        let e = parse(&["-d", "uint8"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ValueValidation);
    }

    #[test]
    fn reductions_parse_by_name() {
        for (name, op) in [
            ("sum", Reduction::Sum),
            ("prod", Reduction::Prod),
            ("min", Reduction::Min),
            ("max", Reduction::Max),
            ("avg", Reduction::Avg),
        ] {
            assert_eq!(parse_ops(name), Ok(Ops::One(op)));
        }
        assert_eq!(parse_ops("all").unwrap().list().len(), 5);
        assert!(parse_ops("mulsum").unwrap_err().contains("not a reduction"));
    }

    #[test]
    fn a_broadcast_sweeps_no_reduction() {
        let a = parse(&["--collective", "broadcast", "-o", "all", "-r", "1"]).unwrap();
        assert_eq!(a.ops(), vec![None]);
        a.validate_for_job(2).unwrap();
        assert!(a.validate_for_job(1).unwrap_err().contains("--root 1"));
    }

    #[test]
    fn factor_one_or_stepbytes_step_by_bytes() {
        let a = parse(&["-b", "1M", "-e", "3M", "-f", "1"]).unwrap();
        assert_eq!(a.sizes().collect::<Vec<_>>(), [1 << 20, 2 << 20, 3 << 20]);
        let a = parse(&["-b", "100", "-e", "250", "-i", "50"]).unwrap();
        assert_eq!(a.sizes().collect::<Vec<_>>(), [100, 150, 200, 250]);
        let a = parse(&["-b", "1", "-e", "1", "-i", "0"]).unwrap();
        assert!(a.validate().unwrap_err().contains("--stepbytes"));
    }

    #[test]
    fn sizes_stop_before_overflowing() {
        let a = parse(&["-b", "1G", "-e", &usize::MAX.to_string(), "-f", "1024"]).unwrap();
        assert_eq!(a.sizes().count(), 4);
    }

    #[test]
    fn bad_ranges_and_values_are_errors() {
        let a = parse(&["-b", "64M", "-e", "4K"]).unwrap();
        assert!(a.validate().unwrap_err().contains("larger than"));
        let a = parse(&["-b", "0"]).unwrap();
        assert!(a.validate().unwrap_err().contains("at least 1"));
        let a = parse(&["-b", "1", "-e", "7", "-d", "double"]).unwrap();
        assert!(a.validate().unwrap_err().contains("whole element"));
        parse(&["-b", "1", "-e", "7", "-d", "all"])
            .unwrap()
            .validate()
            .unwrap();
        for bad in [
            &["-f", "0"][..],
            &["-f", "two"],
            &["-n", "0"],
            &["-b", "4KB"],
            &["-e", "1.5G"],
            &["--ranks", "0"],
            &["--batches", "0"],
            &["--transport", "carrier-pigeon"],
        ] {
            let e = parse(bad).unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::ValueValidation | ErrorKind::InvalidValue
                ),
                "{bad:?}: {e}"
            );
            assert_eq!(e.exit_code(), 2);
        }
        let e = parse(&["-f", "2", "-i", "1M"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ArgumentConflict);
        let e = parse(&["--no-such-flag"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        let e = parse(&["--help"]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
    }
}
