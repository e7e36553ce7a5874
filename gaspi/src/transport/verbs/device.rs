//! The device layer: the few verbs the transport needs, behind object-safe traits with two
//! implementations, the real one on `sideway` (`ibv`, feature `verbs`) and a fake one for
//! tests (`fake`, feature `fake-verbs`); `open` picks one. Everything above these traits (queue pairs per peer and
//! queue, signaling, completions, failures) is shared by both, so the tests of the fake
//! exercise the code that runs on hardware.

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::memory::segment_table::RemoteAddr;
use crate::types::SegKey;

/// `GASPI_IB_DEVICE`: the device to use (default: the first with an active port); `fake`
/// selects the test device.
pub const IB_DEVICE: &str = "GASPI_IB_DEVICE";
/// `GASPI_IB_PORT`: the port number on that device (default: its first active port).
pub const IB_PORT: &str = "GASPI_IB_PORT";
/// `GASPI_IB_GID_INDEX`: the GID table index used on RoCE ports (default 0).
pub const IB_GID_INDEX: &str = "GASPI_IB_GID_INDEX";
/// `GASPI_IB_PASSIVE_DEPTH`: receive buffers posted per verbs peer for passive messages
/// (default [`PASSIVE_DEPTH`]): how many messages a peer may have delivered but not yet
/// received before its next `passive_send` waits.
pub const IB_PASSIVE_DEPTH: &str = "GASPI_IB_PASSIVE_DEPTH";
/// The device name that selects the fake device.
pub const FAKE_DEVICE: &str = "fake";
/// Default receive buffers per peer for passive messages: each costs
/// `passive_transfer_size_max` bytes of registered (pinned) memory.
pub const PASSIVE_DEPTH: u32 = 4;
/// Most receive buffers per peer (the fake device's receive rings hold this many).
pub const PASSIVE_DEPTH_MAX: u32 = 1024;

/// What the user asked for, read from the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeviceChoice {
    pub device: Option<String>,
    pub port: Option<u8>,
    pub gid_index: u8,
    /// Receive buffers per peer for passive messages (`None`: [`PASSIVE_DEPTH`]).
    pub passive_depth: Option<u32>,
}

impl DeviceChoice {
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let num = |name: &str| -> Result<Option<u8>> {
            match get(name).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| {
                    Error::Env(format!("{name}={v:?} is not a number between 0 and 255"))
                }),
            }
        };
        let passive_depth = match get(IB_PASSIVE_DEPTH).filter(|v| !v.is_empty()) {
            None => None,
            Some(v) => match v.parse::<u32>() {
                Ok(d) if (1..=PASSIVE_DEPTH_MAX).contains(&d) => Some(d),
                _ => {
                    return Err(Error::Env(format!(
                        "{IB_PASSIVE_DEPTH}={v:?} is not a number between 1 and {PASSIVE_DEPTH_MAX}"
                    )))
                }
            },
        };
        Ok(DeviceChoice {
            device: get(IB_DEVICE).filter(|v| !v.is_empty()),
            port: num(IB_PORT)?,
            gid_index: num(IB_GID_INDEX)?.unwrap_or(0),
            passive_depth,
        })
    }

    /// Receive buffers per peer for passive messages.
    pub fn passive_depth(&self) -> u32 {
        self.passive_depth.unwrap_or(PASSIVE_DEPTH)
    }

    pub fn is_fake(&self) -> bool {
        self.device.as_deref() == Some(FAKE_DEVICE)
    }
}

/// The address of this rank's port: a LID on InfiniBand, a GID on RoCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PortAddr {
    pub lid: u16,
    pub gid: [u8; 16],
    pub gid_index: u8,
    pub port: u8,
    /// RoCE (Ethernet link layer): routed by GID, LID unused.
    pub roce: bool,
    /// Active MTU in bytes (256..=4096).
    pub mtu: u32,
}

/// The far end of one RC queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QpEndpoint {
    pub addr: PortAddr,
    pub qpn: u32,
    pub psn: u32,
}

/// Keys and base address of a registered region: byte `i` of the region is device address
/// `base + i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
    pub base: u64,
}

/// Memory to register: one segment's mapping (or its user-bound data).
#[cfg_attr(
    not(any(feature = "verbs", feature = "fake-verbs")),
    allow(dead_code, reason = "read only by a device, and this build has none")
)]
pub(crate) struct Region {
    #[cfg_attr(not(feature = "fake-verbs"), allow(dead_code))]
    pub key: SegKey,
    pub addr: *mut u8,
    pub len: usize,
    /// The shared-memory file behind it, when there is one (the fake maps peers' files).
    #[cfg_attr(not(feature = "fake-verbs"), allow(dead_code))]
    pub file: Option<PathBuf>,
}

/// Local memory of a work request.
#[cfg_attr(
    not(any(feature = "verbs", feature = "fake-verbs")),
    allow(dead_code, reason = "read only by a device, and this build has none")
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sge {
    pub lkey: u32,
    pub addr: u64,
    pub len: u32,
}

#[cfg_attr(
    not(any(feature = "verbs", feature = "fake-verbs")),
    allow(dead_code, reason = "read only by a device, and this build has none")
)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum WrOp {
    Write {
        sge: Sge,
    },
    /// A small write whose payload travels in the work request itself.
    WriteInline {
        data: [u8; 4],
    },
    Read {
        sge: Sge,
    },
    /// 8-byte atomics; the old value lands in `sge`.
    FetchAdd {
        sge: Sge,
        add: u64,
    },
    CompareSwap {
        sge: Sge,
        expected: u64,
        new: u64,
    },
    /// A two-sided SEND: the bytes of `sge` land in the receive buffer the peer posted next
    /// on the connected queue pair (the request's `remote` is unused). With no receive
    /// posted, RC answers "receiver not ready" and the sender's HCA retries (RNR retry,
    /// unlimited here), which is the flow control of passive messages.
    Send {
        sge: Sge,
    },
}

#[cfg_attr(
    not(any(feature = "verbs", feature = "fake-verbs")),
    allow(dead_code, reason = "read only by a device, and this build has none")
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorkRequest {
    pub wr_id: u64,
    pub op: WrOp,
    pub remote: RemoteAddr,
    /// Produce a completion on success (errors always produce one).
    pub signaled: bool,
}

/// A receive buffer posted to a queue pair's receive queue.
#[cfg_attr(
    not(any(feature = "verbs", feature = "fake-verbs")),
    allow(dead_code, reason = "read only by a device, and this build has none")
)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecvRequest {
    /// Comes back in the receive completion. Receive queues are per queue pair (see
    /// `passive.rs`), so the transport encodes the sending peer and the buffer in it.
    pub wr_id: u64,
    pub sge: Sge,
}

/// One work completion.
#[derive(Clone, Debug)]
pub(crate) struct Completion {
    pub wr_id: u64,
    /// `Err(reason)` for an error completion (including flushed work requests).
    pub status: std::result::Result<(), String>,
    /// Bytes placed in the receive buffer (receive completions; 0 otherwise and on errors).
    pub byte_len: u32,
}

pub(crate) trait MemoryRegion: Send + Sync {
    fn keys(&self) -> MrKeys;
}

pub(crate) trait CompletionQueue: Send + Sync {
    /// For a device to recognize its own completion queues.
    #[cfg_attr(
        not(any(feature = "verbs", feature = "fake-verbs")),
        allow(dead_code, reason = "called only by a device, and this build has none")
    )]
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
    /// Appends up to `max` completions to `out`; never blocks.
    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<()>;
}

pub(crate) trait QueuePair: Send {
    fn qpn(&self) -> u32;
    /// INIT -> RTR -> RTS towards `remote`, starting our send PSN at `local_psn`.
    fn connect(&mut self, local_psn: u32, remote: &QpEndpoint) -> Result<()>;
    /// Posts `wrs` as one chain (in order on this QP). On error nothing was posted.
    fn post_send(&mut self, wrs: &[WorkRequest]) -> Result<()>;
    /// Posts receive buffers, consumed in order by the peer's SENDs; each produces one
    /// completion on the receive completion queue. Fails when the receive queue is full.
    fn post_recv(&mut self, wrs: &[RecvRequest]) -> Result<()>;
}

pub(crate) trait Device: Send + Sync {
    /// For logs: device, port and link layer.
    fn describe(&self) -> String;
    fn port(&self) -> PortAddr;
    /// The largest send queue the device supports.
    fn max_qp_wr(&self) -> u32;
    fn register(&self, region: &Region) -> Result<Arc<dyn MemoryRegion>>;
    fn create_cq(&self, depth: u32) -> Result<Arc<dyn CompletionQueue>>;
    /// An RC queue pair whose send queue (`sq_depth` requests) completes on `send_cq` and
    /// whose receive queue (`rq_depth` buffers; 0 for QPs that never receive) on `recv_cq`.
    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        sq_depth: u32,
        rq_depth: u32,
    ) -> Result<Box<dyn QueuePair>>;
    /// Called once the job's shared-memory prefix is known (the fake finds peers' memory
    /// through it; real devices ignore it).
    fn attach_job(&self, _shm_prefix: &str) {}
    /// Test hook: makes the next work request fail with an error completion. Only the fake
    /// device can; the others return false.
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    fn inject_fault(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_choice() {
        let c = DeviceChoice::from_lookup(|k| match k {
            IB_DEVICE => Some("mlx5_1".into()),
            IB_PORT => Some("2".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.device.as_deref(), Some("mlx5_1"));
        assert_eq!(c.port, Some(2));
        assert_eq!(c.gid_index, 0);
        assert!(!c.is_fake());
        let bad = DeviceChoice::from_lookup(|k| (k == IB_PORT).then(|| "x".into()));
        assert!(matches!(bad, Err(Error::Env(_))));
        let fake = DeviceChoice::from_lookup(|k| (k == IB_DEVICE).then(|| "fake".into()));
        assert!(fake.unwrap().is_fake());
        assert_eq!(c.passive_depth(), PASSIVE_DEPTH);
        let depth =
            |v: &str| DeviceChoice::from_lookup(|k| (k == IB_PASSIVE_DEPTH).then(|| v.to_string()));
        assert_eq!(depth("2").unwrap().passive_depth(), 2);
        for bad in ["0", "1025", "many"] {
            assert!(matches!(depth(bad), Err(Error::Env(_))), "{bad}");
        }
    }
}
