//! Passive communication: two-sided messages from a segment range to whoever calls
//! `passive_receive` on the target. Each message is received exactly once, with its sender,
//! and the messages of one sender in the order they were sent.
//!
//! Paths: to a peer connected over InfiniBand verbs, a SEND into a receive buffer the target
//! posted ahead (`transport::verbs::passive`); to the rank itself, a push into its inbox; to
//! every other peer (shared memory, TCP), a frame on the TCP control channel that the target's
//! progress thread pushes into the inbox. A sender always uses the same path to a peer, so its
//! messages stay in order; `passive_receive` takes from the inbox and the verbs buffers.

use crate::backoff::Backoff;
use crate::context::Context;
use crate::counters::Counter;
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::transport::requests::Unacked;
use crate::transport::tcp::send::Payload;
use crate::types::{Deadline, Rank, SegmentId, Timeout};
use crate::wire::control::ControlMessage;

impl Context {
    /// Sends `size` bytes at `offset` of local segment `seg` to `rank` and waits until they
    /// are delivered to it: queued in its inbox, or in one of its verbs receive buffers
    /// (`gaspi_passive_send`). After `Timeout`, calling again with the same arguments and
    /// bytes resumes the send; it never delivers the message twice.
    pub fn passive_send(
        &self,
        seg: SegmentId,
        offset: u64,
        rank: Rank,
        size: u64,
        timeout: Timeout,
    ) -> Result<()> {
        self.check_rank(rank)?;
        let max = u64::from(self.sh.config.passive_transfer_size_max);
        if size == 0 || size > max {
            return Err(Error::InvalidCommSize { size, max });
        }
        let mut data = vec![0u8; size as usize];
        self.segment(seg)?.read(offset, &mut data)?;
        self.check_reachable(rank)?;
        if rank == self.sh.rank {
            return self.sh.passive.push(rank, data);
        }
        if let Some(verbs) = self.sh.verbs.as_ref().filter(|v| v.has_passive(rank)) {
            let what = (seg, offset);
            return verbs.passive_send(rank, what, &data, timeout.deadline(), &self.sh.stats);
        }
        self.passive_send_tcp(rank, (seg, offset), data, timeout.deadline())
    }

    /// The TCP path: the frame goes out at once and the call waits for the target's
    /// acknowledgement. After `Timeout` the frame is still on its way; a next call to the same
    /// rank with the same segment range and bytes is the caller's retry and waits for that
    /// acknowledgement instead of sending the message again (as over verbs). A different
    /// message is simply sent: the connection keeps the two in order.
    fn passive_send_tcp(
        &self,
        rank: Rank,
        what: (SegmentId, u64),
        data: Vec<u8>,
        deadline: Deadline,
    ) -> Result<()> {
        let (req, slot, data) = match self.sh.unacked_passive.take(rank) {
            Some(old) if old.what == what && old.data == data => (old.req, old.slot, data),
            other => {
                if let Some(old) = other {
                    self.sh.rpc.forget(old.req);
                }
                let h = ControlMessage::passive_header(data.len());
                // Only a call that can time out needs the bytes again, to know its retry.
                let kept = if deadline.is_never() {
                    Vec::new()
                } else {
                    data.clone()
                };
                let (req, slot) = self.tcp()?.start_call(rank, h, Payload::Owned(data))?;
                (req, slot, kept)
            }
        };
        match self.sh.rpc.wait_resumable(&slot, deadline) {
            Err(Error::Timeout) => {
                self.sh.unacked_passive.keep(
                    rank,
                    Unacked {
                        req,
                        slot,
                        what,
                        data,
                    },
                );
                Err(Error::Timeout)
            }
            res => {
                res?;
                self.sh.stats.add(Counter::PassiveSentTcp, 1);
                Ok(())
            }
        }
    }

    /// Receives one passive message into local segment `seg` at `offset` (at most `size`
    /// bytes); returns the sender and the message length (`gaspi_passive_receive`).
    pub fn passive_receive(
        &self,
        seg: SegmentId,
        offset: u64,
        size: u64,
        timeout: Timeout,
    ) -> Result<(Rank, u64)> {
        let segment = self.segment(seg)?;
        if offset.checked_add(size).is_none_or(|e| e > segment.len()) {
            return Err(Error::LocalOutOfBounds {
                segment: seg,
                offset,
                len: size,
                size: segment.len(),
            });
        }
        let deadline = timeout.deadline();
        if let Some(tcp) = &self.tcp {
            // Messages over TCP come through the progress thread while this call sleeps.
            tcp.hand_back_inbound();
        }
        let Some(verbs) = self.sh.verbs.as_ref() else {
            let m = self.sh.passive.pop(deadline)?;
            return self.place(&segment, offset, size, m);
        };
        // Verbs receives wake nobody: poll them and the inbox, napping on the inbox's
        // condition variable so that messages over TCP still wake this call at once.
        let mut backoff = Backoff::new();
        loop {
            self.sh.passive.check_open()?;
            if let Some(m) = self.sh.passive.try_pop() {
                return self.place(&segment, offset, size, m);
            }
            let place = |_: Rank, data: &[u8]| segment.write(offset, data);
            if let Some(res) = verbs.passive_take(size, &self.sh.stats, place) {
                return res;
            }
            if deadline.expired() {
                return Err(Error::Timeout);
            }
            backoff.pause_with(deadline.remaining(), |nap| self.sh.passive.wait_for(nap));
        }
    }

    /// Writes an inbox message into `segment` at `offset` if it fits in `size`, else puts it
    /// back at the head of the inbox.
    fn place(
        &self,
        segment: &Segment,
        offset: u64,
        size: u64,
        (from, data): (Rank, Vec<u8>),
    ) -> Result<(Rank, u64)> {
        if data.len() as u64 > size {
            let len = data.len();
            self.sh.passive.push_front((from, data));
            return Err(Error::InvalidSize(format!(
                "passive message of {len} bytes does not fit in {size}"
            )));
        }
        segment.write(offset, &data)?;
        Ok((from, data.len() as u64))
    }

    /// `gaspi_passive_transfer_size_min`.
    pub fn passive_transfer_size_min(&self) -> u64 {
        1
    }

    /// `gaspi_passive_transfer_size_max`.
    pub fn passive_transfer_size_max(&self) -> u64 {
        u64::from(self.sh.config.passive_transfer_size_max)
    }
}
