//! Hostile and broken connections: corrupt frames, wrong job tokens, frames after a
//! goodbye, strangers at the rendezvous, and an init that cannot assemble.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{setup, take, T};
use gaspi::env::{JobEnv, JobToken, TransportChoice};
use gaspi::testing::{is_rank_of, spmd_job, Job};
use gaspi::*;

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
    job_with_a_wrong_token_on_rank_1_and(name, nranks, |_| {})
}

/// [`job_with_a_wrong_token_on_rank_1`], with `adjust` applied to the job before it runs.
fn job_with_a_wrong_token_on_rank_1_and(
    name: &str,
    nranks: u16,
    adjust: impl FnOnce(&mut Job),
) -> gaspi::testing::JobOutcome {
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
    adjust(&mut job);
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
///
/// Rank 2's own init timeout is 200 ms shorter than rank 0's, so its deadline passes first,
/// as it can by a few milliseconds when ranks start together on a busy host (this test
/// failed that way once with equal timeouts): a rank that has joined waits a little past its
/// own deadline for rank 0's verdict.
#[test]
fn ranks_that_joined_hear_which_rank_did_not() {
    let out = job_with_a_wrong_token_on_rank_1_and(
        "ranks_that_joined_hear_which_rank_did_not",
        3,
        |job| {
            job.rank_env
                .push((Rank(2), gaspi::env::INIT_TIMEOUT_MS.into(), "1800".into()));
        },
    );
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

/// Rank 2 stops reading what rank 0 sends and then asks it for 1 MiB reads, more than a
/// peer that reads can be owed (the first few answers fit in the connection's buffers):
/// rank 0 queues the answers up to the limit, then fails rank 2 instead of queuing without
/// bound. Ranks 0 and 1 carry on.
#[test]
fn a_peer_that_asks_but_never_reads_the_answers_is_failed() {
    const NAME: &str = "a_peer_that_asks_but_never_reads_the_answers_is_failed";
    // Rank 1 tells rank 2 that rank 0 is done with it: rank 2 reads nothing from rank 0,
    // and leaving earlier would reset its connections before rank 0 has read every request.
    const DONE: u32 = 5;
    let Some(out) = spmd_job(
        NAME,
        3,
        TransportChoice::Tcp,
        Duration::from_secs(60),
        |_| {},
    ) else {
        let ctx = Context::init().unwrap();
        let seg = setup(&ctx);
        ctx.barrier(Group::ALL, T).unwrap();
        let tell = |to: u16| {
            ctx.notify(seg, Rank(to), NotificationId(DONE), 1, QueueId(0))
                .unwrap();
            ctx.wait(QueueId(0), T).unwrap();
        };
        match ctx.rank().0 {
            2 => {
                ctx.stop_receiving_from(Rank(0)).unwrap();
                let requests = gaspi::testing::ANSWER_BACKLOG_MAX + 64;
                let mut frames = Vec::new();
                for req in 1..=requests as u64 {
                    frames.extend(gaspi::testing::raw_read_request(0, 0, 1 << 20, req));
                }
                ctx.send_raw_frame(Rank(0), frames).unwrap();
                take(&ctx, seg, DONE);
                std::process::exit(0);
            }
            0 => {
                let r = ctx.notify_waitsome(seg, NotificationId(0), 1, T);
                assert!(
                    matches!(r, Err(Error::PeerFailed { rank: Rank(2) })),
                    "{r:?}"
                );
                assert_eq!(ctx.state_vec()[2], PeerState::Corrupt);
                tell(1);
            }
            _ => {
                take(&ctx, seg, DONE);
                tell(2);
            }
        }
        let g = ctx.group_create().unwrap();
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
        ctx.group_commit(g, T).unwrap();
        ctx.barrier(g, T).unwrap();
        ctx.term(T).unwrap();
        std::process::exit(0);
    };
    out.assert_success();
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

/// Rank 1 stops a write into rank 0's bound user memory half-way; rank 0 deletes the segment
/// and unmaps the memory (as a user may once `segment_delete` returns); the rest of the
/// payload then arrives. It must be read and dropped, not written into the unmapped pages
/// (a crash, or a failed receive that drops rank 1), and the link carries on.
#[test]
fn payload_arriving_after_segment_delete_does_not_touch_the_freed_memory() {
    use std::num::NonZeroUsize;

    use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};

    const NAME: &str = "payload_arriving_after_segment_delete_does_not_touch_the_freed_memory";
    const BOUND: SegmentId = SegmentId(1);
    const LEN: usize = 1 << 16;
    const FIRST: usize = 4096;
    gaspi::testing::spmd(NAME, 2, TransportChoice::Tcp, |ctx| {
        let seg = setup(&ctx);
        let header = gaspi::testing::raw_write_frame(BOUND.0, 0, &[]).len();
        let frame = gaspi::testing::raw_write_frame(BOUND.0, 0, &[0xAB; LEN]);
        if ctx.rank() == Rank(0) {
            let len = NonZeroUsize::new(LEN).unwrap();
            let prot = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
            // SAFETY: a fresh private mapping, used only through the segment until unmapped.
            let pages = unsafe { mmap_anonymous(None, len, prot, MapFlags::MAP_PRIVATE) }.unwrap();
            let data = pages.as_ptr() as *mut u8;
            // SAFETY: the mapping is valid until the munmap below, which follows the delete.
            unsafe { ctx.segment_bind(BOUND, data, LEN as u64) }.unwrap();
            ctx.segment_register(BOUND, Rank(1), T).unwrap();
            ctx.barrier(Group::ALL, T).unwrap();
            // The first part of rank 1's write has landed: the frame is under way.
            let deadline = Instant::now() + Duration::from_secs(20);
            // SAFETY: in bounds of the mapping; read while the runtime may write other bytes.
            let landed = || (0..FIRST).all(|i| unsafe { data.add(i).read_volatile() } == 0xAB);
            while !landed() {
                assert!(Instant::now() < deadline, "the first part never landed");
                std::thread::yield_now();
            }
            ctx.segment_delete(BOUND).unwrap();
            // SAFETY: the segment is deleted; nothing of ours refers to the mapping any more.
            unsafe { munmap(pages, LEN) }.unwrap();
            ctx.notify(seg, Rank(1), NotificationId(1), 1, QueueId(0))
                .unwrap();
            // Rank 1's next write comes after the rest of the stopped one, on the same link.
            take(&ctx, seg, 2);
            assert_eq!(ctx.state_vec()[1], PeerState::Healthy);
        } else {
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.send_raw_frame(Rank(0), frame[..header + FIRST].to_vec())
                .unwrap();
            take(&ctx, seg, 1);
            ctx.send_raw_frame(Rank(0), frame[header + FIRST..].to_vec())
                .unwrap();
            ctx.write_notify(
                Local::new(seg, 0),
                Remote::new(Rank(0), seg, 0),
                64,
                NotificationId(2),
                1,
                QueueId(0),
            )
            .unwrap();
            ctx.wait(QueueId(0), T).unwrap();
        }
        ctx.barrier(Group::ALL, T).unwrap();
    });
}
