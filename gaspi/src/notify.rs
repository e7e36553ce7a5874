//! Notifications: `notify`, `notify_waitsome`, `notify_reset`, and the waiting strategy every
//! blocking wait on segment state uses (spin briefly, then yield, then sleep on the segment's
//! futex, so oversubscribed ranks never burn a core for long).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::backoff::nap_for;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::segment_memory::SegmentMemory;
use crate::types::{Deadline, NotificationId, QueueId, Rank, SegmentId, Timeout};

/// How long a waiter yields before it sleeps (after its spin, `backoff::spin_for`): longer
/// than a futex wake-up takes to be scheduled, so two ranks that answer each other do not
/// both fall into sleeping and pay that latency on every message. Not longer: the
/// scheduler keeps picking a thread that yields (its run time hardly grows), so on a host
/// with more busy threads than cores yielding waiters take time from the ranks that have
/// work. 1 ms made a 4 KiB allreduce of 4 ranks on 2 cores 15% faster over TCP, but a
/// 16 MiB one 15% slower (medians of 5 alternating rounds; docs/allreduce.md).
const YIELD_FOR: Duration = Duration::from_micros(250);
/// A sleeping waiter re-checks at least this often (defensive; every change also wakes it).
const MAX_SLEEP: Duration = Duration::from_millis(200);

/// Which peers' failure ends a wait.
pub(crate) enum Watch<'a> {
    /// A failure of any rank that this counter has not seen yet; each failure is reported
    /// once per counter, so waits after it work normally again (fault-tolerant codes go on).
    Unreported(&'a AtomicU64),
    /// A wait for what `from` sets (a step of a collective, or `notify_waitsome_from`): its
    /// failure or departure (`term`) ends the wait. Other members are not watched: one that failed or left after doing
    /// its part of this collective does not stop us from completing it (a malicious peer
    /// that sends garbage after the barrier, say). A collective that cannot complete because
    /// a member had failed or left before it began fails at its start (see
    /// `Context::check_members`).
    Collective { from: Rank },
}

impl Context {
    /// Waits on `mem` until `check` yields a value, the deadline passes ([`Error::Timeout`]),
    /// or a watched peer fails ([`Error::PeerFailed`]).
    pub(crate) fn wait_on<T>(
        &self,
        mem: &SegmentMemory,
        deadline: Deadline,
        watch: Watch<'_>,
        check: impl Fn() -> Option<T>,
    ) -> Result<T> {
        let failed = || match &watch {
            Watch::Unreported(seen) => (self.sh.state.failures() > seen.load(Ordering::Acquire))
                .then(|| self.sh.state.last_failed()),
            Watch::Collective { from } => self.sh.state.first_unreachable(std::iter::once(*from)),
        };
        let start = Instant::now();
        // While this thread polls TCP itself, arriving frames need not wake the progress
        // thread (see `TcpTransport::hold_inbound`).
        let tcp = self.tcp.as_ref().filter(|_| self.sh.routes.any_tcp());
        let mut hold = None;
        loop {
            self.sh.check_open()?;
            if let Some(v) = check() {
                return Ok(v);
            }
            if let Some(rank) = failed() {
                if let Watch::Unreported(seen) = &watch {
                    seen.store(self.sh.state.failures(), Ordering::Release);
                }
                return Err(Error::PeerFailed { rank });
            }
            let left = deadline.remaining();
            if left.is_some_and(|d| d.is_zero()) {
                return Err(Error::Timeout);
            }
            let waited = start.elapsed();
            if waited < YIELD_FOR {
                // Take in TCP traffic on this thread rather than wait for the progress thread
                // to be scheduled (see `TcpTransport::poll_inbound`).
                if let Some(tcp) = tcp {
                    hold.get_or_insert_with(|| tcp.hold_inbound());
                    if tcp.poll_inbound() {
                        // Look at once: yielding first would hand our core away just as what
                        // we wait for may have come in.
                        continue;
                    }
                }
            } else if hold.take().is_some() {
                // This thread sleeps from here on: the progress thread takes frames in.
                tcp.inspect(|tcp| tcp.hand_back_inbound());
            }
            if waited < self.sh.wait_spin {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
            } else if waited < YIELD_FOR {
                std::thread::yield_now();
            } else if self.sh.verbs.is_some() {
                // RDMA writes wake no futex: poll with naps that grow with the wait.
                let nap = nap_for(waited);
                std::thread::sleep(left.map_or(nap, |d| d.min(nap)));
            } else {
                let nap = left.map_or(MAX_SLEEP, |d| d.min(MAX_SLEEP));
                mem.sleep_unless(nap, || {
                    check().is_some() || failed().is_some() || self.sh.check_open().is_err()
                });
            }
        }
    }

    fn check_notification(
        &self,
        mem: &SegmentMemory,
        seg: SegmentId,
        first: u32,
        num: u32,
    ) -> Result<()> {
        let max = mem.notif_count();
        if first.checked_add(num).is_none_or(|end| end > max) {
            return Err(Error::NotificationIdOutOfRange {
                id: first,
                num,
                max,
            });
        }
        let _ = seg;
        Ok(())
    }

    /// Sets notification `id` of `rank`'s segment `seg` to `value` (`gaspi_notify`), ordered
    /// after everything posted before on `queue` to that rank.
    pub fn notify(
        &self,
        seg: SegmentId,
        rank: Rank,
        id: NotificationId,
        value: u32,
        queue: QueueId,
    ) -> Result<()> {
        let q = self.queues.get(queue)?;
        self.check_rank(rank)?;
        if value == 0 {
            return Err(Error::ZeroNotificationValue);
        }
        let key = self.user_key(seg)?;
        let dst = self.dest(rank, key, 0, 0)?;
        if id.0 >= dst.notif_count {
            return Err(Error::NotificationIdOutOfRange {
                id: id.0,
                num: 1,
                max: dst.notif_count,
            });
        }
        let t = self.transport_on(&dst, &q)?;
        self.post_on(&q, 1, rank, || t.notify(&dst, id.0, value, Some(&q)))
            .map(drop)
    }

    /// Waits until one of notifications `first..first+num` of local segment `seg` is non-zero
    /// and returns the lowest such id, without resetting it (`gaspi_notify_waitsome`).
    ///
    /// `num == 0` is refused at once with [`Error::InvalidNumber`] (after the segment is
    /// checked): no notification can be found among none, so there is no id to return, and
    /// returning `first` would claim it is set. (The C `gaspi_notify_waitsome` returns
    /// `GASPI_SUCCESS` then and leaves `first_id` untouched, as GPI-2 does.)
    ///
    /// When nothing is set and a rank has failed since the last wait on this segment
    /// reported a failure, returns [`Error::PeerFailed`] naming it (once per failure and
    /// segment), so a blocked rank learns about a dead peer instead of waiting for ever.
    pub fn notify_waitsome(
        &self,
        seg: SegmentId,
        first: NotificationId,
        num: u32,
        timeout: Timeout,
    ) -> Result<NotificationId> {
        self.waitsome(seg, first, num, None, timeout)
    }

    /// [`notify_waitsome`](Self::notify_waitsome) for notifications that rank `from` sets,
    /// for protocols that know who they wait for (a collective's step): `from`'s failure,
    /// or its departure (`term`), ends the wait with [`Error::PeerFailed`]; other ranks'
    /// failures do not concern it.
    pub fn notify_waitsome_from(
        &self,
        seg: SegmentId,
        first: NotificationId,
        num: u32,
        from: Rank,
        timeout: Timeout,
    ) -> Result<NotificationId> {
        self.check_rank(from)?;
        self.waitsome(seg, first, num, Some(from), timeout)
    }

    /// Both waits: `from` names who sets the notifications (`None`: anyone, and any
    /// failure not yet reported on this segment ends the wait; see [`Watch`]).
    fn waitsome(
        &self,
        seg: SegmentId,
        first: NotificationId,
        num: u32,
        from: Option<Rank>,
        timeout: Timeout,
    ) -> Result<NotificationId> {
        let local = self.local_segment(seg)?;
        if num == 0 {
            return Err(Error::InvalidNumber(format!(
                "notify_waitsome of 0 notifications from {first}: none can be found \
                 (num must be at least 1)"
            )));
        }
        self.check_notification(&local.mem, seg, first.0, num)?;
        let watch = match from {
            Some(from) => Watch::Collective { from },
            None => Watch::Unreported(&local.failures_seen),
        };
        let mem = &local.mem;
        self.wait_on(mem, timeout.deadline(), watch, || {
            (first.0..first.0 + num)
                .find(|id| mem.slot(*id).load(Ordering::Acquire) != 0)
                .map(NotificationId)
        })
    }

    /// Atomically sets notification `id` of local segment `seg` to 0 and returns its old
    /// value (`gaspi_notify_reset`): of two concurrent resets exactly one sees the value.
    pub fn notify_reset(&self, seg: SegmentId, id: NotificationId) -> Result<u32> {
        let local = self.local_segment(seg)?;
        self.check_notification(&local.mem, seg, id.0, 1)?;
        Ok(local.mem.slot(id.0).swap(0, Ordering::AcqRel))
    }

    pub(crate) fn check_reachable(&self, rank: Rank) -> Result<()> {
        if rank != self.sh.rank && self.sh.state.is_unreachable(rank) {
            return Err(Error::PeerFailed { rank });
        }
        Ok(())
    }
}
