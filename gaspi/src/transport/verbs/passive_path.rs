//! Passive messages over verbs, as the transport offers them: a SEND into a receive buffer
//! the target posted ahead, and the receive side that takes arrived messages (see
//! `passive` for the buffers themselves).

use std::collections::VecDeque;
use std::sync::Arc;

use super::channel::{wr_peer, Done, ResultSlot, WorkBatch};
use super::device::{Completion, WrOp};
use super::layout::PASSIVE;
use super::passive::{Arrived, Pending, WR_SEQ};
use super::transport::VerbsTransport;
use crate::backoff::Backoff;
use crate::counters::{Counter, Stats};
use crate::error::{Error, Result};
use crate::memory::segment_table::RemoteAddr;
use crate::types::{Deadline, Rank, SegmentId};

impl VerbsTransport {
    /// Whether passive messages to `rank` go over verbs: it was connected over verbs at init.
    /// A later demotion of its one-sided route to TCP (a segment the device could not
    /// register) does not move them: one path per sender keeps its messages in order.
    pub fn has_passive(&self, rank: Rank) -> bool {
        self.passive.position(rank).is_some()
    }

    /// Sends `data` (read from `what` = (segment, offset)) to `rank` and waits until it is in
    /// one of `rank`'s receive buffers (see the module doc for timeouts and retries).
    pub fn passive_send(
        &self,
        rank: Rank,
        what: (SegmentId, u64),
        data: &[u8],
        deadline: Deadline,
        stats: &Stats,
    ) -> Result<()> {
        let p = &self.passive;
        let i = p.position(rank).ok_or(Error::NotConnected {
            rank,
            transport: "verbs",
        })?;
        if data.len() > p.send.size {
            return Err(Error::InvalidCommSize {
                size: data.len() as u64,
                max: p.send.size as u64,
            });
        }
        let mut pending = match deadline.remaining() {
            None => p.senders[i].lock(),
            Some(left) => p.senders[i].try_lock_for(left).ok_or(Error::Timeout)?,
        };
        if let Some(old) = pending.as_ref() {
            let retry = old.what == what && old.data == data;
            let slot = old.slot.clone();
            let res = self.await_send(rank, &slot, deadline);
            if !matches!(res, Err(Error::Timeout)) {
                *pending = None;
            }
            res?;
            stats.add(Counter::PassiveSentVerbs, 1);
            if retry {
                return Ok(());
            }
        }
        p.send.mem.copy_in(i * p.send.size, data);
        let slot = Arc::new(ResultSlot::default());
        self.post(
            rank,
            PASSIVE,
            WorkBatch {
                wrs: vec![(
                    WrOp::Send {
                        sge: p.send.sge(i, data.len()),
                    },
                    RemoteAddr { rkey: 0, addr: 0 },
                )],
                done: Done::Result(slot.clone()),
                hold: None,
                signal: true,
            },
        )?;
        let res = self.await_send(rank, &slot, deadline);
        if matches!(res, Err(Error::Timeout)) {
            *pending = Some(Pending {
                slot,
                what,
                data: data.to_vec(),
            });
        } else if res.is_ok() {
            stats.add(Counter::PassiveSentVerbs, 1);
        }
        res
    }

    /// Polls the passive send completions until `slot` is filled: `PeerFailed` on an error
    /// completion or when the peer is known to be unreachable (never a hang on a dead peer).
    fn await_send(&self, rank: Rank, slot: &ResultSlot, deadline: Deadline) -> Result<()> {
        let mut backoff = Backoff::new();
        loop {
            self.poll_completions(PASSIVE);
            match slot.take() {
                Some(Ok(())) => return Ok(()),
                Some(Err(why)) => {
                    tracing::debug!("passive SEND to rank {rank} failed: {why}");
                    return Err(Error::PeerFailed { rank });
                }
                None => {}
            }
            if self.state.is_unreachable(rank) {
                return Err(Error::PeerFailed { rank });
            }
            if deadline.expired() {
                return Err(Error::Timeout);
            }
            backoff.pause(deadline.remaining());
        }
    }

    /// Takes the oldest message that arrived over verbs, if any: `place(from, bytes)` writes
    /// it where the caller wants it. A message longer than `max` stays first in line and
    /// the call fails with `InvalidSize`, as one that `place` refuses stays too. The buffer
    /// is reposted once the message is placed.
    pub fn passive_take(
        &self,
        max: u64,
        stats: &Stats,
        place: impl FnOnce(Rank, &[u8]) -> Result<()>,
    ) -> Option<Result<(Rank, u64)>> {
        let p = &self.passive;
        let mut ready = p.ready.lock();
        self.poll_receives(&mut ready);
        let m = *ready.front()?;
        if m.len as u64 > max {
            return Some(Err(Error::InvalidSize(format!(
                "passive message of {} bytes does not fit in {max}",
                m.len
            ))));
        }
        let mut data = vec![0u8; m.len];
        p.recv.mem.copy_out(m.buf * p.recv.size, &mut data);
        if let Err(e) = place(m.from, &data) {
            return Some(Err(e));
        }
        ready.pop_front();
        drop(ready);
        stats.add(Counter::PassiveReceivedVerbs, 1);
        let repost = self
            .channel(m.from, PASSIVE)
            .and_then(|ch| ch.lock().post_recv(&[p.recv_request(m.from, m.buf)]));
        if let Err(e) = repost {
            tracing::debug!("reposting a passive receive buffer of rank {}: {e}", m.from);
        }
        Some(Ok((m.from, m.len as u64)))
    }

    /// Moves completed receives into `ready`; an error completion marks its peer CORRUPT.
    fn poll_receives(&self, ready: &mut VecDeque<Arrived>) {
        let p = &self.passive;
        let mut done: Vec<Completion> = Vec::new();
        if let Err(e) = p.recv_cq.poll(&mut done, 256) {
            tracing::warn!("polling the passive receive queue: {e}");
        }
        for c in done {
            let from = wr_peer(c.wr_id);
            let buf = (c.wr_id & WR_SEQ) as usize;
            let len = c.byte_len as usize;
            let own = p
                .position(from)
                .is_some_and(|i| (i * p.depth..(i + 1) * p.depth).contains(&buf));
            let why = match c.status {
                Ok(()) if own && len <= p.recv.size => {
                    ready.push_back(Arrived { from, buf, len });
                    continue;
                }
                Ok(()) => format!("a receive completion for buffer {buf} of {len} bytes"),
                Err(why) => why,
            };
            if p.position(from).is_some() && self.state.mark_corrupt(from) {
                tracing::warn!("rank {from} marked CORRUPT: verbs receive completion error: {why}");
            }
        }
    }
}
