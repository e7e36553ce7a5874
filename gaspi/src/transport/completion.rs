//! Local completion of posted operations: each queue counts its entries and the operations a
//! transport has not finished yet; the transports complete them (from any thread) and
//! `wait` sleeps until none is left.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::config::limits;
use crate::error::{Error, Result};
use crate::types::{Deadline, QueueId, Rank};

/// One queue's bookkeeping, shared with the transports that complete its ops later.
pub(crate) struct QueueState {
    id: QueueId,
    entries: AtomicU32,
    max: u32,
    inner: Mutex<Outstanding>,
    cv: Condvar,
    /// The process terminated: posting and waiting end with [`Error::Terminated`]. An atomic,
    /// so the check on every post takes no lock.
    closed: AtomicBool,
}

#[derive(Default)]
struct Outstanding {
    /// Ops handed to a transport that are not locally complete yet.
    ops: u64,
    /// The first peer an op failed on since the last `wait`.
    failed: Option<Rank>,
}

impl QueueState {
    pub fn new(id: QueueId, max: u32) -> Self {
        QueueState {
            id,
            entries: AtomicU32::new(0),
            max,
            inner: Mutex::default(),
            cv: Condvar::new(),
            closed: AtomicBool::new(false),
        }
    }

    pub fn id(&self) -> QueueId {
        self.id
    }

    /// Takes `n` entries, or fails with `QueueFull` taking none.
    pub fn reserve(&self, n: u32) -> Result<()> {
        self.entries
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |e| {
                e.checked_add(n).filter(|t| *t <= self.max)
            })
            .map(|_| ())
            .map_err(|e| Error::QueueFull {
                queue: self.id,
                entries: e,
                max: self.max,
            })
    }

    /// Gives back entries of an op that could not be posted.
    pub fn unreserve(&self, n: u32) {
        self.entries.fetch_sub(n, Ordering::AcqRel);
    }

    pub fn entries(&self) -> u32 {
        self.entries.load(Ordering::Acquire)
    }

    /// An op was handed to a transport and completes later ([`complete`](Self::complete)).
    pub fn begin_async(&self) {
        self.inner.lock().ops += 1;
    }

    /// An op towards `rank`, which has failed, was not handed to any transport: the next
    /// wait reports the failure as if the op had failed on the way (GPI-2 lets such a post
    /// succeed, so that fault-tolerant programs learn of it at their `wait`).
    pub fn fail_unposted(&self, rank: Rank) {
        let mut o = self.inner.lock();
        if o.failed.is_none() {
            o.failed = Some(rank);
        }
        self.cv.notify_all();
    }

    /// A transport finished an op (`failed` = the peer it failed on).
    pub fn complete(&self, failed: Option<Rank>) {
        let mut o = self.inner.lock();
        o.ops -= 1;
        if o.failed.is_none() {
            o.failed = failed;
        }
        if o.ops == 0 || failed.is_some() {
            self.cv.notify_all();
        }
    }

    /// Ends every wait on this queue, now and later, with [`Error::Terminated`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Under the lock, so a waiter between its check and its sleep cannot miss it.
        let _o = self.inner.lock();
        self.cv.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Waits until every op posted so far is locally complete.
    pub fn wait(&self, deadline: Deadline) -> Result<()> {
        let mut o = self.inner.lock();
        loop {
            if self.is_closed() {
                return Err(Error::Terminated);
            }
            if let Some(rank) = o.failed.take() {
                // Report the failure once; ops still in flight towards others continue.
                if o.ops == 0 {
                    self.entries.store(0, Ordering::Release);
                }
                return Err(Error::PeerFailed { rank });
            }
            if o.ops == 0 {
                self.entries.store(0, Ordering::Release);
                return Ok(());
            }
            match deadline.remaining() {
                None => self.cv.wait(&mut o),
                Some(d) if d.is_zero() => return Err(Error::Timeout),
                Some(d) => {
                    self.cv.wait_for(&mut o, d);
                }
            }
        }
    }
}

/// The user-visible queues; ids `0..queue_num` exist from init, more can be created.
pub(crate) struct QueueTable {
    queues: RwLock<Vec<Option<Arc<QueueState>>>>,
    size_max: u32,
}

impl QueueTable {
    /// Closes every queue (process termination).
    pub fn close_all(&self) {
        for q in self.queues.read().iter().flatten() {
            q.close();
        }
    }

    pub fn new(initial: u32, size_max: u32) -> Self {
        let mut v: Vec<Option<Arc<QueueState>>> = vec![None; limits::QUEUE_NUM_MAX as usize];
        for (i, slot) in v.iter_mut().enumerate().take(initial as usize) {
            *slot = Some(Arc::new(QueueState::new(QueueId(i as u8), size_max)));
        }
        QueueTable {
            queues: RwLock::new(v),
            size_max,
        }
    }

    pub fn get(&self, q: QueueId) -> Result<Arc<QueueState>> {
        let v = self.queues.read();
        let queue = v
            .get(usize::from(q.0))
            .and_then(|s| s.clone())
            .ok_or(Error::InvalidQueue {
                queue: q,
                num: v.iter().filter(|s| s.is_some()).count() as u8,
            })?;
        // Every posting call takes its queue here: none starts after termination.
        if queue.is_closed() {
            return Err(Error::Terminated);
        }
        Ok(queue)
    }

    pub fn count(&self) -> u32 {
        self.queues.read().iter().filter(|s| s.is_some()).count() as u32
    }

    pub fn create(&self) -> Result<QueueId> {
        let mut v = self.queues.write();
        let free = v
            .iter()
            .position(|s| s.is_none())
            .ok_or(Error::TooManyQueues {
                max: limits::QUEUE_NUM_MAX,
            })?;
        let id = QueueId(free as u8);
        v[free] = Some(Arc::new(QueueState::new(id, self.size_max)));
        Ok(id)
    }

    pub fn delete(&self, q: QueueId) -> Result<()> {
        let num = self.count() as u8;
        let mut v = self.queues.write();
        match v.get_mut(usize::from(q.0)) {
            Some(slot @ Some(_)) => {
                let st = slot.as_ref().expect("checked");
                if st.entries() > 0 {
                    return Err(Error::QueueBusy {
                        queue: q,
                        entries: st.entries(),
                    });
                }
                *slot = None;
                Ok(())
            }
            _ => Err(Error::InvalidQueue { queue: q, num }),
        }
    }
}
