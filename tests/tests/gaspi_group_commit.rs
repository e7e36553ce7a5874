//! `group_commit` after commits of the same group id that failed: members whose histories of
//! the id differ (a commit that listed other members, one abandoned after a timeout while a
//! peer never joined) still agree on the next commit with the same members, and GPI-2's
//! retry of a timed-out commit still resumes it. Multi-process tests on 3 ranks over TCP,
//! shared memory and the fake verbs device; every commit has a time bound, and the harness
//! kills a job after 60 s.

#[macro_use]
mod common;

use common::*;
use tarantella_tests::spmd_cases;

/// The commits that must succeed: ample on a loaded machine, and a commit waiting for a
/// registration that never comes (the bug these tests guard against) fails well inside the
/// harness's bound.
const COMMIT: Timeout = Timeout::ms(10_000);

/// The commits meant to fail: they cannot complete, so this is only how long they take.
const SHORT: Timeout = Timeout::ms(1_500);

/// What a commit that cannot complete returns: `Timeout`, or, where a member's list was seen
/// to differ, `InvalidGroup` saying so; never success.
fn failed(res: Result<()>) {
    assert!(
        matches!(
            res,
            Err(Error::Timeout)
                | Err(Error::InvalidGroup {
                    why: "members differ between ranks",
                    ..
                })
        ),
        "expected the commit to fail: {res:?}"
    );
}

/// `g` works on all ranks of the job: a barrier, and an allreduce that every rank adds to.
fn works_on_all(ctx: &Context, g: Group) {
    let n = u64::from(ctx.num_ranks());
    assert_eq!(ctx.group_size(g).unwrap(), ctx.num_ranks().into());
    ctx.barrier(g, T).unwrap();
    let mut sum = [0u64];
    let mine = [u64::from(ctx.rank().0) + 1];
    ctx.allreduce(&mine, &mut sum, ReduceOp::Sum, g, T).unwrap();
    assert_eq!(sum[0], n * (n + 1) / 2);
}

/// Commits `g` (it must succeed), checks that it works on all ranks, deletes it and ends
/// this rank.
fn commit_use_and_delete(ctx: Context, g: Group) {
    ctx.group_commit(g, COMMIT).unwrap();
    works_on_all(&ctx, g);
    ctx.group_delete(g).unwrap();
    finish(ctx);
}

fn add_all(ctx: &Context, g: Group) {
    for r in 0..ctx.num_ranks() {
        ctx.group_add(g, Rank(r)).unwrap();
    }
}

/// (a) Rank 1 lists `{0, 1}`, ranks 0 and 2 list `{0, 1, 2}`: the commit fails on all three
/// (0 and 1 see each other's list differ; 2 waits for 1, which did not list it). Then rank 1
/// adds rank 2 and all commit again: 0 and 2 resume their commit, 1 begins a new one, one
/// generation ahead of 0 for their pair. That commit succeeds and the group works.
fn lists_differ_then_agree(ctx: Context) {
    let me = ctx.rank().0;
    let g = ctx.group_create().unwrap();
    if me == 1 {
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
    } else {
        add_all(&ctx, g);
    }
    ctx.barrier(Group::ALL, T).unwrap();
    let res = ctx.group_commit(g, SHORT);
    if me == 2 {
        timed_out(res);
    } else {
        failed(res);
    }
    ctx.barrier(Group::ALL, T).unwrap();
    if me == 1 {
        ctx.group_add(g, Rank(2)).unwrap();
    }
    commit_use_and_delete(ctx, g);
}

spmd_cases! {
    lists_differ, lists_differ_then_agree,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm), verbs_3 = (3, FakeVerbs),
}

/// (b) Rank 0 commits `{0, 1, 2}` alone and gives up after the timeout; it deletes the
/// group and makes it anew (the same id), so its next commit is a new one, a generation
/// ahead of ranks 1 and 2, which never committed the id. All three then commit `{0, 1, 2}`:
/// it succeeds, although 1 and 2 may still hold rank 0's registration of the abandoned
/// commit (with the same members) when they begin.
fn abandoned_then_recreated(ctx: Context) {
    if ctx.rank().0 == 0 {
        let g = ctx.group_create().unwrap();
        add_all(&ctx, g);
        timed_out(ctx.group_commit(g, SHORT));
        ctx.group_delete(g).unwrap();
    }
    ctx.barrier(Group::ALL, T).unwrap();
    let g = ctx.group_create().unwrap();
    assert_eq!(g, Group(1), "the ids agree");
    add_all(&ctx, g);
    commit_use_and_delete(ctx, g);
}

spmd_cases! {
    abandoned_recreated, abandoned_then_recreated,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm), verbs_3 = (3, FakeVerbs),
}

/// (b') Rank 0 commits `{0, 1}` alone and gives up; rank 1 never joined. Rank 0 then adds
/// rank 2 and all three commit `{0, 1, 2}`: rank 0 is a generation ahead of rank 1 for
/// their pair, and the commit succeeds.
fn abandoned_then_grown(ctx: Context) {
    let me = ctx.rank().0;
    let g = ctx.group_create().unwrap();
    if me == 0 {
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
        timed_out(ctx.group_commit(g, SHORT));
        ctx.group_add(g, Rank(2)).unwrap();
    } else {
        add_all(&ctx, g);
    }
    ctx.barrier(Group::ALL, T).unwrap();
    commit_use_and_delete(ctx, g);
}

spmd_cases! {
    abandoned_grown, abandoned_then_grown,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// GPI-2's retry: ranks 0 and 1 commit `{0, 1, 2}` while rank 2 does not yet; both time
/// out. All three then commit it (0 and 1 resume theirs) and it succeeds, as in GPI-2.
fn timed_out_then_resumed(ctx: Context) {
    let me = ctx.rank().0;
    let g = ctx.group_create().unwrap();
    add_all(&ctx, g);
    if me != 2 {
        timed_out(ctx.group_commit(g, SHORT));
    }
    ctx.barrier(Group::ALL, T).unwrap();
    commit_use_and_delete(ctx, g);
}

spmd_cases! {
    resumed, timed_out_then_resumed,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// How long a commit polled with a short timeout may take in all: it completes in
/// milliseconds; a commit that makes no progress from one call to the next (each call
/// starting over) never does, and fails the test here, well inside the harness's bound.
const POLL_LIMIT: Duration = Duration::from_secs(20);

/// Calls `group_commit(g, timeout)` until it succeeds, as GPI-2 codes do with `GASPI_TEST`
/// (`while (gaspi_group_commit(g, GASPI_TEST) == GASPI_TIMEOUT) {}`): every call must make
/// progress, so that the loop ends however short the timeout.
fn commit_polling(ctx: &Context, g: Group, timeout: Timeout) {
    let start = Instant::now();
    let mut calls = 0u64;
    loop {
        calls += 1;
        match ctx.group_commit(g, timeout) {
            Ok(()) => return,
            Err(Error::Timeout) => assert!(
                start.elapsed() < POLL_LIMIT,
                "commit polled with {timeout:?} did not complete in {POLL_LIMIT:?} ({calls} calls)"
            ),
            Err(e) => panic!("commit polled with {timeout:?} failed after {calls} calls: {e}"),
        }
    }
}

/// Every rank polls the commit of `{0, 1, 2}` with `timeout` until it succeeds, and the
/// group works; three groups in a row (the id reused), each deleted after a barrier of all.
fn polled_with(ctx: Context, timeout: Timeout) {
    for _ in 0..3 {
        let g = ctx.group_create().unwrap();
        add_all(&ctx, g);
        commit_polling(&ctx, g, timeout);
        works_on_all(&ctx, g);
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.group_delete(g).unwrap();
    }
    finish(ctx);
}

fn polled_test(ctx: Context) {
    polled_with(ctx, Timeout::TEST);
}

fn polled_1ms(ctx: Context) {
    polled_with(ctx, Timeout::ms(1));
}

spmd_cases! {
    polled_with_test, polled_test,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

spmd_cases! {
    polled_with_1ms, polled_1ms,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// Rounds of the tests below: the race they provoke is likely in a round, not certain.
const ROUNDS: usize = 100;

/// A member that completes its commit first deletes the group at once: its deletion may
/// reach a peer before the peer's commit has looked at the mark that said this member had
/// seen the peer's registration. The others still complete their commit, every round.
fn deleted_at_once(ctx: Context) {
    for round in 0..ROUNDS {
        let g = ctx.group_create().unwrap();
        add_all(&ctx, g);
        if let Err(e) = ctx.group_commit(g, COMMIT) {
            panic!("round {round}: commit failed: {e}");
        }
        ctx.group_delete(g).unwrap();
        ctx.barrier(Group::ALL, T).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    deleted_at_once_, deleted_at_once,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// As above, but the first of ranks 0 and 1 to complete their commit of `{0, 1}` adds rank
/// 2 and commits again at once (rank 2 commits `{0, 1, 2}` from the start): the peer still
/// in the first commit finds the next generation's registration where the mark it waits for
/// was, and must still complete the first commit, then the second with all three.
fn grown_at_once(ctx: Context) {
    let me = ctx.rank().0;
    for round in 0..ROUNDS {
        let g = ctx.group_create().unwrap();
        if me < 2 {
            ctx.group_add(g, Rank(0)).unwrap();
            ctx.group_add(g, Rank(1)).unwrap();
            if let Err(e) = ctx.group_commit(g, COMMIT) {
                panic!("round {round}: commit of {{0, 1}} failed: {e}");
            }
            ctx.group_add(g, Rank(2)).unwrap();
        } else {
            add_all(&ctx, g);
        }
        if let Err(e) = ctx.group_commit(g, COMMIT) {
            panic!("round {round}: commit of {{0, 1, 2}} failed: {e}");
        }
        works_on_all(&ctx, g);
        ctx.barrier(Group::ALL, T).unwrap();
        ctx.group_delete(g).unwrap();
    }
    finish(ctx);
}

spmd_cases! {
    grown_at_once_, grown_at_once,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// How long a commit that finds its group deleted may take to say so: the deletion wakes it
/// at once. A commit left waiting for the member that never comes would take its whole
/// timeout, or never return.
const PROMPT: Duration = Duration::from_secs(5);

/// Commits `g` with `timeout` in a thread of scope `s`; the receiver gets its result and
/// how long it took.
fn commit_in<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    ctx: &'s Context,
    g: Group,
    timeout: Timeout,
) -> std::sync::mpsc::Receiver<(Result<()>, Duration)> {
    let (tx, rx) = std::sync::mpsc::channel();
    s.spawn(move || {
        let start = Instant::now();
        let res = ctx.group_commit(g, timeout);
        let _ = tx.send((res, start.elapsed()));
    });
    rx
}

/// The commit of [`commit_in`], whose group was just deleted, returns within [`PROMPT`]
/// saying so.
fn stopped_by_the_deletion(commit: &std::sync::mpsc::Receiver<(Result<()>, Duration)>) {
    let Ok((res, took)) = commit.recv_timeout(PROMPT) else {
        // The scope would wait for the commit forever: end the rank, failing.
        eprintln!("the commit of a deleted group did not return within {PROMPT:?}");
        std::process::exit(1);
    };
    assert!(
        matches!(
            res,
            Err(Error::InvalidGroup {
                why: "deleted while committing",
                ..
            })
        ),
        "expected the commit to see the deletion: {res:?} after {took:?}"
    );
}

/// Polls the commit of `g` (whose members differ from rank 0's) until it says so: rank 0's
/// announcement has come.
fn poll_until_members_differ(ctx: &Context, g: Group) {
    let start = Instant::now();
    loop {
        match ctx.group_commit(g, Timeout::TEST) {
            Err(Error::Timeout) => assert!(
                start.elapsed() < POLL_LIMIT,
                "rank 0's announcement never came"
            ),
            Err(Error::InvalidGroup {
                why: "members differ between ranks",
                ..
            }) => break,
            res => panic!("expected the members to differ: {res:?}"),
        }
    }
}

/// A group deleted by one thread while another thread of the same rank commits it: rank 0
/// commits `{0, 1, 2}` in a second thread with `timeout`, and rank 2 never commits, so the
/// commit cannot complete. Rank 1 commits `{0, 1}`, polling until it reports that the
/// members differ: then rank 0's announcement has reached it, so rank 0's commit is under
/// way. Rank 0's main thread then deletes the group: the commit returns `InvalidGroup`
/// ("deleted while committing") at once, well before its timeout. Afterwards all ranks
/// make the same id anew, commit it and use it. With `at_once`, rank 0 makes the id anew
/// and a third thread begins committing it right after the deletion, while the first
/// commit may still be returning: nothing of the deleted group's commit (its segment, an
/// announcement of its generation) may disturb the new one.
fn deleted_while_committing_with(ctx: Context, timeout: Timeout, at_once: bool) {
    let me = ctx.rank().0;
    let g = ctx.group_create().unwrap();
    if me == 1 {
        ctx.group_add(g, Rank(0)).unwrap();
        ctx.group_add(g, Rank(1)).unwrap();
    } else {
        add_all(&ctx, g);
    }
    match me {
        0 => std::thread::scope(|s| {
            let c = &ctx;
            let commit = commit_in(s, c, g, timeout);
            // Rank 1 has seen this rank's announcement: the commit is under way.
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.group_delete(g).unwrap();
            let again = at_once.then(|| {
                assert_eq!(ctx.group_create().unwrap(), g, "the id is free again");
                add_all(c, g);
                s.spawn(move || c.group_commit(g, COMMIT))
            });
            stopped_by_the_deletion(&commit);
            if let Some(again) = again {
                ctx.barrier(Group::ALL, T).unwrap();
                again.join().unwrap().unwrap();
                works_on_all(c, g);
                ctx.group_delete(g).unwrap();
            }
        }),
        1 => {
            poll_until_members_differ(&ctx, g);
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.group_delete(g).unwrap();
        }
        _ => {
            ctx.barrier(Group::ALL, T).unwrap();
            ctx.group_delete(g).unwrap();
        }
    }
    if me == 0 && at_once {
        return finish(ctx);
    }
    ctx.barrier(Group::ALL, T).unwrap();
    let g = ctx.group_create().unwrap();
    assert_eq!(g, Group(1), "the ids agree");
    add_all(&ctx, g);
    commit_use_and_delete(ctx, g);
}

fn deleted_while_committing_block(ctx: Context) {
    deleted_while_committing_with(ctx, Timeout::BLOCK, false);
}

fn deleted_while_committing_long(ctx: Context) {
    deleted_while_committing_with(ctx, Timeout::ms(50_000), false);
}

fn deleted_and_recreated_at_once(ctx: Context) {
    deleted_while_committing_with(ctx, Timeout::BLOCK, true);
}

spmd_cases! {
    deleted_while_blocking, deleted_while_committing_block,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

spmd_cases! {
    deleted_while_waiting_long, deleted_while_committing_long,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

spmd_cases! {
    deleted_and_recreated, deleted_and_recreated_at_once,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}

/// A commit waiting for the acknowledgement of a member that is alive but takes nothing in
/// (a hung rank) stops when the group is deleted, too. Rank 1 stops taking in what rank 0
/// sends, so rank 0's announcement to it is never acknowledged. Rank 0 commits `{0, 1, 2}`
/// in a second thread without a timeout; rank 2 commits `{0, 2}`, polling until it reports
/// that the members differ: rank 0 announces to its peers in rank order, so both
/// announcements are out and the commit waits for rank 1's acknowledgement. Rank 0 then
/// deletes the group: the commit returns `InvalidGroup` ("deleted while committing") at
/// once. Notifications on segment [`S`] order the steps (rank 2 relays between ranks 0 and
/// 1, which cannot hear rank 0).
fn deleted_while_waiting_for_an_ack(ctx: Context) {
    const STOPPED: u32 = 1;
    const SEEN: u32 = 2;
    const DONE: u32 = 3;
    let seg = setup(&ctx);
    ctx.barrier(Group::ALL, T).unwrap();
    let tell = |to: u16, id: u32| {
        ctx.notify(seg, Rank(to), nid(id), 1, Q).unwrap();
        ctx.wait(Q, T).unwrap();
    };
    match ctx.rank().0 {
        1 => {
            ctx.stop_receiving_from(Rank(0)).unwrap();
            tell(2, STOPPED);
            take(&ctx, seg, DONE);
            // Rank 0 cannot be told goodbye in order: leave as a hung rank's kill would.
            std::process::exit(0);
        }
        2 => {
            take(&ctx, seg, STOPPED);
            tell(0, STOPPED);
            let g = ctx.group_create().unwrap();
            ctx.group_add(g, Rank(0)).unwrap();
            ctx.group_add(g, Rank(2)).unwrap();
            poll_until_members_differ(&ctx, g);
            tell(0, SEEN);
            take(&ctx, seg, DONE);
            tell(1, DONE);
            ctx.group_delete(g).unwrap();
        }
        _ => {
            take(&ctx, seg, STOPPED);
            let g = ctx.group_create().unwrap();
            add_all(&ctx, g);
            std::thread::scope(|s| {
                let commit = commit_in(s, &ctx, g, Timeout::BLOCK);
                take(&ctx, seg, SEEN);
                ctx.group_delete(g).unwrap();
                stopped_by_the_deletion(&commit);
            });
            tell(2, DONE);
        }
    }
    ctx.term(T).unwrap();
}

spmd_cases! {
    deleted_while_waiting_for_an_ack_, deleted_while_waiting_for_an_ack,
    tcp_3 = (3, Tcp), shm_3 = (3, Shm),
}
