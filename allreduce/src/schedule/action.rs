//! What a schedule is made of: the [`Action`]s one rank performs, in order, and the
//! [`Schedule`] that lists them with the segment space and notification ids they need.

/// One step of a schedule. Offsets and lengths are in bytes within the segment; ranks are
/// indices into the group's member list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// `write_notify` of `[src, src+len)` to `to`'s `[dst, dst+len)` with notification
    /// `notif`; `len == 0` sends the notification alone.
    Send {
        to: usize,
        src: usize,
        dst: usize,
        len: usize,
        notif: u32,
    },
    /// Waits for notification `notif`, which member `from` sets, and resets it. Only
    /// `from`'s failure or departure ends the wait early: a member that failed or left
    /// after doing its part, or a rank outside the group, does not stop this run.
    Recv { notif: u32, from: usize },
    /// `data[dst..dst+len] = op(staging[src..], data[dst..])`, with the staging operand first
    /// when `src_first`.
    Reduce {
        src: usize,
        dst: usize,
        len: usize,
        src_first: bool,
    },
    /// `data[dst..dst+len] = op(peer[src..], data[dst..])` where `peer` is member `from`'s
    /// segment, read in place (a peer on this host, reached through shared memory), with the
    /// peer's operand first when `src_first`.
    ReduceFrom {
        from: usize,
        src: usize,
        dst: usize,
        len: usize,
        src_first: bool,
    },
    /// Copies member `from`'s `[src, src+len)` into our `[dst, dst+len)`, read in place (a
    /// peer on this host).
    CopyFrom {
        from: usize,
        src: usize,
        dst: usize,
        len: usize,
    },
    /// Divides `[off, off+len)` by the number of ranks (the last step of AVG).
    Divide { off: usize, len: usize },
    /// Waits until every send posted so far is complete locally (its source may change).
    Flush,
}

impl Action {
    /// A bare notification `notif` to `to` (a `Send` of no bytes).
    pub(crate) fn notify(to: usize, notif: u32) -> Action {
        Action::Send {
            to,
            src: 0,
            dst: 0,
            len: 0,
            notif,
        }
    }
}

/// A rank's part of a collective.
#[derive(Clone, Debug, Default)]
pub(crate) struct Schedule {
    pub actions: Vec<Action>,
    /// Segment bytes the schedule touches (data and staging).
    pub segment_bytes: usize,
    /// Notification ids used: `0..notifications`.
    pub notifications: u32,
}
