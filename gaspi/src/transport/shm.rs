//! Shared memory between ranks on one host (and a rank with itself): the peer's segment is
//! mapped into this process, a write is one copy into it, a notification is a Release store
//! plus a futex wake (see [`SegmentMemory::notify`]). Every op is complete when it returns.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::memory::segment_memory::{apply_atomic, SegmentMemory};
use crate::transport::completion::QueueState;
use crate::transport::{Dest, Transport, Xfer};
use crate::types::{AtomicOp, Deadline};

pub(crate) struct Shm;

fn mapped(dst: &Dest) -> Result<&SegmentMemory> {
    dst.mem.as_deref().ok_or(Error::NotMapped {
        rank: dst.rank,
        segment: dst.key,
    })
}

impl Transport for Shm {
    fn write(
        &self,
        x: &Xfer<'_>,
        notify: Option<(u32, u32)>,
        _q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        let dst = mapped(x.remote)?;
        SegmentMemory::copy_between(x.local, x.local_off, dst, x.remote_off, x.len);
        if let Some((id, value)) = notify {
            dst.notify(id, value);
        }
        Ok(())
    }

    fn notify(&self, dst: &Dest, id: u32, value: u32, _q: Option<&Arc<QueueState>>) -> Result<()> {
        mapped(dst)?.notify(id, value);
        Ok(())
    }

    fn read(&self, x: &Xfer<'_>, notify: Option<u32>, _q: Option<&Arc<QueueState>>) -> Result<()> {
        let src = mapped(x.remote)?;
        SegmentMemory::copy_between(src, x.remote_off, x.local, x.local_off, x.len);
        if let Some(id) = notify {
            x.local.notify(id, 1);
        }
        Ok(())
    }

    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, _deadline: Deadline) -> Result<u64> {
        let word = mapped(dst)?.atomic_u64(off)?;
        Ok(apply_atomic(word, op))
    }
}
