//! Schedules replayed on symbols: the expression each element of each rank's result is
//! folded along.

use crate::schedule::{Action, Schedule};

/// Replays the ranks' schedules on symbols instead of numbers: every element of every rank's
/// segment holds the expression that produced it (`x3` for rank 3's input, `(a∘b)` for a
/// reduce with `a` first). Sends are delivered when posted, which is one legal order of a
/// correct schedule; the expressions do not depend on the order.
pub(super) fn symbolic_results(scheds: &[Schedule], count: usize) -> Vec<Vec<String>> {
    let p = scheds.len();
    let words = |bytes: usize| bytes / 8;
    let size = scheds.iter().map(|s| s.segment_bytes).max().unwrap_or(0);
    let notifs = scheds.iter().map(|s| s.notifications).max().unwrap_or(0) as usize;
    let mut mem: Vec<Vec<String>> = (0..p)
        .map(|r| {
            let mut m = vec![String::from("?"); words(size).max(count)];
            m[..count].fill(format!("x{r}"));
            m
        })
        .collect();
    let mut notif: Vec<Vec<Option<usize>>> = vec![vec![None; notifs]; p];
    let mut cursor = vec![0usize; p];
    loop {
        let mut moved = false;
        for i in 0..p {
            while let Some(action) = scheds[i].actions.get(cursor[i]) {
                match *action {
                    Action::Send {
                        to,
                        src,
                        dst,
                        len,
                        notif: id,
                    } => {
                        let data = mem[i][words(src)..words(src + len)].to_vec();
                        mem[to][words(dst)..words(dst + len)].clone_from_slice(&data);
                        notif[to][id as usize] = Some(i);
                    }
                    Action::Recv { notif: id, from } => {
                        let Some(sender) = notif[i][id as usize] else {
                            break;
                        };
                        assert_eq!(sender, from, "rank {i}: notification {id}'s sender");
                        notif[i][id as usize] = None;
                    }
                    Action::Reduce {
                        src,
                        dst,
                        len,
                        src_first,
                    } => fold(
                        &mut mem,
                        (i, words(src)),
                        (i, words(dst)),
                        words(len),
                        src_first,
                    ),
                    Action::ReduceFrom {
                        from,
                        src,
                        dst,
                        len,
                        src_first,
                    } => fold(
                        &mut mem,
                        (from, words(src)),
                        (i, words(dst)),
                        words(len),
                        src_first,
                    ),
                    Action::CopyFrom {
                        from,
                        src,
                        dst,
                        len,
                    } => {
                        let data = mem[from][words(src)..words(src + len)].to_vec();
                        mem[i][words(dst)..words(dst + len)].clone_from_slice(&data);
                    }
                    Action::Divide { .. } | Action::Flush => {}
                }
                cursor[i] += 1;
                moved = true;
            }
        }
        if cursor
            .iter()
            .zip(scheds)
            .all(|(&c, s)| c == s.actions.len())
        {
            return mem.into_iter().map(|m| m[..count].to_vec()).collect();
        }
        assert!(moved, "deadlock: every rank waits");
    }
}

/// Folds `n` words of rank `src.0`'s segment from word `src.1` into rank `dst.0`'s from word
/// `dst.1`, as `(source∘destination)` if `src_first`, else the other way round.
fn fold(
    mem: &mut [Vec<String>],
    src: (usize, usize),
    dst: (usize, usize),
    n: usize,
    src_first: bool,
) {
    for w in 0..n {
        let (s, d) = (&mem[src.0][src.1 + w], &mem[dst.0][dst.1 + w]);
        let folded = if src_first {
            format!("({s}∘{d})")
        } else {
            format!("({d}∘{s})")
        };
        mem[dst.0][dst.1 + w] = folded;
    }
}
