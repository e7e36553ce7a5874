//! What allreduce and broadcast objects share: setup from a schedule plan, and the
//! start/test/wait life cycle over a typed data range.

use std::marker::PhantomData;
use std::sync::Arc;

use gaspi::{Context, Group, ReduceOp, Timeout};

use crate::algorithm::Algorithm;
use crate::driver::DrivenEngine;
use crate::element::Element;
use crate::engine::{Engine, Kernels};
use crate::error::{Error, Result};
use crate::options::{Options, NET_CHUNK_BYTES, SHM_CHUNK_BYTES};
use crate::reduction::Reduction;
use crate::region::OwnedSegment;
use crate::schedule::{HostMemory, Schedule, Shape};
use crate::setup::{create_segment, SIGNATURE};

/// This rank's place in `group`, the shape of a collective over `count` elements and how
/// the group's members sit on hosts (member indices per host, hosts in the order of their
/// lowest member: the same on every member).
pub(crate) fn shape_of<T: Element>(
    ctx: &Context,
    group: Group,
    count: usize,
    options: &Options,
) -> Result<(Vec<gaspi::Rank>, Shape, Vec<Vec<usize>>)> {
    let members = ctx.group_members(group)?;
    let me = members
        .iter()
        .position(|r| *r == ctx.rank())
        .ok_or(Error::NotAMember {
            rank: ctx.rank(),
            group,
        })?;
    let elem = std::mem::size_of::<T>();
    count.checked_mul(elem).ok_or(Error::TooManyElements {
        count,
        elem_bytes: elem,
    })?;
    let all_shm = all_shared_memory(ctx, &members);
    let chunk_bytes = options.chunk_bytes.unwrap_or(if all_shm {
        SHM_CHUNK_BYTES
    } else {
        NET_CHUNK_BYTES
    });
    let shape = Shape {
        me,
        ranks: members.len(),
        count,
        elem,
        chunk_bytes,
        notif_limit: ctx.notification_num(),
        ring_staging_bytes: crate::schedule::RING_STAGING_BYTES,
    };
    let index = |r: &gaspi::Rank| members.iter().position(|m| m == r);
    let hosts = ctx
        .group_hosts(group)?
        .iter()
        .map(|host| host.iter().filter_map(index).collect())
        .collect();
    // A partition of the members whatever the runtime reported: the schedules rely on it.
    let layout = crate::schedule::host_layout(hosts, members.len());
    Ok((members, shape, layout))
}

/// Whether every member but this rank is reached through shared memory (then every member
/// sees the same: they share one host).
pub(crate) fn all_shared_memory(ctx: &Context, members: &[gaspi::Rank]) -> bool {
    members
        .iter()
        .all(|r| *r == ctx.rank() || ctx.uses_shm_to(*r))
}

/// Whether this rank reaches every member on its host through shared memory (`members`
/// the group's ranks, `hosts` as [`shape_of`] gives them, `me` our member index).
pub(crate) fn host_peers_share_memory(
    ctx: &Context,
    members: &[gaspi::Rank],
    hosts: &[Vec<usize>],
    me: usize,
) -> bool {
    let ours = hosts
        .iter()
        .find(|m| m.contains(&me))
        .map_or(&[][..], |m| m);
    let peers: Vec<gaspi::Rank> = ours.iter().map(|&j| members[j]).collect();
    all_shared_memory(ctx, &peers)
}

/// What one member brings to an allreduce's setup, before the plan.
pub(crate) struct SetupView {
    pub algorithm: Algorithm,
    /// This member can run `algorithm` (single-copy needs every member in shared memory).
    pub feasible: bool,
    /// See [`host_peers_share_memory`].
    pub host_shared: bool,
}

/// What the whole group agreed on.
pub(crate) struct Agreed {
    /// How the hosts run the hierarchical allreduce's intra-host phases: in place only
    /// when every member reaches its host peers through shared memory. Each rank's view of
    /// that can differ from its peers' (a rank that registered user memory is moved to TCP
    /// by its peers only), and ranks that decided alone could build schedules that do not
    /// fit together.
    pub memory: HostMemory,
    /// Every member can run the algorithm.
    pub feasible: bool,
}

/// Agrees on `mine` with the rest of `group`: a four-word allreduce that every member of
/// an allreduce's setup joins, before the plan, whatever it chose; `SetupMismatch` where
/// the members' algorithms differ (their plans would not fit together).
pub(crate) fn agree(
    ctx: &Context,
    group: Group,
    mine: &SetupView,
    timeout: Timeout,
) -> Result<Agreed> {
    let tag = mine.algorithm.tag() as u32;
    // The minimum of the tag and of its complement: the tag everywhere when both give it
    // back.
    let words = [
        u32::from(mine.host_shared),
        u32::from(mine.feasible),
        tag,
        !tag,
    ];
    let mut least = [0u32; 4];
    ctx.allreduce(&words, &mut least, ReduceOp::Min, group, timeout)?;
    if least[2] != tag || !least[3] != tag {
        return Err(Error::SetupMismatch);
    }
    Ok(Agreed {
        memory: if least[0] == 1 {
            HostMemory::Shared
        } else {
            HostMemory::Staged
        },
        feasible: least[1] == 1,
    })
}

/// A set-up collective over `count` elements of `T`.
pub(crate) struct Collective<T: Element> {
    /// The engine under its driver.
    engine: DrivenEngine,
    /// The segment whose data range holds the user's elements.
    seg: Arc<OwnedSegment>,
    /// Elements of the data range.
    count: usize,
    /// The element type of the data range.
    _elem: PhantomData<fn() -> T>,
}

impl<T: Element> Collective<T> {
    /// Checks the `plan` against the transport's limits, creates the segment with the
    /// group (comparing `signature`s) and puts the engine under the options' driver.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &Arc<Context>,
        group: Group,
        members: Vec<gaspi::Rank>,
        count: usize,
        reduction: Reduction,
        plan: Vec<Schedule>,
        largest_send: usize,
        signature: [u64; SIGNATURE],
        options: &Options,
    ) -> Result<Self> {
        let max = ctx.transfer_size_max() as usize;
        if largest_send > max {
            return Err(Error::TransferTooLarge {
                bytes: largest_send,
                max,
            });
        }
        let notifs = plan.iter().map(|s| s.notifications).max().unwrap_or(0);
        if notifs > ctx.notification_num() {
            return Err(Error::TooManyNotifications {
                needed: notifs,
                available: ctx.notification_num(),
            });
        }
        let bytes = plan.iter().map(|s| s.segment_bytes).max().unwrap_or(0);
        let seg = Arc::new(create_segment(
            ctx,
            group,
            bytes,
            signature,
            options.setup_timeout,
        )?);
        let engine = Engine::new(
            Arc::clone(&seg),
            members,
            options.queue,
            plan,
            Kernels::of::<T>(),
            reduction,
        );
        let engine = DrivenEngine::new(engine, options.driver)?;
        Ok(Collective {
            engine,
            seg,
            count,
            _elem: PhantomData,
        })
    }

    /// Elements per run.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The data range, between runs.
    pub fn buffer_mut(&mut self) -> Result<&mut [T]> {
        if self.engine.is_active() {
            return Err(Error::InFlight);
        }
        // SAFETY: no run is active, so no peer writes the data range (see `region`), and
        // `&mut self` keeps other views of it from living at the same time.
        Ok(unsafe { self.seg.data_mut::<T>(self.count) })
    }

    /// Starts a run over the data range as it stands.
    pub fn start(&mut self) -> Result<()> {
        self.engine.start()
    }

    /// Copies `data` into the data range and starts a run.
    pub fn start_from(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.count {
            return Err(Error::LengthMismatch {
                given: data.len(),
                expected: self.count,
            });
        }
        self.buffer_mut()?.copy_from_slice(data);
        self.start()
    }

    /// Advances the run without blocking; `true` once none is in flight.
    pub fn test(&mut self) -> Result<bool> {
        self.engine.advance(gaspi::Deadline::NOW)
    }

    /// Advances the run until it completes (the result) or `timeout` passes
    /// ([`Error::Timeout`]: the run goes on).
    pub fn wait(&mut self, timeout: Timeout) -> Result<&[T]> {
        if !self.engine.advance(timeout.deadline())? {
            return Err(Error::Timeout);
        }
        self.output()
    }

    /// The data range after the last completed run.
    pub fn output(&self) -> Result<&[T]> {
        if let Some(cause) = self.engine.failure() {
            return Err(Error::Failed(cause));
        }
        if self.engine.is_active() {
            return Err(Error::InFlight);
        }
        if self.engine.completed_runs() == 0 {
            return Err(Error::NoResult);
        }
        // SAFETY: as in `buffer_mut`; `&self` rules out a `&mut` view at the same time.
        Ok(unsafe { self.seg.data::<T>(self.count) })
    }
}
