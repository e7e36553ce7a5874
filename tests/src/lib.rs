//! Multi-process integration tests for the workspace crates, and the helpers they share.
//!
//! Each test starts real rank processes (by re-running its own test binary through
//! [`gaspi::testing::spmd`]) over TCP and over shared memory, with 2 to 5 ranks, and is bounded
//! in time: a job that does not finish is killed and the test fails with every rank's output.
//!
//! A test names the network its ranks use; each [`Net`] is a transport and the environment
//! that selects it:
//!
//! ```
//! use gaspi::env::TransportChoice;
//! use tarantella_tests::Net;
//!
//! assert_eq!(Net::Shm.transport(), TransportChoice::Shm);
//! // The verbs code path runs on the fake device, which the ranks' environment selects.
//! assert_eq!(Net::FakeVerbs.transport(), TransportChoice::Verbs);
//! assert_eq!(Net::FakeVerbs.env(), [("GASPI_IB_DEVICE".to_string(), "fake".to_string())]);
//! ```

use std::time::Duration;

pub mod faults;

use gaspi::env::TransportChoice;
use gaspi::{testing, Config, Context, Rank};

/// The names in `/dev/shm` of `rank`'s files of job `job`: its segment files
/// (`tnt-<job>-<nonce>-r<rank>-…`) and the fake verbs device's (`tnt-<job>-verbs-r<rank>`).
pub fn shm_files_of(job: &str, rank: u16) -> Vec<String> {
    let prefix = format!("tnt-{job}-");
    let segment = format!("r{rank}-");
    let verbs = format!("verbs-r{rank}");
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_prefix(&prefix).is_some_and(|rest| {
                rest == verbs || rest.get(17..).is_some_and(|r| r.starts_with(&segment))
            })
        })
        .collect()
}

/// How the ranks of a test case talk to each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Net {
    /// `GASPI_TRANSPORT=auto`: shared memory between the ranks (a test's ranks all run on this
    /// host), as a job on one host gets by default.
    Auto,
    /// `GASPI_TRANSPORT=tcp`: TCP over loopback between every pair of ranks.
    Tcp,
    /// `GASPI_TRANSPORT=shm`: shared memory between every pair of ranks.
    Shm,
    /// `GASPI_TRANSPORT=verbs` on the fake verbs device: the verbs code path (queue pairs,
    /// memory regions, signaling, completions) with work requests executed by the fake.
    FakeVerbs,
}

impl Net {
    /// The `GASPI_TRANSPORT` the ranks are started with.
    pub fn transport(self) -> TransportChoice {
        match self {
            Net::Auto => TransportChoice::Auto,
            Net::Tcp => TransportChoice::Tcp,
            Net::Shm => TransportChoice::Shm,
            Net::FakeVerbs => TransportChoice::Verbs,
        }
    }

    /// Environment the ranks need besides the transport.
    pub fn env(self) -> Vec<(String, String)> {
        match self {
            Net::FakeVerbs => vec![("GASPI_IB_DEVICE".into(), "fake".into())],
            _ => Vec::new(),
        }
    }
}

/// Runs `body` on `nranks` ranks over `net` (see [`gaspi::testing::spmd_with`]); over the
/// fake verbs device every rank first checks that its peers are really reached over verbs,
/// so a silent fallback to TCP fails the test.
pub fn run_case(
    name: &str,
    nranks: u16,
    net: Net,
    config: Config,
    timeout: Duration,
    body: impl FnOnce(Context),
) {
    let extra = net.env();
    if let Some(outcome) = testing::spmd_job(name, nranks, net.transport(), timeout, |job| {
        job.env.extend(extra)
    }) {
        outcome.assert_success();
        return;
    }
    let ctx = Context::init_with(config).expect("gaspi init");
    if net == Net::FakeVerbs {
        for r in (0..ctx.num_ranks()).map(Rank).filter(|r| *r != ctx.rank()) {
            assert!(ctx.uses_verbs_to(r), "rank {r} is not reached over verbs");
        }
    }
    body(ctx);
    std::process::exit(0);
}

/// Defines one module of multi-process tests: the same body on several (ranks, [`Net`])
/// cases, each its own `#[test]`.
///
/// ```ignore
/// spmd_cases!(ring, |ctx| { /* body on every rank */ }, tcp_2 = (2, Tcp), verbs_5 = (5, FakeVerbs));
/// ```
#[macro_export]
macro_rules! spmd_cases {
    ($name:ident, $body:expr, $($case:ident = ($n:expr, $t:ident)),+ $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() {
                    $crate::run_case(
                        concat!(stringify!($name), "::", stringify!($case)),
                        $n,
                        $crate::Net::$t,
                        gaspi::Config::default(),
                        std::time::Duration::from_secs(60),
                        $body,
                    );
                }
            )+
        }
    };
}

/// The README's examples run as doctests, so the front page cannot rot.
#[doc = include_str!("../../README.md")]
pub mod readme {}
