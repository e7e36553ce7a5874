//! Ranks on different "hosts": network namespaces joined by a veth pair.

mod common;

use std::time::Duration;

use common::{setup, T};
use gaspi::testing::{is_rank_of, Job, TwoHosts};
use gaspi::*;

/// Four ranks, two per namespace: each namespace is a host of the topology, auto picks
/// shared memory inside a namespace and TCP across the veth link; a ring exchange and the collectives work over both.
#[test]
fn multi_host_over_veth() {
    const NAME: &str = "multi_host_over_veth";
    if is_rank_of(NAME) {
        let ctx = Context::init().unwrap();
        let me = ctx.rank().0;
        let n = ctx.num_ranks();
        for r in 0..n {
            if r != me {
                let same_ns = r / 2 == me / 2;
                assert_eq!(ctx.uses_shm_to(Rank(r)), same_ns, "route to rank {r}");
            }
        }
        // Each namespace is a host: hosts numbered by their lowest rank.
        let topo = ctx.topology();
        assert_eq!(topo.num_hosts(), 2);
        assert_eq!(topo.num_ranks(), 4);
        let hosts: Vec<u16> = (0..n).map(|r| topo.host_of(Rank(r)).unwrap()).collect();
        assert_eq!(hosts, [0, 0, 1, 1]);
        assert_eq!(
            ctx.group_hosts(Group::ALL).unwrap(),
            [vec![Rank(0), Rank(1)], vec![Rank(2), Rank(3)]]
        );
        let seg = setup(&ctx);
        ctx.segment(seg)
            .unwrap()
            .write(0, &[u64::from(me) * 3])
            .unwrap();
        let right = Rank((me + 1) % n);
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(right, seg, 8),
            8,
            NotificationId(0),
            1,
            QueueId(0),
        )
        .unwrap();
        ctx.notify_waitsome(seg, NotificationId(0), 1, T).unwrap();
        let got: u64 = ctx.segment(seg).unwrap().get(8).unwrap();
        assert_eq!(got, u64::from((me + n - 1) % n) * 3);
        let mut sum = [0.0f64];
        ctx.allreduce(&[f64::from(me)], &mut sum, ReduceOp::Sum, Group::ALL, T)
            .unwrap();
        assert_eq!(sum[0], 6.0);
        ctx.wait(QueueId(0), T).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    }
    let hosts = match TwoHosts::create("m") {
        Ok(hosts) => hosts,
        Err(why) => {
            println!("SKIPPED multi_host_over_veth: cannot create network namespaces here ({why})");
            return;
        }
    };
    let exe = std::env::current_exe().unwrap();
    let mut job = Job::new(4, exe);
    job.args = vec!["--exact".into(), NAME.into(), "--nocapture".into()];
    job.env
        .push((gaspi::testing::TEST_CASE.into(), NAME.into()));
    hosts.place(&mut job, |r| r.index() / 2);
    job.timeout = Duration::from_secs(60);
    job.run().assert_success();
}
