//! Running a schedule built for a smaller group inside a larger collective: the
//! hierarchical allreduce runs an ordinary allreduce among the ranks that hold one shard.

use super::action::{Action, Schedule};
use super::shape::align;

/// Where a sub-schedule goes in the enclosing collective.
///
/// A sub-schedule is built as usual, for its own group, over a vector of `data_bytes` with
/// the layout every builder uses: data at `[0, data_bytes)` and staging from
/// `align(data_bytes)` on. Embedding maps
///
/// - its member indices to the enclosing group's (`members[i]` for its member `i`),
/// - its data range to `[data, data + data_bytes)` of the segment,
/// - its staging to `[staging, staging + staging_bytes(sub))`,
/// - its notification ids `0..n` to `first_id..first_id + n`.
///
/// `Divide` stays a division by the number of ranks of the *enclosing* group (the engine
/// divides by the group it runs in), which is what an AVG over the whole group needs where
/// the embedded algorithm holds the final shard.
///
/// Every member of the sub-group must embed with the same data offset, staging offset and
/// first id: a send names the address in the receiver's segment that the sender computes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Embedding<'a> {
    /// Enclosing member index of each of the sub-schedule's member indices.
    pub members: &'a [usize],
    /// Segment offset of the sub-schedule's data range.
    pub data: usize,
    /// Bytes of that data range (the sub-schedule's `count * elem`).
    pub data_bytes: usize,
    /// Segment offset of the sub-schedule's staging.
    pub staging: usize,
    /// Notification id that the sub-schedule's id 0 becomes.
    pub first_id: u32,
}

impl Embedding<'_> {
    /// Bytes of staging `sub` needs beyond its data range.
    pub fn staging_bytes(sub: &Schedule, data_bytes: usize) -> usize {
        sub.segment_bytes.saturating_sub(align(data_bytes))
    }

    /// Appends `actions` (of a sub-schedule), relocated, to `out`.
    pub fn append(&self, actions: &[Action], out: &mut Vec<Action>) {
        out.extend(actions.iter().map(|a| self.action(a)));
    }

    /// One action, relocated.
    pub fn action(&self, a: &Action) -> Action {
        match *a {
            Action::Send {
                to,
                src,
                dst,
                len,
                notif,
            } => Action::Send {
                to: self.members[to],
                src: self.place(src, len),
                dst: self.place(dst, len),
                len,
                notif: self.first_id + notif,
            },
            Action::Recv { notif, from } => Action::Recv {
                notif: self.first_id + notif,
                from: self.members[from],
            },
            Action::Reduce {
                src,
                dst,
                len,
                src_first,
            } => Action::Reduce {
                src: self.place(src, len),
                dst: self.place(dst, len),
                len,
                src_first,
            },
            Action::ReduceFrom {
                from,
                src,
                dst,
                len,
                src_first,
            } => Action::ReduceFrom {
                from: self.members[from],
                src: self.place(src, len),
                dst: self.place(dst, len),
                len,
                src_first,
            },
            Action::CopyFrom {
                from,
                src,
                dst,
                len,
            } => Action::CopyFrom {
                from: self.members[from],
                src: self.place(src, len),
                dst: self.place(dst, len),
                len,
            },
            Action::Divide { off, len } => Action::Divide {
                off: self.place(off, len),
                len,
            },
            Action::Flush => Action::Flush,
        }
    }

    /// The segment offset of the sub-schedule's range `[off, off+len)`: a range lies wholly
    /// in its data or wholly in its staging (bare notifications name offset 0 and move no
    /// bytes).
    fn place(&self, off: usize, len: usize) -> usize {
        if off < self.data_bytes || len == 0 {
            debug_assert!(
                len == 0 || off + len <= self.data_bytes,
                "range straddles data"
            );
            self.data + off
        } else {
            let from = align(self.data_bytes);
            debug_assert!(off >= from, "range between data and staging");
            self.staging + (off - from)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocates_ranks_ranges_and_ids() {
        // A two-member sub-schedule over 40 bytes: data [0, 40), staging from 64.
        let sub = Schedule {
            actions: vec![
                Action::Send {
                    to: 1,
                    src: 8,
                    dst: 64,
                    len: 16,
                    notif: 0,
                },
                Action::Send {
                    to: 1,
                    src: 0,
                    dst: 0,
                    len: 0,
                    notif: 2,
                },
                Action::Recv { notif: 1, from: 1 },
                Action::Reduce {
                    src: 80,
                    dst: 24,
                    len: 16,
                    src_first: true,
                },
                Action::Divide { off: 0, len: 40 },
                Action::Flush,
            ],
            segment_bytes: 96,
            notifications: 3,
        };
        assert_eq!(Embedding::staging_bytes(&sub, 40), 32);
        let e = Embedding {
            members: &[5, 2],
            data: 1000,
            data_bytes: 40,
            staging: 5000,
            first_id: 100,
        };
        let mut out = vec![Action::Flush];
        e.append(&sub.actions, &mut out);
        assert_eq!(
            out,
            [
                Action::Flush,
                Action::Send {
                    to: 2,
                    src: 1008,
                    dst: 5000,
                    len: 16,
                    notif: 100,
                },
                Action::Send {
                    to: 2,
                    src: 1000,
                    dst: 1000,
                    len: 0,
                    notif: 102,
                },
                Action::Recv {
                    notif: 101,
                    from: 2,
                },
                Action::Reduce {
                    src: 5016,
                    dst: 1024,
                    len: 16,
                    src_first: true,
                },
                Action::Divide { off: 1000, len: 40 },
                Action::Flush,
            ]
        );
    }

    #[test]
    fn a_schedule_without_staging_needs_none() {
        let sub = Schedule {
            actions: Vec::new(),
            segment_bytes: 40,
            notifications: 0,
        };
        assert_eq!(Embedding::staging_bytes(&sub, 40), 0);
    }
}
