//! The environment contract between `tarantella` (the launcher) and the programs it starts:
//! one constant per variable that more than one crate names, so that a rename is one edit and
//! a typo is a compile error.
//!
//! The runtime's own variables (`GASPI_RANK`, `GASPI_NRANKS`, ... and torchrun's `RANK`,
//! `WORLD_SIZE`, ...) belong to the GASPI runtime and are named in `gaspi::env::vars`; this
//! crate names the trainer's and the launcher's. `docs/launcher.md` lists them all in one
//! table.
//!
//! ```
//! let kib: u64 = std::env::var(tnt_env::FUSION_THRESHOLD_KB)
//!     .ok()
//!     .and_then(|v| v.parse().ok())
//!     .unwrap_or(32);
//! assert!(kib > 0);
//! ```
#![forbid(unsafe_code)]

/// The trainer's log filter (`tracing` `EnvFilter` syntax), set by `tarantella --log-level`.
pub const LOG: &str = "TNT_LOG";

/// The tensor-fusion threshold in KiB, set by `tarantella --fusion-threshold`.
pub const FUSION_THRESHOLD_KB: &str = "TNT_FUSION_THRESHOLD_KB";

/// The launcher's job id, exported to every rank; the clean-up of a job finds its processes by
/// it.
pub const JOB_ID: &str = "TARANTELLA_JOB_ID";

/// Where the launcher keeps its job records and rank logs.
pub const RUN_DIR: &str = "TARANTELLA_RUN_DIR";

/// The ssh command the launcher uses to start remote ranks (e.g. `ssh -p 2222 -i key`).
pub const SSH: &str = "TARANTELLA_SSH";
