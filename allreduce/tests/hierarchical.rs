//! The hierarchical allreduce across real processes: network namespaces joined by a veth
//! pair stand for hosts (each namespace is a host to the runtime: shared memory inside,
//! TCP across), and one host over shared memory or TCP loopback. Every type and reduction,
//! checked against a serial reference, bit-identical across ranks and from run to run;
//! `Auto` must pick the hierarchical allreduce above `small_max` when the group spans hosts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use allreduce::{bf16, f16, Algorithm, Allreduce, Options, Reduction, Thresholds};
use common::{assert_same_everywhere, check_output, fill_input, fingerprint, TestElem};
use gaspi::env::TransportChoice;
use gaspi::testing::{is_rank_of, Job, TwoHosts, TEST_CASE};
use gaspi::{Context, Group, Timeout};

const OPS: [Reduction; 5] = [
    Reduction::Sum,
    Reduction::Min,
    Reduction::Max,
    Reduction::Prod,
    Reduction::Avg,
];
/// Nothing, fewer elements than shards, a few, and more than `small_max` bytes in every
/// type (`Auto` goes hierarchical there).
const COUNTS: [usize; 5] = [0, 1, 7, 1003, 300_007];
/// Small enough that the big count's shards are cut into the most pieces (16), each taking
/// several ring chunks between hosts in the 8-byte types.
const CHUNK: usize = 16 << 10;
/// Every test's bound: ranks still running then are killed and the test fails.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Every count and reduction of `T` with `alg`; under `Auto`, `spans_hosts` says whether
/// the hierarchical allreduce is expected above `small_max`.
fn check_type<T: TestElem>(ctx: &Arc<Context>, alg: Algorithm, spans_hosts: bool) {
    let p = ctx.num_ranks() as usize;
    let me = ctx.rank().0 as usize;
    let name = std::any::type_name::<T>();
    for count in COUNTS {
        for op in OPS {
            let options = Options {
                algorithm: alg,
                chunk_bytes: Some(CHUNK),
                ..Options::default()
            };
            let mut ar = Allreduce::<T>::new(ctx, Group::ALL, count, op, options)
                .unwrap_or_else(|e| panic!("setup {name} {alg:?} {op:?} n={count}: {e}"));
            let bytes = count * std::mem::size_of::<T>();
            let want_alg = match alg {
                Algorithm::Auto if spans_hosts && bytes > Thresholds::default().small_max => {
                    Algorithm::Hierarchical
                }
                Algorithm::Auto if bytes <= Thresholds::default().small_max => {
                    Algorithm::RecursiveDoubling
                }
                Algorithm::Auto => ar.algorithm(),
                a => a,
            };
            assert_eq!(ar.algorithm(), want_alg, "{name} n={count}");
            let mut first = None;
            for _run in 0..2 {
                // The second run repeats the first one's input: its bits must not change.
                let data = ar
                    .input_mut()
                    .unwrap_or_else(|e| panic!("{name} {alg:?} {op:?} n={count}: {e}"));
                fill_input(data, op, me);
                ar.start()
                    .unwrap_or_else(|e| panic!("{name} {alg:?} {op:?} n={count}: {e}"));
                let out = ar
                    .wait(Timeout::ms(60_000))
                    .unwrap_or_else(|e| panic!("{name} {alg:?} {op:?} n={count}: {e}"));
                if let Err(wrong) = check_output(out, op, p) {
                    panic!("{name} {alg:?} {op:?} p={p} n={count}: {wrong}");
                }
                let fp = fingerprint(out);
                assert_eq!(*first.get_or_insert(fp), fp, "run-to-run bits differ");
                assert_same_everywhere(ctx, Group::ALL, fp, "allreduce result");
            }
        }
    }
}

/// Every type with `alg` (see [`check_type`]).
fn all_types(ctx: &Arc<Context>, alg: Algorithm, spans_hosts: bool) {
    check_type::<f32>(ctx, alg, spans_hosts);
    check_type::<f64>(ctx, alg, spans_hosts);
    check_type::<f16>(ctx, alg, spans_hosts);
    check_type::<bf16>(ctx, alg, spans_hosts);
    check_type::<i32>(ctx, alg, spans_hosts);
    check_type::<i64>(ctx, alg, spans_hosts);
    check_type::<u32>(ctx, alg, spans_hosts);
    check_type::<u64>(ctx, alg, spans_hosts);
}

/// The body of a rank: the runtime's view of hosts, then every type with `Auto` and with
/// the hierarchical allreduce forced (which also covers counts `Auto` takes elsewhere).
fn rank_body(hosts: &[Vec<u16>]) {
    let ctx = Arc::new(Context::init().expect("gaspi init"));
    let seen: Vec<Vec<u16>> = ctx
        .group_hosts(Group::ALL)
        .expect("group hosts")
        .iter()
        .map(|m| m.iter().map(|r| r.0).collect())
        .collect();
    assert_eq!(seen, hosts, "the runtime's layout");
    let spans_hosts = hosts.len() > 1;
    all_types(&ctx, Algorithm::Auto, spans_hosts);
    all_types(&ctx, Algorithm::Hierarchical, spans_hosts);
    ctx.barrier(Group::ALL, Timeout::ms(30_000))
        .expect("final barrier");
    std::process::exit(0);
}

/// Runs test `name` with rank `r` in namespace `placement[r]` (0 or 1) over the default
/// transports (shared memory inside a namespace: the intra-host phases read peers in
/// place); rank 0 must be in namespace 0, where the rendezvous listens.
fn across_namespaces(name: &str, tag: &str, placement: &'static [usize]) {
    across_namespaces_over(name, tag, placement, TransportChoice::Auto);
}

/// [`across_namespaces`] over `transport`: TCP makes the intra-host phases staged.
fn across_namespaces_over(
    name: &str,
    tag: &str,
    placement: &'static [usize],
    transport: TransportChoice,
) {
    let hosts = layout_of(placement);
    if is_rank_of(name) {
        rank_body(&hosts);
    }
    let two_hosts = match TwoHosts::create(tag) {
        Ok(hosts) => hosts,
        Err(why) => {
            println!("SKIPPED {name}: cannot create network namespaces here ({why})");
            return;
        }
    };
    let exe = std::env::current_exe().expect("test binary path");
    let mut job = Job::new(placement.len() as u16, exe);
    job.transport = transport;
    job.args = vec![
        "--exact".into(),
        name.into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ];
    job.env.push((TEST_CASE.into(), name.into()));
    two_hosts.place(&mut job, |r| placement[r.index()]);
    job.timeout = TIMEOUT;
    job.run().assert_success();
}

/// The runtime's layout of `placement`: ranks grouped by namespace, hosts in the order of
/// their lowest rank.
fn layout_of(placement: &[usize]) -> Vec<Vec<u16>> {
    let mut hosts: Vec<(usize, Vec<u16>)> = Vec::new();
    for (r, &ns) in placement.iter().enumerate() {
        match hosts.iter_mut().find(|(n, _)| *n == ns) {
            Some((_, m)) => m.push(r as u16),
            None => hosts.push((ns, vec![r as u16])),
        }
    }
    hosts.into_iter().map(|(_, m)| m).collect()
}

#[test]
fn two_hosts_of_two_ranks() {
    across_namespaces("two_hosts_of_two_ranks", "2", &[0, 0, 1, 1]);
}

#[test]
fn hosts_of_three_and_two_ranks() {
    across_namespaces("hosts_of_three_and_two_ranks", "3", &[0, 0, 0, 1, 1]);
}

/// Hosts whose ranks talk over TCP, not shared memory: staged intra-host phases.
#[test]
fn hosts_of_three_and_two_ranks_over_tcp() {
    across_namespaces_over(
        "hosts_of_three_and_two_ranks_over_tcp",
        "t",
        &[0, 0, 0, 1, 1],
        TransportChoice::Tcp,
    );
}

#[test]
fn two_hosts_with_interleaved_ranks() {
    across_namespaces("two_hosts_with_interleaved_ranks", "i", &[0, 1, 0, 1]);
}

/// One host of `n` ranks over `transport`, the hierarchical allreduce forced.
fn one_host(name: &str, n: u16, transport: TransportChoice) {
    gaspi::testing::spmd_with(
        name,
        n,
        transport,
        gaspi::Config::default(),
        TIMEOUT,
        |ctx| {
            let ctx = Arc::new(ctx);
            let hosts = ctx.group_hosts(Group::ALL).expect("group hosts");
            assert_eq!(hosts.len(), 1, "one host");
            all_types(&ctx, Algorithm::Hierarchical, false);
            ctx.barrier(Group::ALL, Timeout::ms(30_000))
                .expect("final barrier");
        },
    );
}

#[test]
fn one_host_over_shared_memory() {
    one_host("one_host_over_shared_memory", 3, TransportChoice::Shm);
}

#[test]
fn one_host_over_tcp_loopback() {
    one_host("one_host_over_tcp_loopback", 3, TransportChoice::Tcp);
}
