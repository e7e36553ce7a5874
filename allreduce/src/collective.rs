//! What allreduce and broadcast objects share: setup from a schedule plan, and the
//! start/test/wait life cycle over a typed data range.

use std::marker::PhantomData;
use std::sync::Arc;

use gaspi::{Context, Group, ReduceOp, Timeout};

use crate::driver::DrivenEngine;
use crate::element::Element;
use crate::engine::{Engine, Kernels, Queue};
use crate::error::{Error, Result};
use crate::host_cache::LastLevelCache;
use crate::options::{Options, NET_CHUNK_BYTES, SHM_CHUNK_BYTES};
use crate::reduction::Reduction;
use crate::region::OwnedSegment;
use crate::schedule::{HostMemory, Schedule, Shape};
use crate::setup::{create_segment, SIGNATURE};
use crate::stream_copy;

/// What the members of a collective's group settle before planning it: the group, this
/// rank's place in it, the shape of the vector and the facts about the transport that every
/// member must see alike.
pub(crate) struct GroupSetup {
    /// The group's ranks, in member order.
    pub members: Vec<gaspi::Rank>,
    /// This rank's part of a collective over the vector.
    pub shape: Shape,
    /// How the members sit on hosts: member indices per host, hosts in the order of their
    /// lowest member (the same on every member).
    pub hosts: Vec<Vec<usize>>,
    /// Every member reaches every other through shared memory (they share one host).
    pub all_shared_memory: bool,
    /// How the hosts run the hierarchical allreduce's intra-host phases: in place only
    /// when every member reaches its host peers through shared memory.
    pub host_memory: HostMemory,
    /// This rank's copies from its host peers stream past the cache: the vectors of its
    /// host's members exceed the cache as this rank sees it (`stream_copy.rs`).
    pub streams: bool,
}

/// Sets up a collective over `count` elements of `T` on `group`: this rank's place, the
/// hosts' layout, and an agreement with the other members (a five-word allreduce that every
/// member joins) on what decides the plan.
///
/// Each rank's view of the transport can differ from its peers': a rank that registered
/// user memory (`segment_use`) is moved to TCP by its peers only, so it alone still sees
/// every member in shared memory. The chunk size and `Auto`'s choice follow that view, and
/// members that decided alone would build plans that do not fit together (every later
/// setup failed with `SetupMismatch`); so the group takes the least of its members' views.
/// `requested` is what the caller asked for that decides whether the members can run it
/// (the algorithm): members that asked for different things fail with `SetupMismatch`
/// together, instead of some failing alone and the rest waiting for them.
pub(crate) fn set_up<T: Element>(
    ctx: &Context,
    group: Group,
    count: usize,
    options: &Options,
    requested: u32,
) -> Result<GroupSetup> {
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
    let index = |r: &gaspi::Rank| members.iter().position(|m| m == r);
    let hosts = ctx
        .group_hosts(group)?
        .iter()
        .map(|host| host.iter().filter_map(index).collect())
        .collect();
    // A partition of the members whatever the runtime reported: the schedules rely on it.
    let hosts = crate::schedule::host_layout(hosts, members.len());
    let ours = host_of(&hosts, me);
    let cache = options
        .cache_bytes
        .unwrap_or_else(|| LastLevelCache::of_this_host().bytes_for(ours.len()));
    // Whether this rank's copies from its host peers stream: its own view, as only speed
    // depends on it.
    let streams = stream_copy::worth_streaming(count * elem, ours.len(), cache);
    let words = [
        u32::from(host_peers_share_memory(ctx, &members, ours)),
        u32::from(all_shared_memory(ctx, &members)),
        requested,
        !requested,
        // Members of different hosts (or options) may see different caches: the group
        // takes the cache's side only if every member does.
        u32::from(!streams),
    ];
    let mut least = [0u32; 5];
    ctx.allreduce(
        &words,
        &mut least,
        ReduceOp::Min,
        group,
        options.setup_timeout,
    )?;
    // The minimum of the word and of its complement give the word back only when every
    // member passed the same.
    if least[2] != requested || !least[3] != requested {
        return Err(Error::SetupMismatch);
    }
    let all_shared_memory = least[1] == 1;
    let chunk_bytes = options.chunk_bytes.unwrap_or(if all_shared_memory {
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
        in_cache: least[4] == 1,
    };
    Ok(GroupSetup {
        streams,
        members,
        shape,
        hosts,
        all_shared_memory,
        host_memory: if least[0] == 1 {
            HostMemory::Shared
        } else {
            HostMemory::Staged
        },
    })
}

/// Whether every member but this rank is reached through shared memory (as this rank sees
/// it: see [`set_up`]).
fn all_shared_memory(ctx: &Context, members: &[gaspi::Rank]) -> bool {
    members
        .iter()
        .all(|r| *r == ctx.rank() || ctx.uses_shm_to(*r))
}

/// The member indices of member `me`'s host in the layout `hosts` (a partition of the
/// members, so `me` is on one).
fn host_of(hosts: &[Vec<usize>], me: usize) -> &[usize] {
    hosts.iter().find(|m| m.contains(&me)).map_or(&[], |m| m)
}

/// Whether this rank reaches every member on its host (`ours`, member indices into
/// `members`, the group's ranks) through shared memory.
fn host_peers_share_memory(ctx: &Context, members: &[gaspi::Rank], ours: &[usize]) -> bool {
    let peers: Vec<gaspi::Rank> = ours.iter().map(|&j| members[j]).collect();
    all_shared_memory(ctx, &peers)
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
    /// Checks the `plan` against the segment's notification ids, creates the segment with the
    /// group (comparing `signature`s) and puts the engine under the options' driver, its
    /// copies from peers streaming past the cache if `stream_copies`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &Arc<Context>,
        group: Group,
        members: Vec<gaspi::Rank>,
        count: usize,
        reduction: Reduction,
        plan: Vec<Schedule>,
        signature: [u64; SIGNATURE],
        stream_copies: bool,
        options: &Options,
    ) -> Result<Self> {
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
            match options.queue {
                Some(q) => Queue::Given(q),
                None => Queue::Pooled(None),
            },
            plan,
            Kernels::of::<T>(),
            reduction,
            stream_copies,
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

    /// The data range, between runs. Refused after a failed run: members of the aborted
    /// run that have not seen the failure may still write into it.
    pub fn buffer_mut(&mut self) -> Result<&mut [T]> {
        if let Some(cause) = self.engine.failure() {
            return Err(Error::Failed(cause));
        }
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
