//! A small job runner for multi-process tests (feature `testing`): starts N ranks as
//! processes with the job environment, waits for them with a deadline (killing all of them
//! when it passes), and reports each rank's exit status and output.
//!
//! [`spmd`] runs a test body on every rank by re-executing the current test binary: the
//! parent starts `N` copies filtered to the same test, each copy sees `GASPI_TEST_CASE` and
//! runs the body with an initialized [`Context`].

use std::time::Duration;

use crate::env::{JobToken, TransportChoice};
use crate::types::Rank;
use crate::{Config, Context};

mod cargo;
mod job;
mod ports;
mod processes;
mod two_hosts;

pub use cargo::{cargo_build, CARGO_SELECTION};
pub use job::{Job, JobOutcome, RankOutcome};
pub use ports::{ephemeral_port_start, free_port};
pub use processes::{wait_all, WaitOutcome};
pub use two_hosts::TwoHosts;

/// Environment variable naming the test case a child process runs.
pub const TEST_CASE: &str = "GASPI_TEST_CASE";

/// Runs `body` on `nranks` ranks of this test binary (see the module docs). `name` must be
/// the test's full path as libtest knows it (its function name for top-level tests).
///
/// In the parent this starts the job and asserts that every rank succeeded; in a rank it
/// initializes a [`Context`], runs `body`, terminates and exits.
pub fn spmd(name: &str, nranks: u16, transport: TransportChoice, body: impl FnOnce(Context)) {
    spmd_with(
        name,
        nranks,
        transport,
        Config::default(),
        Duration::from_secs(60),
        body,
    )
}

/// [`spmd`] with an explicit configuration and time bound.
pub fn spmd_with(
    name: &str,
    nranks: u16,
    transport: TransportChoice,
    config: Config,
    timeout: Duration,
    body: impl FnOnce(Context),
) {
    if let Some(outcome) = spmd_job(name, nranks, transport, timeout, |_| {}) {
        outcome.assert_success();
        return;
    }
    let ctx = Context::init_with(config).expect("gaspi init");
    body(ctx);
    std::process::exit(0);
}

/// The parent half of [`spmd`], with a hook to adjust the job; `None` in a child rank.
pub fn spmd_job(
    name: &str,
    nranks: u16,
    transport: TransportChoice,
    timeout: Duration,
    adjust: impl FnOnce(&mut Job),
) -> Option<JobOutcome> {
    if std::env::var(TEST_CASE).ok().as_deref() == Some(name) {
        return None;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let mut job = Job::new(nranks, exe);
    job.args = vec![
        "--exact".into(),
        name.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    job.transport = transport;
    job.timeout = timeout;
    job.env.push((TEST_CASE.into(), name.into()));
    adjust(&mut job);
    Some(job.run())
}

/// True in a child rank started by [`spmd`]/[`spmd_job`] for test `name`.
pub fn is_rank_of(name: &str) -> bool {
    std::env::var(TEST_CASE).ok().as_deref() == Some(name)
}

/// A raw `Write` frame as a faulty or hostile peer would send it (no validation here).
pub fn raw_write_frame(segment: u8, offset: u64, payload: &[u8]) -> Vec<u8> {
    use crate::wire::frame::{FrameKind, Header};
    let mut h = Header::new(FrameKind::Write);
    h.seg = u16::from(segment);
    h.offset = offset;
    h.len = payload.len() as u64;
    let mut v = h.encode().to_vec();
    v.extend_from_slice(payload);
    v
}

/// A raw read request for `len` bytes at `offset` of `segment`, with request id `req` (no
/// validation here).
pub fn raw_read_request(segment: u8, offset: u64, len: u64, req: u64) -> Vec<u8> {
    use crate::wire::frame::{FrameKind, Header};
    let mut h = Header::new(FrameKind::ReadReq);
    h.seg = u16::from(segment);
    h.offset = offset;
    h.len = len;
    h.req = req;
    h.encode().to_vec()
}

/// The most answers a peer may be owed before it is failed for not reading them.
pub const ANSWER_BACKLOG_MAX: usize = crate::transport::tcp::send::ANSWER_BACKLOG_MAX;

/// A raw goodbye frame (what `term` sends last on each connection).
pub fn raw_bye_frame() -> Vec<u8> {
    crate::wire::control::ControlMessage::Goodbye
        .header()
        .encode()
        .to_vec()
}

/// The hello a rank sends first on a data connection.
pub fn hello_bytes(token: JobToken, rank: Rank, nranks: u16) -> Vec<u8> {
    crate::wire::hello::Hello {
        token,
        rank: rank.0,
        nranks,
    }
    .encode()
    .to_vec()
}
