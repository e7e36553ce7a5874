//! The collectives of a committed group: `barrier` (dissemination) and the small
//! `allreduce` (recursive doubling, with folding for non-power-of-two sizes), over the group's
//! internal segment.
//!
//! The segment holds double-buffered (by epoch parity) notification slots and round buffers.
//! Notification values are epoch numbers, so no reset is needed and a peer that is already one
//! collective ahead cannot be confused with the current one. A call that times out keeps its
//! progress; calling it again resumes where it stopped.
//!
//! A member whose collective fails because another member failed or left (at its start, or
//! while it waits) does not just return: it sends *abort* notifications (the epoch with
//! [`ABORTED`] set, after the failed rank in [`FAILED_RANK_SLOT`]) in place of everything it
//! still had to send in that collective. Whoever waits on it then fails too, naming the same
//! rank, and so on: every member ends the collective, none waits for ever on a healthy member
//! that gave up (members learn of a departure at different times, so one may fail at the
//! start while another has already entered).

use std::sync::atomic::Ordering;

use parking_lot::{Mutex, MutexGuard};

use super::doubling::{Doubling, MAX_STEPS, UNFOLD_STEP};
use super::state::{Coll, Committed, RoundState};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::notify::Watch;
use crate::reduce::UserReduce;
use crate::transport::Xfer;
use crate::types::SegKey;
use crate::types::{Deadline, Group, Rank, Timeout};

/// Epochs run 1..=EPOCH_CYCLE and wrap (even, so the parity keeps alternating).
const EPOCH_CYCLE: u32 = 1 << 30;
/// Set in a slot's value (an epoch, at most [`EPOCH_CYCLE`]) by a member that aborted that
/// collective.
const ABORTED: u32 = 1 << 31;
/// Where an aborting member writes the failed rank + 1, before its abort notifications.
const FAILED_RANK_SLOT: u32 = 4 * MAX_STEPS as u32;
pub(super) const NOTIF_SLOTS: u32 = FAILED_RANK_SLOT + 1;

fn next_epoch(e: u32) -> u32 {
    e % EPOCH_CYCLE + 1
}

/// The member an error of a collective blames, if any.
fn failed_rank(e: &Error) -> Option<Rank> {
    match e {
        Error::PeerFailed { rank } => Some(*rank),
        _ => None,
    }
}

/// Whether epoch `a` is `b` or comes after it (within half a cycle).
fn at_or_after(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) % EPOCH_CYCLE < EPOCH_CYCLE / 2
}

fn barrier_slot(epoch: u32, round: usize) -> u32 {
    (epoch & 1) * MAX_STEPS as u32 + round as u32
}

fn reduce_slot(epoch: u32, step: usize) -> u32 {
    2 * MAX_STEPS as u32 + (epoch & 1) * MAX_STEPS as u32 + step as u32
}

/// Takes the group's collective state. Another thread's collective on the group is waited
/// for until `deadline` (then `Timeout`), as GPI-2 queues callers on the group's lock: the
/// calls of several threads run one after the other.
fn lock_collectives(coll: &Mutex<Coll>, deadline: Deadline) -> Result<MutexGuard<'_, Coll>> {
    match deadline.remaining() {
        None => Ok(coll.lock()),
        Some(left) => coll.try_lock_for(left).ok_or(Error::Timeout),
    }
}

impl Context {
    /// Waits until every member of `group` has entered the barrier (`gaspi_barrier`).
    pub fn barrier(&self, group: Group, timeout: Timeout) -> Result<()> {
        self.barrier_deadline(group, timeout.deadline())
    }

    pub(crate) fn barrier_deadline(&self, group: Group, deadline: Deadline) -> Result<()> {
        let (members, c, coll) = self.committed(group)?;
        let mut coll = lock_collectives(&coll, deadline)?;
        if coll.reduce.is_some() || coll.reduce_rounds_done > 0 {
            // An allreduce that timed out must be resumed first (GPI-2's rule).
            return Err(Error::ActiveCollective);
        }
        let starting = coll.barrier.is_none();
        let done = coll.barrier_done;
        let p = coll.barrier.get_or_insert_with(|| RoundState {
            epoch: next_epoch(done),
            ..Default::default()
        });
        let epoch = p.epoch;
        let checked = match starting {
            true => self.check_members(&members),
            false => Ok(()),
        };
        match checked.and_then(|()| self.barrier_rounds(&members, &c, p, deadline)) {
            // Resumable: the progress stays for the next call.
            Err(Error::Timeout) => return Err(Error::Timeout),
            Err(e) => {
                // Whatever ended it here, nobody may wait for our remaining rounds.
                let failed = failed_rank(&e);
                let n = members.len();
                let mut step = p.step;
                while (1usize << step) < n {
                    if step > p.step || !p.sent {
                        let to = members[(c.me + (1 << step)) % n];
                        self.send_abort(&c, to, barrier_slot(epoch, step), epoch, failed);
                    }
                    step += 1;
                }
                coll.barrier = None;
                coll.barrier_done = epoch;
                return Err(e);
            }
            Ok(()) => {}
        }
        coll.barrier = None;
        coll.barrier_done = epoch;
        self.sh.stats.add(crate::counters::Counter::Barriers, 1);
        Ok(())
    }

    /// The dissemination rounds of a barrier from where `p` stands.
    fn barrier_rounds(
        &self,
        members: &[Rank],
        c: &Committed,
        p: &mut RoundState,
        deadline: Deadline,
    ) -> Result<()> {
        let n = members.len();
        while (1usize << p.step) < n {
            let dist = 1usize << p.step;
            let slot = barrier_slot(p.epoch, p.step);
            if !p.sent {
                let to = members[(c.me + dist) % n];
                self.internal_notify(to, c.key, slot, p.epoch)?;
                p.sent = true;
            }
            let from = members[(c.me + n - dist) % n];
            self.wait_slot(c, slot, p.epoch, Watch::Collective { from }, deadline)?;
            p.step += 1;
            p.sent = false;
        }
        Ok(())
    }

    /// Waits until `slot` holds `epoch` (or that epoch aborted: the failure it names).
    fn wait_slot(
        &self,
        c: &Committed,
        slot: u32,
        epoch: u32,
        watch: Watch<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let mem = &c.seg.mem;
        let value = self.wait_on(mem, deadline, watch, || {
            let v = mem.slot(slot).load(Ordering::Acquire);
            // An abort of a later epoch in this slot means ours was aborted too: its sender
            // went on aborting (the application retried) before we looked.
            let aborted = v & ABORTED != 0 && at_or_after(v & !ABORTED, epoch);
            (v == epoch || aborted).then_some(v)
        })?;
        if value & ABORTED == 0 {
            return Ok(());
        }
        let failed = mem.slot(FAILED_RANK_SLOT).load(Ordering::Acquire);
        Err(match failed.checked_sub(1) {
            Some(rank) => Error::PeerFailed {
                rank: Rank(rank as u16),
            },
            None => Error::CollectiveAborted,
        })
    }

    /// Best effort (the target may have gone too): tells `to` that this member aborted the
    /// collective of `epoch` whose `slot` it waits on, because `failed` failed or left
    /// (`None`: for another reason, or one we were not told).
    fn send_abort(&self, c: &Committed, to: Rank, slot: u32, epoch: u32, failed: Option<Rank>) {
        if self.sh.state.is_unreachable(to) {
            return;
        }
        let failed = failed.map_or(0, |r| u32::from(r.0) + 1);
        let sent = self
            .internal_notify(to, c.key, FAILED_RANK_SLOT, failed)
            .and_then(|()| self.internal_notify(to, c.key, slot, epoch | ABORTED));
        if let Err(e) = sent {
            tracing::debug!("aborting a collective towards rank {to}: {e}");
        }
    }

    fn internal_notify(&self, to: Rank, key: SegKey, slot: u32, value: u32) -> Result<()> {
        let dest = self.dest(to, key, 0, 0)?;
        self.transport_for(&dest)?.notify(&dest, slot, value, None)
    }

    /// The engine of every small allreduce: `combine(lower, higher, out)` merges the values
    /// of two members, the lower group index first, so that every member computes the same
    /// bits. The reduction runs in rounds of at most one round buffer (whole `elem_size`
    /// elements each). A call resumed after a timeout continues with the state it left, so it
    /// must be given the same buffers.
    pub(crate) fn allreduce_bytes(
        &self,
        group: Group,
        input: &[u8],
        output: &mut [u8],
        elem_size: usize,
        combine: &mut UserReduce<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let (members, c, coll) = self.committed(group)?;
        let mut coll = lock_collectives(&coll, deadline)?;
        if coll.barrier.is_some() {
            // A barrier that timed out must be resumed first (GPI-2's rule).
            return Err(Error::ActiveCollective);
        }
        if output.len() != input.len() {
            return Err(Error::InvalidSize(format!(
                "output of {} bytes for {} input bytes",
                output.len(),
                input.len()
            )));
        }
        let starting = coll.reduce.is_none() && coll.reduce_rounds_done == 0;
        let per_round = c.buf / elem_size.max(1) * elem_size;
        if per_round == 0 {
            return Err(Error::InvalidSize(format!(
                "an element of {elem_size} bytes exceeds the allreduce round buffer of {} bytes (allreduce_buf_size)",
                c.buf
            )));
        }
        let rounds = input.len().div_ceil(per_round).max(1);
        let mut result = match starting {
            true => self.check_members(&members),
            false => Ok(()),
        };
        while result.is_ok() && coll.reduce_rounds_done < rounds {
            let start = coll.reduce_rounds_done * per_round;
            let end = (start + per_round).min(input.len());
            result = self.allreduce_round(
                &members,
                &c,
                &mut coll,
                &input[start..end],
                &mut output[start..end],
                combine,
                deadline,
            );
            if result.is_ok() {
                coll.reduce_rounds_done += 1;
            }
        }
        match result {
            // Resumable: the progress stays for the next call.
            Err(Error::Timeout) => Err(Error::Timeout),
            Err(e) => {
                let done = coll.reduce_done;
                let p = coll.reduce.take().unwrap_or_else(|| RoundState {
                    epoch: next_epoch(done),
                    ..Default::default()
                });
                // Whatever ended it here, nobody may wait for our remaining sends: those of
                // this round, and all of the rounds after it (each has an epoch of its own;
                // a member that completed this round waits on us in the next).
                let failed = failed_rank(&e);
                let plan = Doubling::new(members.len(), c.me);
                for (step, to) in plan.sends() {
                    if step > p.step || (step == p.step && !p.sent) {
                        let slot = reduce_slot(p.epoch, step);
                        self.send_abort(&c, members[to], slot, p.epoch, failed);
                    }
                }
                let mut epoch = p.epoch;
                for _ in coll.reduce_rounds_done + 1..rounds {
                    epoch = next_epoch(epoch);
                    for (step, to) in plan.sends() {
                        let slot = reduce_slot(epoch, step);
                        self.send_abort(&c, members[to], slot, epoch, failed);
                    }
                }
                coll.reduce_done = epoch;
                coll.reduce_rounds_done = 0;
                Err(e)
            }
            Ok(()) => {
                coll.reduce_rounds_done = 0;
                Ok(())
            }
        }
    }

    /// One round of recursive doubling over at most one round buffer.
    #[allow(clippy::too_many_arguments)]
    fn allreduce_round(
        &self,
        members: &[Rank],
        c: &Committed,
        coll: &mut Coll,
        input: &[u8],
        output: &mut [u8],
        combine: &mut UserReduce<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let me = c.me;
        let plan = Doubling::new(members.len(), me);
        let (rem, exchanges) = (plan.rem, plan.exchanges);
        let done = coll.reduce_done;
        let p = coll.reduce.get_or_insert_with(|| RoundState {
            epoch: next_epoch(done),
            step: 0,
            sent: false,
            acc: input.to_vec(),
        });
        if p.acc.len() != input.len() {
            return Err(Error::InvalidSize(
                "a resumed allreduce must be called with the same size".into(),
            ));
        }
        let len = input.len();
        let unfold_step = UNFOLD_STEP;
        let folded_out = plan.folded_out();
        let vindex = plan.vindex();
        let real = |v: usize| plan.real(v);
        let mut tmp = vec![0u8; len];

        // Step 0: fold the extra members into their odd neighbours.
        if p.step == 0 {
            if me < 2 * rem {
                if folded_out {
                    self.exchange_send(c, members[me + 1], p, 0)?;
                } else {
                    let other = self.exchange_recv(
                        c,
                        Watch::Collective {
                            from: members[me - 1],
                        },
                        p.epoch,
                        0,
                        len,
                        deadline,
                    )?;
                    combine(&other, &p.acc, &mut tmp)?;
                    p.acc.copy_from_slice(&tmp);
                }
            }
            p.step = 1;
            p.sent = false;
        }
        if !folded_out {
            while p.step <= exchanges {
                let partner_v = vindex ^ (1 << (p.step - 1));
                let partner = real(partner_v);
                self.exchange_send(c, members[partner], p, p.step)?;
                let other = self.exchange_recv(
                    c,
                    Watch::Collective {
                        from: members[partner],
                    },
                    p.epoch,
                    p.step,
                    len,
                    deadline,
                )?;
                if partner_v < vindex {
                    combine(&other, &p.acc, &mut tmp)?;
                } else {
                    combine(&p.acc, &other, &mut tmp)?;
                }
                p.acc.copy_from_slice(&tmp);
                p.step += 1;
                p.sent = false;
            }
            if me < 2 * rem {
                self.exchange_send(c, members[me - 1], p, unfold_step)?;
            }
        } else {
            let result = self.exchange_recv(
                c,
                Watch::Collective {
                    from: members[me + 1],
                },
                p.epoch,
                unfold_step,
                len,
                deadline,
            )?;
            p.acc.copy_from_slice(&result);
        }
        output.copy_from_slice(&p.acc);
        let epoch = p.epoch;
        coll.reduce = None;
        coll.reduce_done = epoch;
        Ok(())
    }

    /// Sends the running value to `to`'s receive buffer of `step` (once per step).
    fn exchange_send(
        &self,
        c: &Committed,
        to: Rank,
        p: &mut RoundState,
        step: usize,
    ) -> Result<()> {
        if p.sent {
            return Ok(());
        }
        let parity = (p.epoch & 1) as usize;
        let send_off = (parity * MAX_STEPS + step) * c.buf;
        let recv_off = (2 * MAX_STEPS + parity * MAX_STEPS + step) * c.buf;
        c.seg.mem.copy_in(send_off, &p.acc);
        let dest = self.dest(to, c.key, recv_off as u64, p.acc.len() as u64)?;
        let x = Xfer {
            local: &c.seg.mem,
            local_off: send_off,
            remote: &dest,
            remote_off: recv_off,
            len: p.acc.len(),
        };
        self.transport_for(&dest)?
            .write(&x, Some((reduce_slot(p.epoch, step), p.epoch)), None)?;
        p.sent = true;
        Ok(())
    }

    /// Waits (watching as `watch` says) for the partner's value of `step` and returns a
    /// copy.
    fn exchange_recv(
        &self,
        c: &Committed,
        watch: Watch<'_>,
        epoch: u32,
        step: usize,
        len: usize,
        deadline: Deadline,
    ) -> Result<Vec<u8>> {
        self.wait_slot(c, reduce_slot(epoch, step), epoch, watch, deadline)?;
        let mem = &c.seg.mem;
        let parity = (epoch & 1) as usize;
        let recv_off = (2 * MAX_STEPS + parity * MAX_STEPS + step) * c.buf;
        let mut v = vec![0u8; len];
        mem.copy_out(recv_off, &mut v);
        Ok(v)
    }
}
