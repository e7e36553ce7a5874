//! A check of schedules that does not depend on the order the ranks happen to run in: vector
//! clocks carried by the notifications say which actions surely come before which, and the
//! check reports
//! - a notification id set again where the receive that took its last value does not surely
//!   come first (or set while its last value is still untaken);
//! - two accesses to the same bytes of a rank's memory, one of them a write, that nothing
//!   orders (a race);
//! - a deadlock.
//!
//! Why beside the model (`model.rs`): the model delivers sends at random points and steps a
//! random rank at a time, so a rank seldom falls a whole run behind its peers, and an id
//! reused too early, or a peer's buffer refilled too early, shows in few of its orders (one
//! seed in about 1200 for the hierarchical allreduce's push without its condition, in
//! session 25's review). Here every order counts at once.
//!
//! A send's write into the target and its read of the source are asynchronous: they are
//! surely done by the receive that takes its notification, and the read also by the
//! sender's next `Flush`. Between two runs the application reads the result and refills
//! the rank's data.

use std::collections::HashMap;

use crate::schedule::{Action, Schedule};

/// Rank and the value of its own clock entry: an action of that rank.
type Event = (usize, u32);

/// One access to bytes `[lo, hi)` of rank `owner`'s memory.
struct Access {
    owner: usize,
    lo: usize,
    hi: usize,
    write: bool,
    /// The accessing rank's clock when the access began.
    start: Vec<u32>,
    /// Events by which the access is surely done (any one suffices).
    done_by: Vec<Event>,
    what: String,
}

impl Access {
    /// Surely done before `later` begins.
    fn before(&self, later: &Access) -> bool {
        self.done_by.iter().any(|&(r, t)| later.start[r] >= t)
    }
}

/// A send in flight: the indices of its accesses, the write into the target and the read
/// of the source (whose `start` is the sender's clock at the post).
struct Posted {
    write: usize,
    read: usize,
}

/// Everything wrong with `schedules` (per rank, the schedules its runs cycle through) over
/// `runs` back-to-back runs on ranks whose data is `data_bytes` long; empty if nothing is.
pub(super) fn violations(
    schedules: &[Vec<Schedule>],
    data_bytes: usize,
    runs: usize,
) -> Vec<String> {
    let p = schedules.len();
    let mut clock = vec![vec![0u32; p]; p];
    let mut cursor = vec![0usize; p];
    let mut run = vec![0usize; p];
    // Notifications set and not yet taken, by (rank, id): the send that set them.
    let mut set: HashMap<(usize, u32), usize> = HashMap::new();
    // The receive that last took each notification.
    let mut taken: HashMap<(usize, u32), Event> = HashMap::new();
    let mut posted: Vec<Posted> = Vec::new();
    let mut unflushed: Vec<Vec<usize>> = vec![Vec::new(); p];
    let mut accesses: Vec<Access> = Vec::new();
    let mut wrong = Vec::new();
    let synchronous = |clock: &[u32], r: usize, owner, lo, hi, write, what: &str| Access {
        owner,
        lo,
        hi,
        write,
        start: clock.to_vec(),
        done_by: vec![(r, clock[r])],
        what: what.to_string(),
    };
    while run.iter().any(|&q| q < runs) {
        let mut moved = false;
        for r in 0..p {
            // Rank `r` goes on until it waits for a notification not yet set.
            while run[r] < runs {
                let schedule = &schedules[r][run[r] % schedules[r].len()];
                clock[r][r] += 1;
                let now = clock[r][r];
                let Some(action) = schedule.actions.get(cursor[r]) else {
                    let what = format!("rank {r}'s application after run {}", run[r]);
                    accesses.push(synchronous(&clock[r], r, r, 0, data_bytes, true, &what));
                    run[r] += 1;
                    cursor[r] = 0;
                    moved = true;
                    continue;
                };
                let what = format!("rank {r} run {} action {} {action:?}", run[r], cursor[r]);
                match *action {
                    Action::Send {
                        to,
                        src,
                        dst,
                        len,
                        notif,
                    } => {
                        let key = (to, notif);
                        if set.contains_key(&key) {
                            wrong.push(format!("{what}: sets a notification not yet taken"));
                        } else if let Some(&(t, at)) = taken.get(&key) {
                            if clock[r][t] < at {
                                wrong.push(format!("{what}: may set it before its last take"));
                            }
                        }
                        let async_access = |owner, lo, write, what: String| Access {
                            owner,
                            lo,
                            hi: lo + len,
                            write,
                            start: clock[r].clone(),
                            done_by: Vec::new(),
                            what,
                        };
                        accesses.push(async_access(to, dst, true, format!("{what} (write)")));
                        accesses.push(async_access(r, src, false, format!("{what} (read)")));
                        let n = accesses.len();
                        set.insert(key, posted.len());
                        unflushed[r].push(posted.len());
                        posted.push(Posted {
                            write: n - 2,
                            read: n - 1,
                        });
                    }
                    Action::Recv { notif, .. } => {
                        let Some(i) = set.remove(&(r, notif)) else {
                            // Not set yet: wait (the tick is undone; nothing happened).
                            clock[r][r] -= 1;
                            break;
                        };
                        let Posted { write, read } = posted[i];
                        // What the sender had seen at the post, we have now seen.
                        for (mine, theirs) in clock[r].iter_mut().zip(&accesses[write].start) {
                            *mine = (*mine).max(*theirs);
                        }
                        taken.insert((r, notif), (r, now));
                        accesses[write].done_by.push((r, now));
                        accesses[read].done_by.push((r, now));
                    }
                    Action::Reduce { src, dst, len, .. } => {
                        accesses.push(synchronous(&clock[r], r, r, src, src + len, false, &what));
                        accesses.push(synchronous(&clock[r], r, r, dst, dst + len, true, &what));
                    }
                    Action::ReduceFrom {
                        from,
                        src,
                        dst,
                        len,
                        ..
                    }
                    | Action::CopyFrom {
                        from,
                        src,
                        dst,
                        len,
                        ..
                    } => {
                        accesses.push(synchronous(
                            &clock[r],
                            r,
                            from,
                            src,
                            src + len,
                            false,
                            &what,
                        ));
                        accesses.push(synchronous(&clock[r], r, r, dst, dst + len, true, &what));
                    }
                    Action::Divide { off, len } => {
                        accesses.push(synchronous(&clock[r], r, r, off, off + len, true, &what));
                    }
                    Action::Flush => {
                        for i in std::mem::take(&mut unflushed[r]) {
                            accesses[posted[i].read].done_by.push((r, now));
                        }
                    }
                }
                cursor[r] += 1;
                moved = true;
            }
        }
        if !moved {
            // The accesses up to here are still checked.
            wrong.push(format!("deadlock: actions {cursor:?}, runs {run:?}"));
            break;
        }
    }
    wrong.extend(races(&accesses, p));
    wrong
}

/// Pairs of overlapping accesses to one rank's memory, one a write, neither surely before
/// the other.
fn races(accesses: &[Access], ranks: usize) -> Vec<String> {
    let mut by_owner: Vec<Vec<&Access>> = vec![Vec::new(); ranks];
    for a in accesses.iter().filter(|a| a.hi > a.lo) {
        by_owner[a.owner].push(a);
    }
    let mut found = Vec::new();
    for mut list in by_owner {
        list.sort_by_key(|a| a.lo);
        for (i, a) in list.iter().enumerate() {
            for b in list[i + 1..].iter().take_while(|b| b.lo < a.hi) {
                if (a.write || b.write) && !a.before(b) && !b.before(a) {
                    found.push(format!(
                        "race on rank {}'s [{}, {}) and [{}, {}): {} and {}",
                        a.owner, a.lo, a.hi, b.lo, b.hi, a.what, b.what
                    ));
                    if found.len() >= 10 {
                        return found;
                    }
                }
            }
        }
    }
    found
}

use super::hierarchical::{hier, layout, INTERS, LAYOUTS, MEMORIES};
use super::model::{shapes, COUNTS};
use crate::schedule::{
    broadcast_chain, broadcast_tree, one_shot, rabenseifner, recursive_doubling, ring, single_copy,
    Shape,
};

/// Three runs of every rank's schedules (`build` gives them from the rank's shape) of
/// `count` 8-byte elements, in chunks of `chunk` bytes with ring staging of three chunks.
fn check(
    name: &str,
    p: usize,
    count: usize,
    chunk: usize,
    build: impl Fn(&Shape) -> Vec<Schedule>,
) {
    let schedules: Vec<Vec<Schedule>> = shapes(p, count, chunk, 3 * chunk)
        .map(|sh| build(&sh))
        .collect();
    let wrong = violations(&schedules, count * 8, 3);
    assert!(
        wrong.is_empty(),
        "{name}, {p} ranks, {count} elements: {wrong:#?}"
    );
}

#[test]
fn flat_algorithms_order_every_access_and_notification() {
    for p in 2..=5 {
        for count in COUNTS {
            check("ring", p, count, 16, |sh| vec![ring(sh, false)]);
            check("rabenseifner", p, count, 16, |sh| {
                vec![rabenseifner(sh, false)]
            });
            check("rd", p, count, 16, |sh| {
                (0..2).map(|q| recursive_doubling(sh, false, q)).collect()
            });
            check("one-shot", p, count, 16, |sh| {
                (0..2).map(|q| one_shot(sh, false, q)).collect()
            });
            for in_cache in [true, false] {
                check("single-copy", p, count, 16, |sh| {
                    vec![single_copy(&Shape { in_cache, ..*sh }, false)]
                });
            }
        }
    }
}

#[test]
fn broadcasts_order_every_access_and_notification() {
    for p in 2..=5 {
        for count in COUNTS {
            for root in 0..p {
                check("tree", p, count, 40, |sh| vec![broadcast_tree(sh, root)]);
                check("chain", p, count, 40, |sh| vec![broadcast_chain(sh, root)]);
            }
        }
    }
}

#[test]
fn hierarchical_orders_every_access_and_notification() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in COUNTS {
            for memories in MEMORIES {
                for pieces in [1, 3] {
                    for (inter, build) in INTERS {
                        let name = format!("{hosts:?} {memories:?} {pieces} pieces {inter}");
                        let build = hier(&hosts, pieces, memories, build);
                        check(&name, p, count, 8, |sh| build(sh, false));
                    }
                }
            }
        }
    }
}

/// The check is not blind: it finds a rank that refills its buffer while a peer still
/// reads it, a notification set again too early, and a deadlock.
#[test]
fn the_check_finds_races_early_notifications_and_deadlocks() {
    // Single-copy pushing, with its waits for the peers' finished blocks dropped: the rank
    // ends its run (and the application refills its buffer) while peers may still read it
    // and write into it, and sets its *ready* of the next run before they took this one.
    let without_finals = |sh: &Shape| {
        let mut s = single_copy(sh, false);
        // Pushing, the schedule ends with the waits for the p-1 finals, then a flush.
        let flush = s.actions.len() - 1;
        assert!(matches!(s.actions[flush - 1], Action::Recv { .. }));
        s.actions.drain(flush - (sh.ranks - 1)..flush);
        vec![s]
    };
    let schedules: Vec<Vec<Schedule>> = shapes(3, 100, 16, 48)
        .map(|sh| without_finals(&sh))
        .collect();
    let wrong = violations(&schedules, 800, 3);
    assert!(wrong.iter().any(|w| w.starts_with("race")), "{wrong:#?}");
    let early = |w: &&String| w.contains("not yet taken") || w.contains("before its last take");
    assert!(wrong.iter().any(|w| early(&w)), "{wrong:#?}");
    // Two ranks that each wait before they send.
    let waits_first = |to: usize| {
        vec![Schedule {
            actions: vec![
                Action::Recv { notif: 0, from: to },
                Action::Send {
                    to,
                    src: 0,
                    dst: 0,
                    len: 0,
                    notif: 0,
                },
            ],
            segment_bytes: 8,
            notifications: 1,
        }]
    };
    let wrong = violations(&[waits_first(1), waits_first(0)], 8, 1);
    assert!(
        wrong.iter().any(|w| w.starts_with("deadlock")),
        "{wrong:#?}"
    );
}
