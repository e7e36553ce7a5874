//! Passive communication: two-sided messages from a segment range to whoever calls
//! `passive_receive` on the target. Each message is received exactly once, with its sender.

use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::transport::tcp::pair::Payload;
use crate::transport::tcp::wire::{Header, Op};
use crate::types::{Deadline, Rank, SegmentId, Timeout};

pub(crate) struct PassiveInbox {
    q: Mutex<VecDeque<(Rank, Vec<u8>)>>,
    cv: Condvar,
    max: usize,
}

impl PassiveInbox {
    pub fn new(max: u32) -> Self {
        PassiveInbox {
            q: Mutex::default(),
            cv: Condvar::new(),
            max: max as usize,
        }
    }

    /// Queues a received message; fails when the inbox is full (the sender gets the error).
    pub fn push(&self, from: Rank, data: Vec<u8>) -> Result<()> {
        let mut q = self.q.lock();
        if q.len() >= self.max {
            return Err(Error::Other(format!(
                "passive inbox full ({} messages)",
                self.max
            )));
        }
        q.push_back((from, data));
        self.cv.notify_one();
        Ok(())
    }

    fn pop(&self, deadline: Deadline) -> Result<(Rank, Vec<u8>)> {
        let mut q = self.q.lock();
        loop {
            if let Some(m) = q.pop_front() {
                return Ok(m);
            }
            match deadline.remaining() {
                None => self.cv.wait(&mut q),
                Some(d) if d.is_zero() => return Err(Error::Timeout),
                Some(d) => {
                    self.cv.wait_for(&mut q, d);
                }
            }
        }
    }

    fn push_front(&self, m: (Rank, Vec<u8>)) {
        self.q.lock().push_front(m);
        self.cv.notify_one();
    }
}

impl Context {
    /// Sends `size` bytes at `offset` of local segment `seg` to `rank` and waits until it
    /// has queued them (`gaspi_passive_send`).
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
        let mut h = Header::new(Op::Passive);
        h.len = size;
        self.tcp()?
            .call_with(rank, h, Payload::Owned(data), timeout.deadline())
            .map(|_| ())
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
        let (from, data) = self.sh.passive.pop(timeout.deadline())?;
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
