//! The per-rank schedules of a simulated allreduce, built by the runtime's own planner
//! (`plan::allreduce_plan`) for every rank and kept in a compact form: only what costs
//! time is kept (who, how many bytes, which notification), not the offsets.

use std::collections::HashMap;

use crate::algorithm::Algorithm;
use crate::plan::{allreduce_plan, Averaging};
use crate::schedule::{Action, HostMemory};
use crate::thresholds::Thresholds;

use super::cluster::{Cluster, Intra, NOTIF_LIMIT};
use super::error::SimError;

/// The memory bound of a feasible algorithm: bytes of staging (segment beyond the vector)
/// one rank may need. Why: one-shot needs `p-1` copies of the vector on every rank, which
/// at 1024 ranks and a few MiB is more memory than a rank can spare for a collective.
pub const STAGING_LIMIT: usize = 4 << 30;

/// One action with what costs time: who, how many bytes, which notification, and the
/// segment offsets, which tell the replay who last wrote what an action reads
/// (`lines.rs`). 32 bytes, so 1024 ranks' ring schedules (about 6 M actions) fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Write `len` bytes (0: a bare notification) of our `[src, src+len)` to rank `to`'s
    /// `[dst, dst+len)`, setting `notif` there.
    Send {
        to: u32,
        len: u32,
        notif: u32,
        src: u64,
        dst: u64,
    },
    /// Wait for `notif` and reset it.
    Recv { notif: u32 },
    /// Reduce `len` bytes from our staging at `src` into our data at `dst`.
    Reduce { len: u32, src: u64, dst: u64 },
    /// Read `len` bytes at `src` of same-host rank `from`'s segment in place, reducing them
    /// into ours at `dst` (`reduce`) or copying them there. `folded`: a reduction into the
    /// range the previous action reduced into, which is still in cache (single-copy folds
    /// every peer's operand into one cache-sized chunk in turn), so only the peer's bytes
    /// come from memory.
    ReadPeer {
        from: u32,
        len: u32,
        reduce: bool,
        folded: bool,
        src: u64,
        dst: u64,
    },
    /// Divide `len` bytes at `off` by the rank count (AVG).
    Divide { len: u32, off: u64 },
    /// Wait for local completion of every send posted so far.
    Flush,
}

impl Op {
    /// The ranges of `len` bytes this action of rank `me` reads or writes, as `(owner,
    /// offset)`, and `len`.
    pub(crate) fn touches(&self, me: usize) -> ([Option<(usize, u64)>; 2], u32) {
        match *self {
            Op::Send {
                to, len, src, dst, ..
            } if len > 0 => ([Some((me, src)), Some((to as usize, dst))], len),
            Op::Reduce { len, src, dst } => ([Some((me, src)), Some((me, dst))], len),
            Op::ReadPeer {
                from,
                len,
                src,
                dst,
                ..
            } => ([Some((from as usize, src)), Some((me, dst))], len),
            Op::Divide { len, off } => ([Some((me, off)), None], len),
            Op::Send { .. } | Op::Recv { .. } | Op::Flush => ([None, None], 0),
        }
    }
}

/// What every rank replays: `ranks[r]` is the list of schedules rank `r`'s runs cycle
/// through (run `q` uses `ranks[r][q % len]`).
#[derive(Debug)]
pub(crate) struct Program {
    /// Per rank, the schedules its runs cycle through.
    pub ranks: Vec<Vec<Vec<Op>>>,
    /// The segment a rank works in (its vector and its staging), the largest of any rank's:
    /// what the ranks of a host keep in its cache.
    pub segment_bytes: usize,
}

impl Program {
    /// Renumbers each rank's notification ids densely (`0..`, in order of first use by
    /// its receives, then by sends to it), so the replay keeps them in a vector instead
    /// of a hash map (the speed that 1024-rank rings need); returns the ids per rank.
    pub(crate) fn densify(&mut self) -> Vec<usize> {
        let mut maps: Vec<HashMap<u32, u32>> = vec![HashMap::new(); self.ranks.len()];
        let dense = |maps: &mut Vec<HashMap<u32, u32>>, r: usize, id: u32| {
            let m = &mut maps[r];
            let next = m.len() as u32;
            *m.entry(id).or_insert(next)
        };
        for (r, schedules) in self.ranks.iter_mut().enumerate() {
            for op in schedules.iter_mut().flatten() {
                if let Op::Recv { notif } = op {
                    *notif = dense(&mut maps, r, *notif);
                }
            }
        }
        for schedules in &mut self.ranks {
            for op in schedules.iter_mut().flatten() {
                if let Op::Send { to, notif, .. } = op {
                    *notif = dense(&mut maps, *to as usize, *notif);
                }
            }
        }
        maps.iter().map(HashMap::len).collect()
    }
}

/// A count that must fit the compact form (vectors up to 4 GiB, ranks up to 2^32).
fn small(v: usize) -> Result<u32, SimError> {
    u32::try_from(v).map_err(|_| SimError::BadInput("vector or group too large to simulate"))
}

/// The compact form of action `a`, which follows `prev`.
fn op(a: &Action, prev: Option<&Action>) -> Result<Op, SimError> {
    Ok(match *a {
        Action::Send {
            to,
            src,
            dst,
            len,
            notif,
        } => Op::Send {
            to: small(to)?,
            len: small(len)?,
            notif,
            src: src as u64,
            dst: dst as u64,
        },
        Action::Recv { notif, .. } => Op::Recv { notif },
        Action::Reduce { src, dst, len, .. } => Op::Reduce {
            len: small(len)?,
            src: src as u64,
            dst: dst as u64,
        },
        Action::ReduceFrom {
            from,
            src,
            dst,
            len,
            ..
        } => {
            let same_range = |p: &Action| match *p {
                Action::ReduceFrom { dst: d, len: l, .. } => (d, l) == (dst, len),
                _ => false,
            };
            Op::ReadPeer {
                from: small(from)?,
                len: small(len)?,
                reduce: true,
                folded: prev.is_some_and(same_range),
                src: src as u64,
                dst: dst as u64,
            }
        }
        Action::CopyFrom {
            from,
            src,
            dst,
            len,
        } => Op::ReadPeer {
            from: small(from)?,
            len: small(len)?,
            reduce: false,
            folded: false,
            src: src as u64,
            dst: dst as u64,
        },
        Action::Divide { off, len } => Op::Divide {
            len: small(len)?,
            off: off as u64,
        },
        Action::Flush => Op::Flush,
    })
}

/// Builds every rank's plan of `algorithm` for `bytes` of `elem`-byte elements on
/// `cluster` of hosts whose last-level cache holds `llc_bytes`, exactly as the runtime
/// would (default thresholds for the hierarchical allreduce's choice between hosts), or
/// says why the runtime could not run it.
pub(crate) fn build(
    algorithm: Algorithm,
    cluster: &Cluster,
    bytes: usize,
    elem: usize,
    llc_bytes: usize,
) -> Result<Program, SimError> {
    let infeasible = |why| SimError::Infeasible { algorithm, why };
    if algorithm == Algorithm::Auto {
        return Err(SimError::BadInput("resolve Auto first (runtime_choice)"));
    }
    if algorithm == Algorithm::SingleCopy && !cluster.shared_memory() {
        return Err(infeasible(
            "some member is not reached through shared memory",
        ));
    }
    let hosts = cluster.layout();
    let thresholds = Thresholds::default();
    let memory = if cluster.intra == Intra::Shm {
        HostMemory::Shared
    } else {
        HostMemory::Staged
    };
    let mut ranks = Vec::with_capacity(cluster.ranks);
    let mut segment_bytes = 0;
    for me in 0..cluster.ranks {
        let shape = cluster.shape(me, bytes, elem, llc_bytes);
        let plan = allreduce_plan(
            algorithm,
            &shape,
            &hosts,
            memory,
            &thresholds,
            Averaging::None,
        );
        let segment = plan.schedules.iter().map(|s| s.segment_bytes).max();
        let segment = segment.unwrap_or(0);
        segment_bytes = segment_bytes.max(segment);
        // The runtime's setup checks (`Collective::new`) and the memory bound, on rank 0
        // before any other rank's plan is built (they are the same on every rank).
        if me == 0 {
            let notifs = plan.schedules.iter().map(|s| s.notifications).max();
            if notifs.unwrap_or(0) > NOTIF_LIMIT {
                return Err(infeasible("more notifications than a segment offers"));
            }
            if segment.saturating_sub(bytes) > STAGING_LIMIT {
                return Err(infeasible("staging exceeds the simulator's memory bound"));
            }
        }
        let schedules = plan
            .schedules
            .iter()
            .map(|s| {
                let prev = std::iter::once(None).chain(s.actions.iter().map(Some));
                s.actions
                    .iter()
                    .zip(prev)
                    .map(|(a, p)| op(a, p))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        ranks.push(schedules);
    }
    Ok(Program {
        ranks,
        segment_bytes,
    })
}
