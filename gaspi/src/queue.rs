//! Queues: where one-sided operations are posted, and `wait` for their local completion.
//!
//! Accounting follows GPI-2: a queue counts the entries posted since the last successful
//! `wait`; a `write_notify`/`read_notify` counts 2 (data + notification), every other op 1,
//! a list op 1 per element (+1 for its notification). Posting past `queue_size_max` returns
//! [`Error::QueueFull`] and posts nothing. `wait` resets the count once every op is locally
//! complete.

use crate::config::limits;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{QueueId, Timeout};

impl Context {
    /// Waits until every operation posted on `queue` is locally complete (`gaspi_wait`).
    /// A failed operation returns [`Error::PeerFailed`] (once) and marks the peer CORRUPT.
    pub fn wait(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        let q = self.queues.get(queue)?;
        match &self.sh.verbs {
            // Verbs completions are polled by the waiter.
            Some(v) => v.wait(&q, timeout.deadline()),
            None => q.wait(timeout.deadline()),
        }
    }

    /// Entries posted on `queue` since its last `wait` (`gaspi_queue_size`).
    pub fn queue_size(&self, queue: QueueId) -> Result<u32> {
        Ok(self.queues.get(queue)?.entries())
    }

    /// Number of queues that exist (`gaspi_queue_num`).
    pub fn queue_num(&self) -> u32 {
        self.queues.count()
    }

    /// `gaspi_queue_size_max`.
    pub fn queue_size_max(&self) -> u32 {
        self.sh.config.queue_size_max
    }

    /// `gaspi_queue_max`: how many queues can exist at once.
    pub fn queue_max(&self) -> u32 {
        limits::QUEUE_NUM_MAX
    }

    /// Creates a new queue (`gaspi_queue_create`).
    pub fn queue_create(&self) -> Result<QueueId> {
        self.queues.create()
    }

    /// Deletes an empty queue (`gaspi_queue_delete`).
    pub fn queue_delete(&self, queue: QueueId) -> Result<()> {
        self.queues.delete(queue)
    }

    /// Drops a queue's error state and waits for what is in flight (`gaspi_queue_purge`).
    pub fn queue_purge(&self, queue: QueueId, timeout: Timeout) -> Result<()> {
        match self.wait(queue, timeout) {
            Ok(()) | Err(Error::PeerFailed { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
