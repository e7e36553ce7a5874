//! Runs a rank's [`Schedule`] against gaspi, resumably: `advance` goes as far as it can
//! before its deadline and picks up at the same action on the next call.

use std::sync::Arc;

use gaspi::{Deadline, Local, NotificationId, QueueId, Rank, Remote};

use crate::element::Element;
use crate::error::{Error, Result};
use crate::reduction::Reduction;
use crate::region::OwnedSegment;
use crate::schedule::{Action, Schedule};

/// The typed kernels an engine needs, fixed when the collective is built.
#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    /// [`OwnedSegment::reduce`] for the element type.
    reduce: fn(&OwnedSegment, Reduction, usize, usize, usize, bool),
    /// [`OwnedSegment::reduce_from`] for the element type.
    reduce_from: fn(&OwnedSegment, &gaspi::Segment, Reduction, usize, usize, usize, bool),
    /// [`OwnedSegment::divide`] for the element type.
    divide: fn(&OwnedSegment, usize, usize, usize),
}

impl Kernels {
    /// The kernels for elements of `T`: the engine itself is not generic.
    pub fn of<T: Element>() -> Self {
        Kernels {
            reduce: OwnedSegment::reduce::<T>,
            reduce_from: OwnedSegment::reduce_from::<T>,
            divide: OwnedSegment::divide::<T>,
        }
    }
}

/// Where an engine's runs post their sends.
pub(crate) enum Queue {
    /// The queue the options named, for every run.
    Given(QueueId),
    /// A queue of the context's collectives' pool (`queue.rs`), taken by each run the
    /// first time it is moved forward and given back when it ends; `Some` while a run
    /// holds one.
    Pooled(Option<crate::queue::Held>),
}

/// One rank's side of a set-up collective: its schedules and where the current run stands.
/// Driven by the caller or by a driver thread (see `driver.rs`), never by both.
pub(crate) struct Engine {
    /// The collective's segment (data and staging).
    pub seg: Arc<OwnedSegment>,
    /// The group's ranks, indexed as the schedules' `to` fields.
    members: Vec<Rank>,
    /// The queue sends are posted on.
    queue: Queue,
    /// Runs cycle through these schedules.
    plan: Vec<Schedule>,
    /// Reduce and divide for the element type.
    kernels: Kernels,
    /// What `Reduce` actions apply.
    reduction: Reduction,
    /// Runs completed.
    runs: u64,
    /// The next action of the active run.
    cursor: usize,
    /// A run was started and has not completed.
    active: bool,
    /// A failure is reported by gaspi once; keep it so later calls do not wait for ever.
    failed: Option<Arc<Error>>,
    /// Members' segments read in place (`ReduceFrom`, `CopyFrom`), looked up on first use.
    peers: Vec<Option<gaspi::Segment>>,
    /// `CopyFrom` streams past the cache (`stream_copy::worth_streaming`).
    stream_copies: bool,
    /// The largest write the context takes (`transfer_size_max`): longer sends go in
    /// pieces.
    transfer_max: u64,
    /// Bytes of the `Send` at the cursor already posted, when a wait for room on the queue
    /// timed out between its pieces.
    piece_at: u64,
}

impl Engine {
    /// An engine with no run started yet.
    pub fn new(
        seg: Arc<OwnedSegment>,
        members: Vec<Rank>,
        queue: Queue,
        plan: Vec<Schedule>,
        kernels: Kernels,
        reduction: Reduction,
        stream_copies: bool,
    ) -> Self {
        Engine {
            stream_copies,
            transfer_max: seg.ctx.transfer_size_max(),
            piece_at: 0,
            seg,
            peers: vec![None; members.len()],
            members,
            queue,
            plan,
            kernels,
            reduction,
            runs: 0,
            cursor: 0,
            active: false,
            failed: None,
        }
    }

    /// True while a started run has not completed.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// Runs completed so far.
    pub fn completed_runs(&self) -> u64 {
        self.runs
    }

    /// Where the engine stands (changes whenever it performs an action).
    pub fn position(&self) -> (u64, usize) {
        (self.runs, self.cursor)
    }

    /// Why a run failed, if one did (the engine cannot run again).
    pub fn failure(&self) -> Option<Arc<Error>> {
        self.failed.clone()
    }

    /// Starts a run from the first action of the next schedule of the plan.
    pub fn start(&mut self) -> Result<()> {
        if self.active {
            return Err(Error::InFlight);
        }
        if let Some(cause) = &self.failed {
            return Err(Error::Failed(Arc::clone(cause)));
        }
        self.active = true;
        self.cursor = 0;
        self.piece_at = 0;
        Ok(())
    }

    /// Advances the active run; `Ok(true)` once it is complete (also when none is active),
    /// [`Error::Failed`] once a run has failed.
    pub fn advance(&mut self, deadline: Deadline) -> Result<bool> {
        // A failed run is reported by every later call, `test` included (as by a driver
        // thread), not taken for a completed one.
        if let Some(cause) = &self.failed {
            return Err(Error::Failed(Arc::clone(cause)));
        }
        if !self.active {
            return Ok(true);
        }
        match self.run_actions(deadline) {
            Ok(done) => Ok(done),
            Err(e) if e.is_timeout() => Ok(false),
            Err(e) => {
                let cause = Arc::new(e);
                self.failed = Some(Arc::clone(&cause));
                self.active = false;
                self.give_back_queue(false);
                Err(Error::Failed(cause))
            }
        }
    }

    /// Performs actions from the cursor on until the run completes (`Ok(true)`) or a wait
    /// passes `deadline` (a timeout error: the cursor stays on the action that waited).
    fn run_actions(&mut self, deadline: Deadline) -> Result<bool> {
        let queue = match &mut self.queue {
            Queue::Given(q) => *q,
            Queue::Pooled(Some(held)) => held.id(),
            Queue::Pooled(held @ None) => held.insert(crate::queue::take(&self.seg.ctx)).id(),
        };
        let ctx = &self.seg.ctx;
        let seg = self.seg.id;
        let schedule = &self.plan[(self.runs % self.plan.len() as u64) as usize];
        // Notification values carry the run number (never 0), which helps when debugging.
        let value = (self.runs % u64::from(u32::MAX)) as u32 + 1;
        while let Some(action) = schedule.actions.get(self.cursor) {
            match *action {
                Action::Send {
                    to,
                    src,
                    dst,
                    len,
                    notif,
                } => {
                    let rank = self.members[to];
                    // A write longer than the transport takes goes in pieces, the
                    // notification with the last: gaspi sets it only after everything
                    // posted before on the queue to that rank (one queue pair per peer and
                    // queue on verbs, one ordered stream per peer on TCP, synchronous copies
                    // on shared memory; a peer moved from verbs to TCP between two pieces gets
                    // the TCP piece only once the verbs ones are complete). Why here rather
                    // than as separate actions: the limit is the context's, and a plan the
                    // same on every rank (some ranks' blocks are larger than others') must
                    // not fail on some ranks only. A timeout while waiting for room leaves
                    // `piece_at` where it got, and the resumed run goes on from there.
                    let (len, max) = (len as u64, self.transfer_max.max(1));
                    loop {
                        let at = self.piece_at;
                        let piece = (len - at).min(max);
                        let last = at + piece == len;
                        let (local, remote) = (
                            Local::new(seg, (src as u64) + at),
                            Remote::new(rank, seg, (dst as u64) + at),
                        );
                        let id = NotificationId(notif);
                        let post = || match (len, last) {
                            (0, _) => ctx.notify(seg, rank, id, value, queue),
                            (_, true) => ctx.write_notify(local, remote, piece, id, value, queue),
                            (_, false) => ctx.write(local, remote, piece, queue),
                        };
                        // A queue shared with others (a given one, or the fallback) may be
                        // full again after the wait: wait again, until the deadline.
                        let mut posted = post();
                        while let Err(gaspi::Error::QueueFull { .. }) = posted {
                            ctx.wait(queue, deadline.timeout())?;
                            posted = post();
                        }
                        posted?;
                        if last {
                            self.piece_at = 0;
                            break;
                        }
                        self.piece_at += piece;
                    }
                }
                Action::Recv { notif, from } => {
                    let id = NotificationId(notif);
                    // Only the sender's failure or departure ends this wait: a member that
                    // left after its part, or a rank outside the group, does not.
                    let from = self.members[from];
                    ctx.notify_waitsome_from(seg, id, 1, from, deadline.timeout())?;
                    ctx.notify_reset(seg, id)?;
                }
                Action::Reduce {
                    src,
                    dst,
                    len,
                    src_first,
                } => (self.kernels.reduce)(&self.seg, self.reduction, src, dst, len, src_first),
                Action::ReduceFrom {
                    from,
                    src,
                    dst,
                    len,
                    src_first,
                } => {
                    let peer = peer_view(&mut self.peers, &self.members, &self.seg, from)?;
                    let reduce_from = self.kernels.reduce_from;
                    reduce_from(&self.seg, peer, self.reduction, src, dst, len, src_first)
                }
                Action::CopyFrom {
                    from,
                    src,
                    dst,
                    len,
                } => {
                    let peer = peer_view(&mut self.peers, &self.members, &self.seg, from)?;
                    self.seg.copy_from(peer, src, dst, len, self.stream_copies)
                }
                Action::Divide { off, len } => {
                    (self.kernels.divide)(&self.seg, off, len, self.members.len())
                }
                Action::Flush => ctx.wait(queue, deadline.timeout())?,
            }
            self.cursor += 1;
        }
        self.active = false;
        self.runs += 1;
        // Every schedule ends with a flush: nothing it posted is left on the queue.
        self.give_back_queue(true);
        Ok(true)
    }

    /// Gives the run's pooled queue back, if it holds one; `drained`: nothing it posted is
    /// still on it.
    fn give_back_queue(&mut self, drained: bool) {
        if let Queue::Pooled(held) = &mut self.queue {
            if let Some(held) = held.take() {
                crate::queue::give_back(&self.seg.ctx, held, drained);
            }
        }
    }
}

impl Drop for Engine {
    /// A run dropped before it ended may have requests in flight on its queue.
    fn drop(&mut self) {
        self.give_back_queue(false);
    }
}

/// Member `from`'s segment as mapped here, looked up once (it exists from setup on: the
/// collective's segment is created on every member before the first run).
fn peer_view<'a>(
    peers: &'a mut [Option<gaspi::Segment>],
    members: &[Rank],
    seg: &OwnedSegment,
    from: usize,
) -> Result<&'a gaspi::Segment> {
    let view = match peers[from].take() {
        Some(view) => view,
        None => seg.ctx.peer_segment(members[from], seg.id)?,
    };
    Ok(peers[from].insert(view))
}
