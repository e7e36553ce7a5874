//! Broadcast from any root: binomial tree for small messages, pipelined chain for large.

use std::sync::Arc;

use gaspi::{Context, Group, Rank, Timeout};

use crate::collective::{set_up, Collective};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::reduction::Reduction;
use crate::schedule;

/// A reusable broadcast of `count` elements of `T` from `root` to every member of a group.
///
/// The root fills [`buffer_mut`](Self::buffer_mut) (or passes a slice to
/// [`start_from`](Self::start_from)); every member calls [`start`](Self::start) and then
/// [`wait`](Self::wait), which returns the root's data.
pub struct Broadcast<T: Element> {
    /// The set-up collective.
    inner: Collective<T>,
    /// Whose data every member receives.
    root: Rank,
}

impl<T: Element> Broadcast<T> {
    /// Sets up the broadcast. Collective over `group` (see [`crate::Allreduce::new`]).
    pub fn new(
        ctx: &Arc<Context>,
        group: Group,
        count: usize,
        root: Rank,
        options: Options,
    ) -> Result<Self> {
        let options = options.resolved()?;
        // No choice here for a member to find infeasible alone: the tree or the chain run
        // everywhere. (The setup signature compares the rest.)
        let setup = set_up::<T>(ctx, group, count, &options, u32::MAX)?;
        let (members, shape) = (setup.members, setup.shape);
        let root_index = members
            .iter()
            .position(|r| *r == root)
            .ok_or(Error::RootNotInGroup { root })?;
        let bytes = count * shape.elem;
        let tree = bytes <= options.tree_max;
        let plan = if tree {
            schedule::broadcast_tree(&shape, root_index)
        } else {
            schedule::broadcast_chain(&shape, root_index)
        };
        let signature = [
            count as u64,
            2 | (T::DATA_TYPE as u64) << 8 | u64::from(tree) << 16 | u64::from(root.0) << 32,
            shape.chunk_bytes as u64,
        ];
        let inner = Collective::new(
            ctx,
            group,
            members,
            count,
            Reduction::Sum,
            vec![plan],
            signature,
            // Broadcasts copy nothing from peers.
            false,
            &options,
        )?;
        Ok(Broadcast { inner, root })
    }

    /// Elements per run.
    pub fn count(&self) -> usize {
        self.inner.count()
    }

    /// The rank whose data every member receives.
    pub fn root(&self) -> Rank {
        self.root
    }

    /// The buffer: the root fills it before `start`; on every member it holds the data
    /// after a run. Fails while a run is in flight.
    pub fn buffer_mut(&mut self) -> Result<&mut [T]> {
        self.inner.buffer_mut()
    }

    /// Starts a run (on the root: of the current buffer contents).
    pub fn start(&mut self) -> Result<()> {
        self.inner.start()
    }

    /// Copies `data` into the buffer and starts; on non-root members the copy is
    /// overwritten by the root's data.
    pub fn start_from(&mut self, data: &[T]) -> Result<()> {
        self.inner.start_from(data)
    }

    /// Makes progress without blocking; `true` once the run is complete.
    pub fn test(&mut self) -> Result<bool> {
        self.inner.test()
    }

    /// Waits for the run and returns the root's data.
    pub fn wait(&mut self, timeout: Timeout) -> Result<&[T]> {
        self.inner.wait(timeout)
    }

    /// The root's data from the last completed run.
    pub fn output(&self) -> Result<&[T]> {
        self.inner.output()
    }
}
