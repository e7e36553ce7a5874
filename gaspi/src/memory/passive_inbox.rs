//! The passive inbox: messages received from peers (over the TCP control channel, or from
//! this rank itself) until `passive_receive` takes them, each with its sender, in arrival
//! order, bounded by `passive_queue_size_max`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::types::{Deadline, Rank};

/// Received passive messages waiting for `passive_receive`.
pub(crate) struct PassiveInbox {
    q: Mutex<VecDeque<(Rank, Vec<u8>)>>,
    cv: Condvar,
    /// The process terminated: receives end with [`Error::Terminated`].
    closed: AtomicBool,
    max: usize,
}

impl PassiveInbox {
    pub fn new(max: u32) -> Self {
        PassiveInbox {
            q: Mutex::default(),
            cv: Condvar::new(),
            closed: AtomicBool::new(false),
            max: max as usize,
        }
    }

    /// Queues a received message; fails when the inbox is full (the sender gets the error).
    pub fn push(&self, from: Rank, data: Vec<u8>) -> Result<()> {
        let mut q = self.q.lock();
        if q.len() >= self.max {
            return Err(Error::PassiveInboxFull { max: self.max });
        }
        q.push_back((from, data));
        self.cv.notify_one();
        Ok(())
    }

    /// Ends every receive, now and later, with [`Error::Terminated`].
    pub fn close(&self) {
        let _q = self.q.lock();
        self.closed.store(true, Ordering::Release);
        self.cv.notify_all();
    }

    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Terminated);
        }
        Ok(())
    }

    pub fn pop(&self, deadline: Deadline) -> Result<(Rank, Vec<u8>)> {
        let mut q = self.q.lock();
        loop {
            if let Some(m) = q.pop_front() {
                return Ok(m);
            }
            self.check_open()?;
            match deadline.remaining() {
                None => self.cv.wait(&mut q),
                Some(d) if d.is_zero() => return Err(Error::Timeout),
                Some(d) => {
                    self.cv.wait_for(&mut q, d);
                }
            }
        }
    }

    pub fn try_pop(&self) -> Option<(Rank, Vec<u8>)> {
        self.q.lock().pop_front()
    }

    /// Waits at most `max` for a message to be pushed, unless one is queued already.
    pub fn wait_for(&self, max: Duration) {
        let mut q = self.q.lock();
        if q.is_empty() {
            self.cv.wait_for(&mut q, max);
        }
    }

    pub fn push_front(&self, m: (Rank, Vec<u8>)) {
        self.q.lock().push_front(m);
        self.cv.notify_one();
    }
}
