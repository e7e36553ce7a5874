//! Ranks on different "hosts": network namespaces joined by a veth pair.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{setup, T};
use gaspi::testing::{is_rank_of, Job};
use gaspi::*;

/// Network namespaces as hosts, joined by a veth pair.
struct Netns {
    names: [String; 2],
}

impl Netns {
    fn create() -> Result<Netns, String> {
        let id = std::process::id() % 100_000;
        let names = [format!("tnt-a{id}"), format!("tnt-b{id}")];
        let run = |args: &[&str]| -> Result<(), String> {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let ns = Netns {
            names: names.clone(),
        };
        run(&["netns", "add", &names[0]])?;
        run(&["netns", "add", &names[1]])?;
        let (va, vb) = (format!("tva{id}"), format!("tvb{id}"));
        run(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        run(&["link", "set", &va, "netns", &names[0]])?;
        run(&["link", "set", &vb, "netns", &names[1]])?;
        for (n, (dev, ip)) in names
            .iter()
            .zip([(&va, "10.199.0.1/24"), (&vb, "10.199.0.2/24")])
        {
            run(&["-n", n, "addr", "add", ip, "dev", dev])?;
            run(&["-n", n, "link", "set", dev, "up"])?;
            run(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", n])
                .status();
        }
    }
}

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
    let ns = match Netns::create() {
        Ok(ns) => ns,
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
    job.rendezvous_ip = "10.199.0.1".parse().unwrap();
    let names = ns.names.clone();
    job.wrapper = Some(Arc::new(move |r| {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            names[r.index() / 2].clone(),
        ]
    }));
    job.timeout = Duration::from_secs(60);
    job.run().assert_success();
}
