//! Bad input to every public call of the `gaspi` crate returns the documented error, with the
//! GASPI C return code and a message that names the offending value, and changes nothing:
//! the segment it was aimed at keeps its bytes and notifications, and no queue entry is taken.
//!
//! "Use before init" (`GASPI_ERR_NOINIT`) cannot be expressed in the Rust API: every call is
//! a method of a `Context`, which exists only after a successful init. The C ABI tests it.

use std::fmt::Debug;
use std::time::Duration;

use gaspi::env::TransportChoice;
use gaspi::error::code::*;
use gaspi::*;

const T: Timeout = Timeout::ms(20_000);
const Q: QueueId = QueueId(0);
const S: SegmentId = SegmentId(0); // filled once, never legitimately written afterwards
const SCRATCH: SegmentId = SegmentId(1);
const UNKNOWN: SegmentId = SegmentId(7); // below segment_max, never created
const TOO_HIGH: SegmentId = SegmentId(8); // == segment_max
const SZ: u64 = 4096;
const FILL: u8 = 0x5a;

fn config() -> Config {
    Config {
        queue_size_max: 4,
        segment_max: 8,
        transfer_size_max: 1024,
        ..Default::default()
    }
}

/// Whether `e` is the variant that GASPI code `code` stands for.
fn is_variant(code: i32, e: &Error) -> bool {
    match code {
        ERR_CONFIG => matches!(e, Error::Config(_)),
        ERR_INITED => matches!(e, Error::AlreadyInitialized),
        ERR_NULLPTR => matches!(e, Error::NullPointer(_)),
        ERR_INV_SEGSIZE => matches!(e, Error::InvalidSegmentSize { .. }),
        ERR_INV_SEG => matches!(
            e,
            Error::InvalidSegment { .. } | Error::SegmentExists { .. }
        ),
        ERR_INV_GROUP => matches!(e, Error::InvalidGroup { .. } | Error::GroupChanged { .. }),
        ERR_INV_RANK => matches!(e, Error::InvalidRank { .. } | Error::AlreadyMember { .. }),
        ERR_INV_QUEUE => matches!(e, Error::InvalidQueue { .. }),
        ERR_INV_LOC_OFF => matches!(e, Error::LocalOutOfBounds { .. }),
        ERR_INV_REM_OFF => matches!(e, Error::RemoteOutOfBounds { .. }),
        ERR_INV_COMMSIZE => matches!(e, Error::InvalidCommSize { .. }),
        ERR_INV_NOTIF_VAL => matches!(e, Error::ZeroNotificationValue),
        ERR_INV_NOTIF_ID => matches!(e, Error::NotificationIdOutOfRange { .. }),
        ERR_INV_NUM => matches!(e, Error::InvalidNumber(_)),
        ERR_INV_SIZE => matches!(e, Error::InvalidSize(_)),
        ERR_MANY_GRP => matches!(e, Error::TooManyGroups { .. }),
        QUEUE_FULL => matches!(e, Error::QueueFull { .. }),
        ERR_UNALIGN_OFF => matches!(e, Error::UnalignedOffset { .. }),
        _ => panic!("no variant listed for code {code}"),
    }
}

/// Checks that `res` failed with the variant of GASPI code `code`, that `code()` agrees, and
/// that the message mentions `needle`; returns the error for closer checks.
#[track_caller]
fn check<V: Debug>(what: &str, res: Result<V>, code: i32, needle: &str) -> Error {
    let e = match res {
        Ok(v) => panic!("{what}: succeeded with {v:?}, expected code {code}"),
        Err(e) => e,
    };
    assert!(
        is_variant(code, &e),
        "{what}: {e:?} is not the variant of code {code}"
    );
    assert_eq!(e.code(), code, "{what}: code of {e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(needle),
        "{what}: message {msg:?} does not mention {needle:?}"
    );
    e
}

/// A table of `"what": call => CODE, "needle";` rows, each checked with [`check`].
macro_rules! expect {
    ($($what:literal : $res:expr => $code:expr, $needle:expr;)+) => {
        $( check($what, $res, $code, &$needle); )+
    };
}

fn nid(id: u32) -> NotificationId {
    NotificationId(id)
}

fn elem(local: Local, remote: Remote, size: u64) -> ListElem {
    let (remote_segment, remote_offset) = (remote.segment, remote.offset);
    ListElem {
        local,
        remote_segment,
        remote_offset,
        size,
    }
}

/// Every one-sided call (notification 0, value 1, on segment S) with the same arguments.
fn one_sided(ctx: &Context, l: Local, r: Remote, size: u64, q: QueueId) -> Vec<(&str, Result<()>)> {
    let (list, to) = ([elem(l, r, size)], r.rank);
    vec![
        ("write", ctx.write(l, r, size, q)),
        ("read", ctx.read(l, r, size, q)),
        ("write_notify", ctx.write_notify(l, r, size, nid(0), 1, q)),
        ("read_notify", ctx.read_notify(l, r, size, nid(0), q)),
        ("write_list", ctx.write_list(to, &list, q)),
        ("read_list", ctx.read_list(to, &list, q)),
        (
            "write_list_notify",
            ctx.write_list_notify(to, &list, S, nid(0), 1, q),
        ),
        (
            "read_list_notify",
            ctx.read_list_notify(to, &list, S, nid(0), q),
        ),
    ]
}

fn one_sided_errors(ctx: &Context, peer: Rank) {
    let n = ctx.num_ranks();
    let (l0, r0, nr) = (
        Local::new(S, 0),
        Remote::new(peer, S, 0),
        format!("rank {n}"),
    );
    let (lo, at) = (|s, o| Local::new(s, o), |s, o| Remote::new(peer, s, o));
    #[rustfmt::skip]
    let cases = [
        ("queue 8", l0, r0, 8, QueueId(8), ERR_INV_QUEUE, "queue 8"),
        ("queue 255", l0, r0, 8, QueueId(255), ERR_INV_QUEUE, "queue 255"),
        ("bad rank", l0, Remote::new(Rank(n), S, 0), 8, Q, ERR_INV_RANK, nr.as_str()),
        ("local unknown", lo(UNKNOWN, 0), r0, 8, Q, ERR_INV_SEG, "segment 7"),
        ("remote unknown", l0, at(UNKNOWN, 0), 8, Q, ERR_INV_SEG, "segment 7"),
        ("local too high", lo(TOO_HIGH, 0), r0, 8, Q, ERR_INV_SEG, "segment 8"),
        ("remote too high", l0, at(TOO_HIGH, 0), 8, Q, ERR_INV_SEG, "segment 8"),
        ("local past end", lo(S, SZ - 4), r0, 8, Q, ERR_INV_LOC_OFF, "4092"),
        ("remote past end", l0, at(S, SZ - 4), 8, Q, ERR_INV_REM_OFF, "4092"),
        ("over transfer_size_max", l0, r0, 2048, Q, ERR_INV_COMMSIZE, "2048"),
    ];
    for (case, l, r, size, q, code, needle) in cases {
        for (op, res) in one_sided(ctx, l, r, size, q) {
            let what = format!("{op} ({case})");
            let e = check(&what, res, code, needle);
            let ok = match case {
                "local unknown" => matches!(e, Error::InvalidSegment { rank: None, .. }),
                "remote unknown" => {
                    matches!(e, Error::InvalidSegment { rank: Some(p), .. } if p == peer)
                }
                "local past end" => matches!(
                    e,
                    Error::LocalOutOfBounds {
                        size: SZ,
                        len: 8,
                        ..
                    }
                ),
                "remote past end" => matches!(e, Error::RemoteOutOfBounds { size: SZ, .. }),
                "bad rank" => {
                    matches!(e, Error::InvalidRank { rank, nranks } if rank.0 == n && nranks == n)
                }
                _ => true,
            };
            assert!(ok, "{what}: wrong details in {e:?}");
        }
    }
    // Notification arguments.
    let (big, nn) = (ctx.notification_num(), ctx.notification_num().to_string());
    let list = [elem(l0, r0, 8)];
    expect! {
        "write_notify 0": ctx.write_notify(l0, r0, 8, nid(1), 0, Q) => ERR_INV_NOTIF_VAL, "non-zero";
        "notify 0": ctx.notify(S, peer, nid(1), 0, Q) => ERR_INV_NOTIF_VAL, "non-zero";
        "write_list_notify 0": ctx.write_list_notify(peer, &list, S, nid(1), 0, Q)
            => ERR_INV_NOTIF_VAL, "non-zero";
        "write_notify id": ctx.write_notify(l0, r0, 8, nid(big), 1, Q) => ERR_INV_NOTIF_ID, nn;
        "read_notify id": ctx.read_notify(l0, r0, 8, nid(big), Q) => ERR_INV_NOTIF_ID, nn;
        "notify id": ctx.notify(S, peer, nid(big), 1, Q) => ERR_INV_NOTIF_ID, nn;
        "write_list_notify id": ctx.write_list_notify(peer, &list, S, nid(big), 1, Q)
            => ERR_INV_NOTIF_ID, nn;
        "read_list_notify id": ctx.read_list_notify(peer, &list, S, nid(big), Q)
            => ERR_INV_NOTIF_ID, nn;
        "notify_reset id": ctx.notify_reset(S, nid(big)) => ERR_INV_NOTIF_ID, nn;
        "waitsome range": ctx.notify_waitsome(S, nid(big - 5), 10, T) => ERR_INV_NOTIF_ID, nn;
        "notify bad rank": ctx.notify(S, Rank(n), nid(1), 1, Q) => ERR_INV_RANK, nr;
        "notify unknown": ctx.notify(UNKNOWN, peer, nid(1), 1, Q) => ERR_INV_SEG, "segment 7";
        "notify queue": ctx.notify(S, peer, nid(1), 1, QueueId(9)) => ERR_INV_QUEUE, "queue 9";
        "waitsome unknown": ctx.notify_waitsome(UNKNOWN, nid(0), 1, T) => ERR_INV_SEG, "segment 7";
        "reset unknown": ctx.notify_reset(UNKNOWN, nid(0)) => ERR_INV_SEG, "segment 7";
        // Waiting for none of no notifications has no id to return: refused at once, even
        // with BLOCK (the C call returns success there and leaves first_id alone, as GPI-2).
        "waitsome none": ctx.notify_waitsome(S, nid(3), 0, Timeout::BLOCK)
            => ERR_INV_NUM, "0 notifications from 3";
        "waitsome_from none": ctx.notify_waitsome_from(S, nid(3), 0, peer, Timeout::BLOCK)
            => ERR_INV_NUM, "0 notifications";
        "waitsome none unknown": ctx.notify_waitsome(UNKNOWN, nid(0), 0, Timeout::BLOCK)
            => ERR_INV_SEG, "segment 7";
    }
    // List lengths; a list with one bad element posts nothing.
    let max = ctx.rw_list_elem_max() as usize;
    assert_eq!(max, 255);
    for len in [0, max + 1] {
        let list = vec![elem(l0, r0, 8); len];
        let ops = [
            ("write_list", ctx.write_list(peer, &list, Q)),
            ("read_list", ctx.read_list(peer, &list, Q)),
            (
                "write_list_notify",
                ctx.write_list_notify(peer, &list, S, nid(0), 1, Q),
            ),
            (
                "read_list_notify",
                ctx.read_list_notify(peer, &list, S, nid(0), Q),
            ),
        ];
        for (op, res) in ops {
            check(
                &format!("{op} of {len}"),
                res,
                ERR_INV_NUM,
                &len.to_string(),
            );
        }
    }
    let list = [elem(l0, r0, 8), elem(l0, at(S, SZ), 8)];
    let res = ctx.write_list(peer, &list, Q);
    check("write_list, 2nd element bad", res, ERR_INV_REM_OFF, "4096");
    // Atomics.
    let add = |off, rank, seg| ctx.atomic_fetch_add(seg, off, rank, 1, T);
    let cas = |off, rank, seg| ctx.atomic_compare_swap(seg, off, rank, 0, 1, T);
    expect! {
        "fetch_add unaligned": add(12, peer, S) => ERR_UNALIGN_OFF, "offset 12";
        "compare_swap unaligned": cas(20, peer, S) => ERR_UNALIGN_OFF, "offset 20";
        "fetch_add bad rank": add(0, Rank(n), S) => ERR_INV_RANK, nr;
        "compare_swap bad rank": cas(0, Rank(n), S) => ERR_INV_RANK, nr;
        "fetch_add unknown": add(0, peer, UNKNOWN) => ERR_INV_SEG, "segment 7";
        "compare_swap unknown": cas(0, peer, UNKNOWN) => ERR_INV_SEG, "segment 7";
        "fetch_add past end": add(SZ, peer, S) => ERR_INV_REM_OFF, "4096";
        "compare_swap past end": cas(SZ, peer, S) => ERR_INV_REM_OFF, "4096";
    }
}

fn queue_errors(ctx: &Context, peer: Rank) {
    let q9 = QueueId(9);
    expect! {
        "wait": ctx.wait(q9, T) => ERR_INV_QUEUE, "queue 9";
        "queue_size": ctx.queue_size(q9) => ERR_INV_QUEUE, "queue 9";
        "queue_purge": ctx.queue_purge(q9, T) => ERR_INV_QUEUE, "queue 9";
        "queue_delete": ctx.queue_delete(QueueId(12)) => ERR_INV_QUEUE, "queue 12";
    }
    // queue_size_max is 4.
    let dst = Remote::new(peer, SCRATCH, 8);
    let w = || ctx.write(Local::new(SCRATCH, 0), dst, 8, Q);
    for _ in 0..4 {
        w().unwrap();
    }
    let e = check("5th write", w(), QUEUE_FULL, "queue 0");
    let full = Error::QueueFull {
        queue: Q,
        entries: 4,
        max: 4,
    };
    assert!(
        matches!(
            e,
            Error::QueueFull {
                entries: 4,
                max: 4,
                ..
            }
        ),
        "{e:?}, expected {full:?}"
    );
    ctx.wait(Q, T).unwrap();
    w().unwrap();
    ctx.wait(Q, T).unwrap();
}

fn segment_errors(ctx: &Context, peer: Rank) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let (s3, init, nr) = (SegmentId(3), Alloc::Initialized, format!("rank {n}"));
    // SAFETY (segment_bind below): a null pointer is rejected before any memory is used.
    expect! {
        "alloc size 0": ctx.segment_alloc(s3, 0, init) => ERR_INV_SEGSIZE, "size 0";
        "create size 0": ctx.segment_create(s3, 0, Group::ALL, T, init) => ERR_INV_SEGSIZE, "size 0";
        "alloc id 8": ctx.segment_alloc(TOO_HIGH, 64, init) => ERR_INV_SEG, "segment 8";
        "create bad group": ctx.segment_create(s3, 64, Group(9), T, init)
            => ERR_INV_GROUP, "group 9";
        "register unknown": ctx.segment_register(UNKNOWN, peer, T) => ERR_INV_SEG, "segment 7";
        "register bad rank": ctx.segment_register(S, Rank(n), T) => ERR_INV_RANK, nr;
        "delete unknown": ctx.segment_delete(UNKNOWN) => ERR_INV_SEG, "segment 7";
        "delete id 8": ctx.segment_delete(TOO_HIGH) => ERR_INV_SEG, "segment 8";
        "size unknown": ctx.segment_size(UNKNOWN, me) => ERR_INV_SEG, "segment 7";
        "size bad rank": ctx.segment_size(S, Rank(n)) => ERR_INV_RANK, nr;
        "ptr unknown": ctx.segment_ptr(UNKNOWN) => ERR_INV_SEG, "segment 7";
        "segment unknown": ctx.segment(UNKNOWN).map(|_| ()) => ERR_INV_SEG, "segment 7";
        // SAFETY: a null pointer is refused before anything is bound, so no memory is ever
        // given to the runtime.
        "bind null": unsafe { ctx.segment_bind(SegmentId(4), std::ptr::null_mut(), 64) }
            => ERR_NULLPTR, "null";
    }
    for (what, res) in [
        ("alloc existing", ctx.segment_alloc(S, 64, init)),
        (
            "create existing",
            ctx.segment_create(S, 64, Group::ALL, T, init),
        ),
    ] {
        let e = check(what, res, ERR_INV_SEG, "segment 0 already exists");
        assert!(
            matches!(e, Error::SegmentExists { segment: S }),
            "{what}: {e:?}"
        );
    }
    assert_eq!(
        ctx.segment_size(S, me).unwrap(),
        SZ,
        "a failed create changed segment 0"
    );
    assert_eq!(
        ctx.segment_list(),
        vec![S, SCRATCH],
        "a failed call left a segment behind"
    );
}

fn passive_errors(ctx: &Context, peer: Rank) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let max = ctx.passive_transfer_size_max();
    let send = |seg, off, rank, size| ctx.passive_send(seg, off, rank, size, T);
    expect! {
        "passive_send of 0": send(SCRATCH, 0, peer, 0) => ERR_INV_COMMSIZE, "size 0";
        "passive_send of max+1": send(SCRATCH, 0, peer, max + 1) => ERR_INV_COMMSIZE, "65536";
        "passive_send bad rank": send(SCRATCH, 0, Rank(n), 8) => ERR_INV_RANK, format!("rank {n}");
        "passive_send unknown": send(UNKNOWN, 0, peer, 8) => ERR_INV_SEG, "segment 7";
        "passive_send past end": send(SCRATCH, SZ - 8, peer, 16) => ERR_INV_LOC_OFF, "4088";
        "passive_receive past end": ctx.passive_receive(SCRATCH, SZ - 8, 16, T)
            => ERR_INV_LOC_OFF, "4088";
        "passive_receive unknown": ctx.passive_receive(UNKNOWN, 0, 16, T)
            => ERR_INV_SEG, "segment 7";
    }
    // A message larger than the receive buffer stays queued for a larger receive.
    ctx.passive_send(SCRATCH, 0, me, 100, T).unwrap();
    let res = ctx.passive_receive(SCRATCH, 1024, 50, T);
    check("passive_receive too small", res, ERR_INV_SIZE, "100");
    assert_eq!(
        ctx.passive_receive(SCRATCH, 1024, 100, T).unwrap(),
        (me, 100)
    );
}

fn group_errors(ctx: &Context, peer: Rank) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let (g5, nr) = (Group(5), format!("rank {n}"));
    let mut out = [0u64];
    let g = ctx.group_create().unwrap();
    let gs = format!("group {}", g.0);
    expect! {
        "barrier group 5": ctx.barrier(g5, T) => ERR_INV_GROUP, "group 5";
        "allreduce group 5": ctx.allreduce(&[1u64], &mut out, ReduceOp::Sum, g5, T)
            => ERR_INV_GROUP, "group 5";
        "group_size": ctx.group_size(g5) => ERR_INV_GROUP, "group 5";
        "group_members": ctx.group_members(g5) => ERR_INV_GROUP, "group 5";
        "group_add to group 5": ctx.group_add(g5, me) => ERR_INV_GROUP, "group 5";
        "group_commit group 5": ctx.group_commit(g5, T) => ERR_INV_GROUP, "group 5";
        "group_delete": ctx.group_delete(g5) => ERR_INV_GROUP, "group 5";
        "delete GROUP_ALL": ctx.group_delete(Group::ALL) => ERR_INV_GROUP, "group 0";
        "barrier uncommitted": ctx.barrier(g, T) => ERR_INV_GROUP, gs;
        "allreduce uncommitted": ctx.allreduce(&[1u64], &mut out, ReduceOp::Sum, g, T)
            => ERR_INV_GROUP, gs;
        "group_add bad rank": ctx.group_add(g, Rank(n)) => ERR_INV_RANK, nr;
    }
    ctx.group_add(g, me).unwrap();
    // GPI-2 answers a rank added twice with GASPI_ERR_INV_RANK.
    check(
        "group_add twice",
        ctx.group_add(g, me),
        ERR_INV_RANK,
        "already a member",
    );
    ctx.group_commit(g, T).unwrap();
    if n > 1 {
        // As in GPI-2, a committed group takes new members; it is then refused by its
        // collectives and segment creation until every member has committed it again.
        ctx.group_add(g, peer).unwrap();
        assert_eq!(ctx.group_size(g).unwrap(), 2);
        let changed = format!("group {} changed since its last commit", g.0);
        expect! {
            "barrier after group_add": ctx.barrier(g, T) => ERR_INV_GROUP, changed;
            "allreduce after group_add": ctx.allreduce(&[1u64], &mut out, ReduceOp::Sum, g, T)
                => ERR_INV_GROUP, changed;
            "segment_create after group_add":
                ctx.segment_create(SegmentId(6), SZ, g, T, Alloc::Initialized)
                => ERR_INV_GROUP, changed;
        }
        assert!(matches!(
            ctx.barrier(g, T),
            Err(Error::GroupChanged { group }) if group == g.0
        ));
        assert!(
            ctx.segment_ptr(SegmentId(6)).is_err(),
            "nothing was allocated"
        );
        let g2 = ctx.group_create().unwrap();
        ctx.group_add(g2, peer).unwrap();
        let res = ctx.group_commit(g2, T);
        check(
            "commit without me",
            res,
            ERR_INV_GROUP,
            &format!("group {}", g2.0),
        );
        ctx.group_delete(g2).unwrap();
    }
    let mut made = Vec::new();
    let too_many = loop {
        match ctx.group_create() {
            Ok(g) => made.push(g),
            Err(e) => break e,
        }
        assert!(made.len() <= 64, "group_create never fails");
    };
    let max = ctx.group_max();
    assert_eq!(
        made.len() as u32,
        max - 2,
        "GROUP_ALL, {g} and the new ones fill group_max"
    );
    check(
        "group_create past max",
        Err::<(), _>(too_many),
        ERR_MANY_GRP,
        &max.to_string(),
    );
    for g in made {
        ctx.group_delete(g).unwrap();
    }
    ctx.group_delete(g).unwrap();
    // Small allreduce arguments.
    let all = Group::ALL;
    let big = vec![1u64; ctx.allreduce_elem_max() as usize + 1];
    let (mut big_out, mut two, mut o12) = (big.clone(), [0u64; 2], [0u8; 12]);
    let mut first = |a: &[u8], _: &[u8], o: &mut [u8]| -> Result<()> {
        o.copy_from_slice(a);
        Ok(())
    };
    // No elements: a synchronisation of the group, as in GPI-2.
    ctx.allreduce::<u64>(&[], &mut [], ReduceOp::Sum, all, T)
        .unwrap();
    let wide = vec![0u8; 200 * 16];
    let mut wide_out = wide.clone();
    expect! {
        "allreduce of 256": ctx.allreduce(&big, &mut big_out, ReduceOp::Sum, all, T)
            => ERR_INV_NUM, "256";
        "allreduce output size": ctx.allreduce(&[1u64], &mut two, ReduceOp::Sum, all, T)
            => ERR_INV_SIZE, "16";
        "allreduce_user elem 0": ctx.allreduce_user(&[0; 12], &mut o12, 0, &mut first, all, T)
            => ERR_INV_SIZE, "0";
        "allreduce_user 12 of 8": ctx.allreduce_user(&[0; 12], &mut o12, 8, &mut first, all, T)
            => ERR_INV_SIZE, "12";
        "allreduce_user past allreduce_buf_size":
            ctx.allreduce_user(&wide, &mut wide_out, 16, &mut first, all, T)
            => ERR_INV_SIZE, "allreduce_buf_size, 2040";
    }
}

fn bad_arguments(ctx: Context) {
    let (me, n) = (ctx.rank(), ctx.num_ranks());
    let peer = Rank((me.0 + 1) % n);
    let (all, init) = (Group::ALL, Alloc::Initialized);
    ctx.segment_create(S, SZ, all, T, init).unwrap();
    ctx.segment_create(SCRATCH, SZ, all, T, init).unwrap();
    let seg = ctx.segment(S).unwrap();
    seg.fill(0, SZ, FILL).unwrap();
    ctx.barrier(all, T).unwrap();

    let (nr, mr) = (format!("rank {n}"), format!("rank {}", me.0));
    expect! {
        "second init": Context::init().map(|_| ()) => ERR_INITED, "already initialized";
        "second init_with": Context::init_with(config()).map(|_| ()) => ERR_INITED, "already";
        "proc_ping": ctx.proc_ping(Rank(n), T) => ERR_INV_RANK, nr;
        "proc_kill": ctx.proc_kill(Rank(n), T) => ERR_INV_RANK, nr;
        "proc_kill self": ctx.proc_kill(me, T) => ERR_INV_RANK, mr;
        "connect": ctx.connect(Rank(n), T) => ERR_INV_RANK, nr;
        "disconnect": ctx.disconnect(Rank(n), T) => ERR_INV_RANK, nr;
    }
    assert!(Context::initialized());
    one_sided_errors(&ctx, peer);
    assert_eq!(
        ctx.queue_size(Q).unwrap(),
        0,
        "rejected posts took queue entries"
    );
    queue_errors(&ctx, peer);
    segment_errors(&ctx, peer);
    passive_errors(&ctx, peer);
    group_errors(&ctx, peer);

    // Nothing above touched segment 0 anywhere, and the runtime still works.
    ctx.barrier(all, T).unwrap();
    let mut bytes = vec![0u8; SZ as usize];
    seg.read(0, &mut bytes).unwrap();
    let changed = bytes.iter().position(|b| *b != FILL);
    assert!(changed.is_none(), "byte {changed:?} of segment 0 changed");
    let res = ctx.notify_waitsome(S, nid(0), ctx.notification_num(), Timeout::TEST);
    assert!(
        matches!(res, Err(Error::Timeout)),
        "a rejected call set a notification: {res:?}"
    );
    let mut sum = [0u64];
    ctx.allreduce(&[1u64], &mut sum, ReduceOp::Sum, all, T)
        .unwrap();
    assert_eq!(sum[0], u64::from(n));
    ctx.barrier(all, T).unwrap();
    ctx.term(T).unwrap();
}

fn run(case: &str, n: u16, t: TransportChoice) {
    let name = format!("bad_arguments_{case}");
    let limit = Duration::from_secs(60);
    gaspi::testing::spmd_with(&name, n, t, config(), limit, bad_arguments);
}

#[test]
fn bad_arguments_single() {
    run("single", 1, TransportChoice::Auto);
}

#[test]
fn bad_arguments_tcp_2() {
    run("tcp_2", 2, TransportChoice::Tcp);
}

#[test]
fn bad_arguments_tcp_3() {
    run("tcp_3", 3, TransportChoice::Tcp);
}

#[test]
fn bad_arguments_shm_2() {
    run("shm_2", 2, TransportChoice::Shm);
}

#[test]
fn bad_arguments_shm_4() {
    run("shm_4", 4, TransportChoice::Shm);
}

/// Over the fake verbs device (passive messages to peers go over SEND/RECV there).
#[test]
fn bad_arguments_verbs_3() {
    tarantella_tests::run_case(
        "bad_arguments_verbs_3",
        3,
        tarantella_tests::Net::FakeVerbs,
        config(),
        Duration::from_secs(60),
        bad_arguments,
    );
}

/// `Config` validation names the field and the value; `init_with` rejects the same configs
/// before it looks at the environment (no `Context` is created in this harness process).
#[test]
fn config_validation() {
    let d = Config::default;
    #[rustfmt::skip]
    let bad: Vec<(Config, &str)> = vec![
        (Config { queue_num: 0, ..d() }, "queue_num 0"),
        (Config { queue_num: 17, ..d() }, "queue_num 17"),
        (Config { queue_size_max: 0, ..d() }, "queue_size_max 0"),
        (Config { queue_size_max: 4097, ..d() }, "queue_size_max 4097"),
        (Config { segment_max: 0, ..d() }, "segment_max 0"),
        (Config { segment_max: 256, ..d() }, "segment_max 256"),
        (Config { group_max: 257, ..d() }, "group_max 257"),
        (Config { transfer_size_max: (1 << 30) + 1, ..d() }, "transfer_size_max 1073741825"),
        (Config { passive_transfer_size_max: 65536, ..d() }, "passive_transfer_size_max 65536"),
        (Config { rw_list_elem_max: 0, ..d() }, "rw_list_elem_max 0"),
        (Config { rw_list_elem_max: 256, ..d() }, "rw_list_elem_max 256"),
        (Config { network: NetworkType::Gemini, ..d() }, "Gemini"),
    ];
    for (c, needle) in bad {
        check(
            &format!("validate, {needle}"),
            c.validate(),
            ERR_CONFIG,
            needle,
        );
        let res = Context::init_with(c).map(|_| ());
        check(&format!("init_with, {needle}"), res, ERR_CONFIG, needle);
    }
    assert!(!Context::initialized());
    let edges = [
        Config {
            queue_num: 16,
            queue_size_max: 4096,
            ..d()
        },
        Config {
            queue_num: 1,
            queue_size_max: 1,
            segment_max: 1,
            group_max: 1,
            ..d()
        },
    ];
    for c in edges {
        c.validate().unwrap();
    }
    // GPI-2 accepts these: every one resolves (0 means the default where GPI-2 takes 0).
    #[rustfmt::skip]
    let gpi2 = [
        Config { allreduce_elem_max: 1_000_000, ..d() },
        Config { allreduce_elem_max: 0, ..d() },
        Config { allreduce_buf_size: 8, ..d() },
        Config { group_max: 255, ..d() },
        Config { group_max: 0, ..d() },
        Config { notification_num: 0, ..d() },
        Config { notification_num: 2 * 65536, ..d() },
        Config { transfer_size_max: 0, ..d() },
        Config { passive_queue_size_max: 0, ..d() },
        Config { passive_transfer_size_max: 0, ..d() },
    ];
    for c in gpi2 {
        let r = c.resolve().unwrap_or_else(|e| panic!("{c:?}: {e}"));
        r.validate().unwrap();
    }
    assert_eq!(error_str(ERR_INV_NOTIF_VAL), "invalid notification value");
}
