//! Faults: a peer killed mid-traffic, hostile connections and frames, init that cannot
//! assemble, and ranks on different "hosts" (network namespaces joined by veth).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gaspi::env::{JobEnv, JobToken, TransportChoice};
use gaspi::testing::{is_rank_of, spmd_job, Job};
use gaspi::*;
use tarantella_tests::faults::{acknowledge_then_die, await_word_after_failure};

const T: Timeout = Timeout(20_000);

fn setup(ctx: &Context) -> SegmentId {
    let seg = SegmentId(0);
    ctx.segment_create(seg, 1 << 20, Group::ALL, T, Alloc::Initialized)
        .unwrap();
    seg
}

/// Ranks 0 and 1 go on in a group of their own after rank 2 is gone.
fn survivors_go_on(ctx: &Context) {
    let g = ctx.group_create().unwrap();
    ctx.group_add(g, Rank(0)).unwrap();
    ctx.group_add(g, Rank(1)).unwrap();
    ctx.group_commit(g, T).unwrap();
    ctx.barrier(g, T).unwrap();
    let mut v = [0i32];
    ctx.allreduce(&[1i32], &mut v, ReduceOp::Sum, g, T).unwrap();
    assert_eq!(v[0], 2);
}

/// Rank 2 streams acknowledgements to rank 0 and dies by SIGKILL in the middle; the
/// survivors' blocking calls return `PeerFailed` and their state vector marks it CORRUPT.
fn killed_peer(name: &str, transport: TransportChoice) {
    let Some(out) = spmd_job(name, 3, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        // Rank 2 may finish `segment_create` and die while a slow rank 1 still waits in it
        // for rank 2's acknowledgement: start the traffic only once everybody is set up.
        ctx.barrier(Group::ALL, T).unwrap();
        let me = ctx.rank();
        let q = QueueId(0);
        match me.0 {
            0 => {
                let mut round = 0;
                let err = loop {
                    // Data to rank 2, then wait for its acknowledgement (notification 1).
                    let posted = ctx.write_notify(
                        Local::new(seg, 0),
                        Remote::new(Rank(2), seg, 4096),
                        65536,
                        NotificationId(0),
                        round + 1,
                        q,
                    );
                    if let Err(e) = posted {
                        break e;
                    }
                    match ctx.notify_waitsome(seg, NotificationId(1), 1, Timeout::BLOCK) {
                        Ok(id) => {
                            ctx.notify_reset(seg, id).unwrap();
                        }
                        Err(e) => break e,
                    }
                    round += 1;
                    let _ = ctx.wait(q, T);
                };
                assert!(round >= 10, "rank 2 died too early ({round})");
                assert!(
                    matches!(err, Error::PeerFailed { rank: Rank(2) }),
                    "{err:?}"
                );
                assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
                assert_eq!(ctx.state_vec()[1], PeerState::Healthy);
                let posted = ctx.write(Local::new(seg, 0), Remote::new(Rank(2), seg, 0), 8, q);
                assert!(
                    matches!(posted, Err(Error::PeerFailed { .. })),
                    "{posted:?}"
                );
                let b = ctx.barrier(Group::ALL, T);
                assert!(
                    matches!(b, Err(Error::PeerFailed { rank: Rank(2) })),
                    "{b:?}"
                );
                ctx.notify(seg, Rank(1), NotificationId(5), 1, q).unwrap();
                ctx.wait(q, T).unwrap();
                survivors_go_on(&ctx);
            }
            1 => {
                await_word_after_failure(&ctx, seg);
                survivors_go_on(&ctx);
            }
            _ => acknowledge_then_die(&ctx, seg, q, 20),
        }
        std::process::exit(0);
    };
    assert!(!out.timed_out, "{}", out.report());
    assert_eq!(
        out.ranks[2].status.and_then(|s| s.signal()),
        Some(9),
        "{}",
        out.report()
    );
    for r in &out.ranks[..2] {
        assert!(r.status.is_some_and(|s| s.success()), "{}", out.report());
    }
}

#[test]
fn killed_peer_tcp() {
    killed_peer("killed_peer_tcp", TransportChoice::Tcp);
}

#[test]
fn killed_peer_shm() {
    killed_peer("killed_peer_shm", TransportChoice::Shm);
}

/// Rank 2 sends rank 0 the raw bytes `frames()` builds, as a faulty or hostile peer would:
/// rank 0 drops the connection, marks rank 2 CORRUPT, its segment memory is unchanged, and
/// ranks 0 and 1 carry on in a group of their own.
fn rank_0_drops_a_bad_peer(name: &str, frames: fn() -> Vec<u8>) {
    let Some(out) = spmd_job(
        name,
        3,
        TransportChoice::Tcp,
        Duration::from_secs(60),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        let pattern = vec![0xA5u8; 1 << 20];
        ctx.segment(seg).unwrap().write(0, &pattern).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        match ctx.rank().0 {
            2 => {
                ctx.send_raw_frame(Rank(0), frames()).unwrap();
                // Rank 0 hangs up on us.
                let r = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
                assert!(
                    matches!(r, Err(Error::PeerFailed { rank: Rank(0) })),
                    "{r:?}"
                );
                ctx.term(T).unwrap();
                std::process::exit(0);
            }
            0 => {
                let r = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
                assert!(
                    matches!(r, Err(Error::PeerFailed { rank: Rank(2) })),
                    "{r:?}"
                );
                assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
                let mut now = vec![0u8; 1 << 20];
                ctx.segment(seg).unwrap().read(0, &mut now).unwrap();
                assert!(now == pattern, "segment memory changed");
            }
            _ => {}
        }
        // Ranks 0 and 1 go on in a group of their own.
        let g = ctx.group_create().unwrap();
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
        ctx.group_commit(g, T).unwrap();
        let peer = Rank(1 - ctx.rank().0);
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            1024,
            NotificationId(3),
            7,
            QueueId(0),
        )
        .unwrap();
        assert_eq!(
            ctx.notify_waitsome(seg, NotificationId(3), 1, T).unwrap(),
            NotificationId(3)
        );
        ctx.wait(QueueId(0), T).unwrap();
        ctx.barrier(g, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

/// A frame aimed past the end of a segment.
#[test]
fn hostile_frame_is_dropped() {
    rank_0_drops_a_bad_peer("hostile_frame_is_dropped", || {
        gaspi::testing::raw_write_frame(0, (1 << 20) - 8, &[0xFF; 64])
    });
}

/// A client with the wrong job token is dropped at the hello; the job carries on.
#[test]
fn wrong_token_client_is_dropped() {
    gaspi::testing::spmd(
        "wrong_token_client_is_dropped",
        2,
        TransportChoice::Tcp,
        |ctx| {
            if ctx.rank() == Rank(0) {
                let addr = ctx.data_listen_addr().unwrap();
                for hello in [
                    gaspi::testing::hello_bytes(JobToken([7; 16]), Rank(1), 2),
                    b"GET / HTTP/1.0\r\n\r\n".to_vec(),
                ] {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let _ = s.write_all(&hello);
                    // Also try to sneak a frame in behind the hello.
                    let _ = s.write_all(&gaspi::testing::raw_write_frame(0, 0, &[1; 16]));
                    let mut buf = [0u8; 16];
                    let n = s.read(&mut buf).unwrap_or(0);
                    assert_eq!(n, 0, "connection must be closed without an answer");
                }
                assert_eq!(ctx.state_vec(), vec![PeerState::Healthy; 2]);
            }
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.proc_ping(Rank(1 - ctx.rank().0), T).unwrap();
            // Nobody leaves before both pings are answered.
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.term(T).unwrap();
        },
    );
}

/// The test `name` as a job of `nranks` in which rank 1 presents a different job token:
/// each rank runs `Context::init` and exits 3 with its error on stderr if init fails.
fn job_with_a_wrong_token_on_rank_1(name: &str, nranks: u16) -> gaspi::testing::JobOutcome {
    if is_rank_of(name) {
        match Context::init() {
            Ok(_) => std::process::exit(0),
            Err(e) => {
                eprintln!("init failed: {e}");
                std::process::exit(3);
            }
        }
    }
    let exe = std::env::current_exe().unwrap();
    let mut job = Job::new(nranks, exe);
    job.args = vec!["--exact".into(), name.into(), "--nocapture".into()];
    job.env
        .push((gaspi::testing::TEST_CASE.into(), name.into()));
    job.env
        .push((gaspi::env::INIT_TIMEOUT_MS.into(), "2000".into()));
    job.rank_env.push((
        Rank(1),
        gaspi::env::JOB_TOKEN.into(),
        JobToken([9; 16]).to_hex(),
    ));
    job.timeout = Duration::from_secs(30);
    let out = job.run();
    assert!(!out.timed_out, "{}", out.report());
    out
}

/// One rank presents a different token: it is rejected with a clear error, and rank 0 gives
/// up within its init timeout instead of hanging.
#[test]
fn init_rejects_wrong_token() {
    let out = job_with_a_wrong_token_on_rank_1("init_rejects_wrong_token", 2);
    assert!(
        out.ranks
            .iter()
            .all(|r| r.status.and_then(|s| s.code()) == Some(3)),
        "{}",
        out.report()
    );
    assert!(
        out.ranks[1].stderr.contains("wrong job token"),
        "{}",
        out.report()
    );
    assert!(
        out.ranks[0].stderr.contains("did not join"),
        "{}",
        out.report()
    );
}

/// Rank 1 never joins (its token is wrong, so rank 0 turns it away): when rank 0 gives the
/// job up, rank 2, which had joined and waits for the table, hears which rank never came,
/// instead of finding its connection closed, so its error (what the launcher's blame reads
/// when rank 2 is the first to exit) names rank 1.
#[test]
fn ranks_that_joined_hear_which_rank_did_not() {
    let out = job_with_a_wrong_token_on_rank_1("ranks_that_joined_hear_which_rank_did_not", 3);
    assert!(
        out.ranks[2].stderr.contains("ranks [1] did not join"),
        "{}",
        out.report()
    );
}

/// Nobody listens at the rendezvous: init fails with a clear error within its timeout.
#[test]
fn init_fails_when_rendezvous_unreachable() {
    const NAME: &str = "init_fails_when_rendezvous_unreachable";
    if is_rank_of(NAME) {
        let mut env = JobEnv::from_env().unwrap();
        env.rank = Rank(1);
        let started = Instant::now();
        let err = Context::init_job(Config::default(), env)
            .err()
            .expect("init must fail");
        let took = started.elapsed();
        assert!(matches!(err, Error::Bootstrap(_)), "{err:?}");
        assert!(err.to_string().contains("rendezvous"), "{err}");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(10),
            "{took:?}"
        );
        std::process::exit(0);
    }
    // Start only "rank 1" of a 2-rank job whose rank 0 never comes.
    let exe = std::env::current_exe().unwrap();
    let mut job = Job::new(1, exe);
    job.args = vec!["--exact".into(), NAME.into(), "--nocapture".into()];
    job.env
        .push((gaspi::testing::TEST_CASE.into(), NAME.into()));
    job.env
        .push((gaspi::env::INIT_TIMEOUT_MS.into(), "1000".into()));
    job.env.push((gaspi::env::NRANKS.into(), "2".into()));
    job.timeout = Duration::from_secs(30);
    job.run().assert_success();
}

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

/// `proc_kill`: rank 0 kills rank 1, which dies by SIGKILL; rank 0 learns it as a failure.
#[test]
fn proc_kill_terminates_the_target() {
    const NAME: &str = "proc_kill_terminates_the_target";
    let Some(out) = spmd_job(
        NAME,
        2,
        TransportChoice::Tcp,
        Duration::from_secs(60),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        if ctx.rank() == Rank(0) {
            assert!(
                matches!(ctx.proc_kill(Rank(0), T), Err(Error::InvalidRank { .. })),
                "not on itself"
            );
            ctx.proc_kill(Rank(1), T).unwrap();
            let r = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
            assert!(
                matches!(r, Err(Error::PeerFailed { rank: Rank(1) })),
                "{r:?}"
            );
            assert_eq!(ctx.state_vec()[1], PeerState::Corrupt);
            std::process::exit(0);
        }
        // Rank 1 waits for a notification that never comes: the kill ends it.
        let _ = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
        std::process::exit(4);
    };
    assert!(!out.timed_out, "{}", out.report());
    assert!(
        out.ranks[0].status.is_some_and(|s| s.success()),
        "{}",
        out.report()
    );
    assert_eq!(
        out.ranks[1].status.and_then(|s| s.signal()),
        Some(9),
        "{}",
        out.report()
    );
}

/// Statistics counters count what this rank posted and can be reset.
#[test]
fn statistic_counters() {
    gaspi::testing::spmd("statistic_counters", 2, TransportChoice::Shm, |ctx| {
        let seg = setup(&ctx);
        assert_eq!(ctx.statistic_counter_max(), Counter::ALL.len() as u32);
        for c in Counter::ALL {
            ctx.statistic_counter_reset(c);
        }
        let peer = Rank(1 - ctx.rank().0);
        ctx.write(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            100,
            QueueId(0),
        )
        .unwrap();
        ctx.write_notify(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            50,
            NotificationId(1),
            1,
            QueueId(0),
        )
        .unwrap();
        ctx.read(
            Local::new(seg, 0),
            Remote::new(peer, seg, 0),
            30,
            QueueId(0),
        )
        .unwrap();
        ctx.wait(QueueId(0), T).unwrap();
        ctx.passive_send(seg, 0, peer, 8, T).unwrap();
        ctx.passive_receive(seg, 64, 8, T).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        assert_eq!(ctx.statistic_counter_get(Counter::BytesWritten), 150);
        assert_eq!(ctx.statistic_counter_get(Counter::BytesRead), 30);
        assert_eq!(ctx.statistic_counter_get(Counter::OpsPosted), 4);
        assert_eq!(ctx.statistic_counter_get(Counter::Barriers), 1);
        // Shared-memory peers get passive messages over the TCP control channel.
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentTcp), 1);
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveSentVerbs), 0);
        assert_eq!(ctx.statistic_counter_get(Counter::PassiveReceivedVerbs), 0);
        assert_eq!(Counter::from_index(1).unwrap().info().0, "BytesRead");
        assert_eq!(Counter::from_index(5).unwrap(), Counter::PassiveSentTcp);
        assert!(Counter::from_index(Counter::ALL.len() as u32).is_err());
        ctx.statistic_counter_reset(Counter::BytesWritten);
        assert_eq!(ctx.statistic_counter_get(Counter::BytesWritten), 0);
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
    });
}

/// A goodbye, then a write: nothing after a goodbye is applied, and the peer is marked
/// CORRUPT (not taken as a clean close).
#[test]
fn frames_after_goodbye_are_refused() {
    rank_0_drops_a_bad_peer("frames_after_goodbye_are_refused", || {
        let mut frames = gaspi::testing::raw_bye_frame();
        frames.extend(gaspi::testing::raw_write_frame(0, 0, &[0xEE; 64]));
        frames
    });
}

/// A rank that leaves in order (`term`, exit 0) while the others still need it: their
/// blocking collectives end with `PeerFailed` naming it, over shared memory as over TCP
/// (they used to wait for ever over shared memory). The survivors learn of the departure at
/// different times, so one may fail its barrier at the start while another has entered and
/// waits on it: the first one's abort ends the other's wait (with 5 ranks a survivor waits
/// only on survivors in some rounds).
fn departed_peer(name: &str, transport: TransportChoice, n: u16) {
    let Some(out) = spmd_job(name, n, transport, Duration::from_secs(60), |_| {}) else {
        let ctx = Context::init().unwrap();
        setup(&ctx);
        ctx.barrier(Group::ALL, T).unwrap();
        let last = Rank(n - 1);
        if ctx.rank() == last {
            ctx.term(T).unwrap();
            std::process::exit(0);
        }
        let r = ctx.barrier(Group::ALL, Timeout::BLOCK);
        assert!(
            matches!(r, Err(Error::PeerFailed { rank }) if rank == last),
            "{r:?}"
        );
        let (one, mut sum) = ([1u64], [0u64]);
        let r = ctx.allreduce(&one, &mut sum, ReduceOp::Sum, Group::ALL, Timeout::BLOCK);
        assert!(
            matches!(r, Err(Error::PeerFailed { rank }) if rank == last),
            "{r:?}"
        );
        // The survivors go on in a group of their own.
        let g = ctx.group_create().unwrap();
        for r in 0..n - 1 {
            ctx.group_add(g, Rank(r)).unwrap();
        }
        ctx.group_commit(g, T).unwrap();
        ctx.barrier(g, T).unwrap();
        ctx.allreduce(&one, &mut sum, ReduceOp::Sum, g, T).unwrap();
        assert_eq!(sum[0], u64::from(n - 1));
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
}

#[test]
fn departed_peer_ends_collectives_shm() {
    departed_peer(
        "departed_peer_ends_collectives_shm",
        TransportChoice::Shm,
        3,
    );
}

#[test]
fn departed_peer_ends_collectives_tcp() {
    departed_peer(
        "departed_peer_ends_collectives_tcp",
        TransportChoice::Tcp,
        3,
    );
}

#[test]
fn departed_peer_ends_collectives_shm_5() {
    departed_peer(
        "departed_peer_ends_collectives_shm_5",
        TransportChoice::Shm,
        5,
    );
}

#[test]
fn departed_peer_ends_collectives_tcp_5() {
    departed_peer(
        "departed_peer_ends_collectives_tcp_5",
        TransportChoice::Tcp,
        5,
    );
}

/// Plays strangers at `addr` until `stop`: up to `idle` connections that say nothing, and
/// one that announces a long request and trickles it a byte at a time.
fn strangers(addr: std::net::SocketAddr, idle: usize, stop: Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    let mut quiet = Vec::new();
    let mut trickler: Option<TcpStream> = None;
    while !stop.load(Ordering::Acquire) {
        if quiet.len() < idle {
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) {
                quiet.push(s);
            }
        }
        match trickler.as_mut() {
            None => {
                if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(50)) {
                    // A rendezvous request announcing 1000 bytes, none of which come soon.
                    let _ = s.write_all(&1000u32.to_le_bytes()[..1]);
                    trickler = Some(s);
                }
            }
            Some(s) => {
                let _ = s.write_all(&[0]);
            }
        }
        // Pacing of the load, not a wait for a condition.
        std::thread::sleep(Duration::from_millis(if quiet.len() < idle {
            2
        } else {
            200
        }));
    }
}

/// Strangers at rank 0's rendezvous port (40 silent connections and one trickling a byte now
/// and then) do not stall a job's start: it assembles well within its init timeout. (Rank 0
/// used to serve one connection at a time, giving each 5 s.)
#[test]
fn strangers_at_the_rendezvous_do_not_stall_startup() {
    const NAME: &str = "strangers_at_the_rendezvous_do_not_stall_startup";
    if is_rank_of(NAME) {
        let ctx = Context::init().unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    }
    let port = gaspi::testing::free_port("127.0.0.1".parse().unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || strangers(([127, 0, 0, 1], port).into(), 40, stop))
    };
    let exe = std::env::current_exe().unwrap();
    let mut job = Job::new(3, exe);
    job.transport = TransportChoice::Tcp;
    job.args = vec!["--exact".into(), NAME.into(), "--nocapture".into()];
    job.env
        .push((gaspi::testing::TEST_CASE.into(), NAME.into()));
    job.env
        .push((gaspi::env::INIT_TIMEOUT_MS.into(), "8000".into()));
    job.timeout = Duration::from_secs(30);
    let out = job.run_at(port);
    stop.store(true, std::sync::atomic::Ordering::Release);
    attacker.join().unwrap();
    out.assert_success();
    assert!(out.elapsed < Duration::from_secs(6), "{}", out.report());
}

/// A stranger trickling bytes at the rendezvous cannot hold rank 0 past its init timeout:
/// init fails on time when the other ranks never come.
#[test]
fn trickling_stranger_cannot_extend_the_init_timeout() {
    const NAME: &str = "trickling_stranger_cannot_extend_the_init_timeout";
    if is_rank_of(NAME) {
        let started = Instant::now();
        let err = Context::init()
            .err()
            .expect("rank 1 never comes: init must fail");
        let took = started.elapsed();
        assert!(matches!(err, Error::Bootstrap(_)), "{err:?}");
        assert!(
            took < Duration::from_millis(2500),
            "init failed only after {took:?}"
        );
        std::process::exit(0);
    }
    let port = gaspi::testing::free_port("127.0.0.1".parse().unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || strangers(([127, 0, 0, 1], port).into(), 0, stop))
    };
    // Only rank 0 of a 2-rank job, with a 1 s init timeout.
    let exe = std::env::current_exe().unwrap();
    let mut job = Job::new(1, exe);
    job.args = vec!["--exact".into(), NAME.into(), "--nocapture".into()];
    job.env
        .push((gaspi::testing::TEST_CASE.into(), NAME.into()));
    job.env
        .push((gaspi::env::INIT_TIMEOUT_MS.into(), "1000".into()));
    job.env.push((gaspi::env::NRANKS.into(), "2".into()));
    job.timeout = Duration::from_secs(30);
    let out = job.run_at(port);
    stop.store(true, std::sync::atomic::Ordering::Release);
    attacker.join().unwrap();
    out.assert_success();
}
