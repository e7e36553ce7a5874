//! Setting the verbs transport up: queue pairs created before the rendezvous, their
//! numbers published through it, then connected to the peers reached over verbs.

use std::sync::Arc;

use parking_lot::Mutex;

use super::address::{decode_qpns, encode_qpns, Endpoint, VerbsHello};
use super::channel::Channel;
use super::device::{CompletionQueue, Device, QueuePair};
use super::layout::{CHANNELS, INTERNAL, PASSIVE, QPS};
use super::passive::{PassiveVerbs, PASSIVE_SQ_DEPTH};
use super::transport::VerbsTransport;
use crate::error::{Error, Result};
use crate::state::StateVector;
use crate::types::Rank;

use super::registry::Registry;

/// Queue pairs created before the rendezvous, waiting for the peers' numbers.
pub(crate) struct VerbsSetup {
    device: Arc<dyn Device>,
    registry: Registry,
    cqs: Vec<Arc<dyn CompletionQueue>>,
    /// Receive completions of the passive queue pairs.
    recv_cq: Arc<dyn CompletionQueue>,
    qps: Vec<Vec<Box<dyn QueuePair>>>,
    psn: u32,
    sq_depth: u32,
    rank: Rank,
    passive: PassiveSizes,
    fake: bool,
}

/// Passive messages: the largest one (`passive_transfer_size_max`) and the receive buffers
/// posted per peer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PassiveSizes {
    pub size: u32,
    pub depth: u32,
}

impl VerbsSetup {
    /// Creates the completion queues, a queue pair per (peer, channel) and the registry.
    pub fn new(
        device: Arc<dyn Device>,
        rank: Rank,
        nranks: u16,
        queue_size_max: u32,
        passive: PassiveSizes,
        job_id: &str,
        fake: bool,
    ) -> Result<Self> {
        // Room for a full GASPI queue plus the fence, within what the device allows.
        let sq_depth = (queue_size_max + 1).min(device.max_qp_wr()).max(2);
        let registry = Registry::new(device.clone(), job_id, rank.0, fake)?;
        let peers = u32::from(nranks);
        let mut cqs = (0..CHANNELS)
            .map(|_| device.create_cq(sq_depth * peers))
            .collect::<Result<Vec<_>>>()?;
        cqs.push(device.create_cq(PASSIVE_SQ_DEPTH * peers)?);
        let recv_cq = device.create_cq(passive.depth * peers)?;
        let mut qps = Vec::with_capacity(usize::from(nranks));
        for p in 0..nranks {
            let mut v = Vec::new();
            if p != rank.0 {
                for cq in &cqs[..CHANNELS] {
                    v.push(device.create_qp(cq, cq, sq_depth, 0)?);
                }
                let sq = PASSIVE_SQ_DEPTH.min(device.max_qp_wr());
                v.push(device.create_qp(&cqs[PASSIVE], &recv_cq, sq, passive.depth)?);
            }
            qps.push(v);
        }
        let mut psn = [0u8; 4];
        getrandom::fill(&mut psn).map_err(|e| {
            Error::Device(format!("no randomness for packet sequence numbers: {e}"))
        })?;
        Ok(VerbsSetup {
            device,
            registry,
            cqs,
            recv_cq,
            qps,
            psn: u32::from_le_bytes(psn) & 0xff_ffff,
            sq_depth,
            rank,
            passive,
            fake,
        })
    }

    /// What this rank tells the others at the rendezvous.
    pub fn hello(&self) -> VerbsHello {
        let me = Endpoint {
            port: self.device.port(),
            psn: self.psn,
            directory: self.registry.directory_keys(),
        };
        VerbsHello {
            common: me.encode(),
            to_peer: self
                .qps
                .iter()
                .map(|v| encode_qpns(&v.iter().map(|q| q.qpn()).collect::<Vec<_>>()))
                .collect(),
        }
    }

    /// Connects the queue pairs of the peers in `peers` (the others are dropped), from what
    /// every rank published at the rendezvous: per rank, its endpoint record and its queue
    /// pair numbers meant for this rank.
    pub fn connect(
        self,
        published: &[(Vec<u8>, Vec<u8>)],
        peers: &[Rank],
        state: Arc<StateVector>,
        shm_prefix: Option<&str>,
    ) -> Result<VerbsTransport> {
        if let Some(p) = shm_prefix {
            self.device.attach_job(p);
        }
        let mut directories = vec![None; self.qps.len()];
        let mut channels: Vec<Option<Vec<Mutex<Channel>>>> = Vec::new();
        for (p, qps) in self.qps.into_iter().enumerate() {
            let rank = Rank(p as u16);
            if !peers.contains(&rank) {
                channels.push(None);
                continue;
            }
            let (common, qpns) = &published[p];
            let remote = Endpoint::decode(common)?
                .ok_or_else(|| Error::Bootstrap(format!("rank {p} has no verbs endpoint")))?;
            let qpns = decode_qpns(qpns, QPS)?;
            directories[p] = Some(remote.directory);
            let mut v = Vec::with_capacity(QPS);
            for (i, mut qp) in qps.into_iter().enumerate() {
                let ep = super::device::QpEndpoint {
                    addr: remote.port,
                    qpn: qpns[i],
                    psn: remote.psn,
                };
                qp.connect(self.psn, &ep)?;
                let queue = (i < INTERNAL).then_some(crate::types::QueueId(i as u8));
                let depth = if i == PASSIVE {
                    PASSIVE_SQ_DEPTH.min(self.device.max_qp_wr())
                } else {
                    self.sq_depth
                };
                v.push(Mutex::new(Channel::new(qp, rank, queue, depth)));
            }
            channels.push(Some(v));
        }
        // The fake device's peers fill the receive buffers from their own processes.
        let shared = match (self.fake, shm_prefix) {
            (false, _) => None,
            (true, Some(p)) => Some(p),
            (true, None) => {
                return Err(Error::Device(
                    "fake device: no shared-memory prefix for the passive buffers".into(),
                ))
            }
        };
        let passive = PassiveVerbs::new(
            &*self.device,
            self.rank,
            peers,
            self.passive.size,
            self.passive.depth,
            self.recv_cq,
            shared,
        )?;
        for (p, v) in channels.iter().enumerate() {
            if let Some(v) = v {
                v[PASSIVE]
                    .lock()
                    .post_recv(&passive.initial_receives(Rank(p as u16)))?;
            }
        }
        Ok(VerbsTransport {
            device: self.device,
            registry: self.registry,
            cqs: self.cqs,
            channels,
            directories,
            state,
            atomics_in_doubt: Default::default(),
            passive,
        })
    }
}
