//! The state of the groups on this member: the table of groups, each committed group's
//! internal segment, and the progress of its collectives (resumable after a timeout).
//! Plain data; the operations are in `group` and `group::collectives`.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::memory::segment_table::{LocalSegment, TAG_LATCHED};
use crate::transport::requests::{Ack, RpcSlot};
use crate::types::{Rank, SegKey};

/// A committed group's internal segment, the members it was committed with and this
/// member's place among them.
pub(crate) struct Committed {
    pub key: SegKey,
    pub seg: Arc<LocalSegment>,
    pub members: Vec<Rank>,
    pub me: usize,
    pub buf: usize,
}

/// A commit begun and not finished (it timed out): the members it is for and how far it got
/// with each peer. Calling commit again with the same members resumes it from there, so
/// that a commit polled with `Timeout::TEST` completes (see `group::commit`).
pub(crate) struct Pending {
    pub members: Vec<Rank>,
    /// One per member other than this rank, in member order.
    pub pairs: Vec<PairProgress>,
}

/// Where this rank stands with one peer in a commit; each step happens once per generation.
pub(crate) struct PairProgress {
    pub rank: Rank,
    /// The tag this rank announces to the peer (the pair's generation, the member digest).
    pub tag: u64,
    /// The registration of `tag` was sent.
    pub announced: bool,
    /// This rank has seen the peer's registration of `tag` and sent `tag | TAG_SEEN`.
    pub seen: bool,
    /// The peer has seen this rank's registration of `tag` (it sent its `TAG_SEEN` mark).
    pub confirmed: bool,
    /// Acknowledgements of registrations sent to the peer, not yet received, each with the
    /// tag it registered.
    pub acks: Vec<(u64, Ack)>,
}

impl PairProgress {
    pub fn new(rank: Rank, tag: u64) -> Self {
        PairProgress {
            rank,
            tag,
            announced: false,
            seen: false,
            confirmed: false,
            acks: Vec::new(),
        }
    }

    /// Now at `tag` (a later generation): every step again.
    pub fn restart(&mut self, tag: u64) {
        *self = PairProgress {
            acks: std::mem::take(&mut self.acks),
            ..PairProgress::new(self.rank, tag)
        };
    }

    pub fn done(&self) -> bool {
        self.seen && self.confirmed && self.acks.is_empty()
    }
}

/// One group on this member. `members` may differ from `committed.members`: ranks added
/// after the commit (as GPI-2 allows) count at once for `group_size`, and the group needs a
/// new commit before its collectives.
pub(crate) struct GroupState {
    pub members: Vec<Rank>,
    pub committed: Option<Arc<Committed>>,
    pub pending: Option<Pending>,
    pub coll: Arc<Mutex<Coll>>,
    /// This instance of the group, as its commits know it (see [`Committing`]).
    pub committing: Arc<Committing>,
}

/// One instance of a group (from `group_create` to `group_delete`) as its commits see it,
/// compared by pointer: a commit that finds another one (or none) in the table under the
/// group's id knows that its group was deleted (and the id perhaps taken again).
#[derive(Default)]
pub(crate) struct Committing {
    /// Held by a commit of the group for its whole call (it takes `pending` out while it
    /// works on it): a second thread's commit waits for it instead of starting over.
    pub lock: Mutex<()>,
    /// Set by `group_delete` (under the groups lock, as it takes the group out of the
    /// table), which then wakes the waits of commits: a commit waiting for its peers stops.
    pub deleted: AtomicBool,
    /// The acknowledgement a commit of the group waits for, if it waits for one: what
    /// `group_delete` wakes (after setting `deleted`), so that a commit waiting on a peer
    /// that does not answer stops too.
    pub waiting_for_ack: Mutex<Option<Arc<RpcSlot>>>,
}

impl GroupState {
    pub fn new(members: Vec<Rank>) -> Self {
        GroupState {
            members,
            committed: None,
            pending: None,
            coll: Arc::default(),
            committing: Arc::default(),
        }
    }
}

pub(crate) struct GroupTable {
    pub groups: Mutex<Vec<Option<GroupState>>>,
    /// Per group id and peer, the generation of the last commit of the id that included
    /// that peer: each new commit counts one on; a peer found ahead (it began commits with
    /// this rank that this rank did not: abandoned after a timeout, or listing other
    /// members) is caught up with (see `group::commit`). So a peer's registration from an
    /// earlier life of the id is told apart from the current one, ranks whose histories of
    /// the id differ still agree on the next commit, and a rank can join a group that the
    /// others committed before without it (`group_add` after `group_commit`), where a count
    /// per id would differ between old and new members.
    pub commits: Mutex<HashMap<(u8, Rank), u16>>,
}

impl GroupTable {
    pub fn new(max: u32) -> Self {
        GroupTable {
            groups: Mutex::new((0..max).map(|_| None).collect()),
            commits: Mutex::new(HashMap::new()),
        }
    }
}

/// The tag a group's internal segment is registered with: the pair's generation of the
/// commit in the top 16 bits, [`TAG_SEEN`] clear, a digest of the member list below.
pub(super) fn commit_tag(members: &[Rank], generation: u16) -> u64 {
    let digest = members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, r| {
        (h ^ u64::from(r.0) ^ 0x5bd1).wrapping_mul(0x100_0000_01b3)
    });
    (u64::from(generation) << 48) | (digest & TAG_DIGEST)
}

/// Set in a commit's registration once its sender has seen the peer's registration of the
/// same generation and members. The segment table latches it (keeps the last such tag per
/// peer past a deletion): a peer that completes its commit may delete the group, or begin
/// its next commit, before this rank has looked at its mark.
pub(super) const TAG_SEEN: u64 = TAG_LATCHED;

const TAG_DIGEST: u64 = TAG_SEEN - 1;

pub(super) fn generation(tag: u64) -> u16 {
    (tag >> 48) as u16
}

/// `tag` (its members) at `generation`, [`TAG_SEEN`] clear.
pub(super) fn with_generation(tag: u64, generation: u16) -> u64 {
    (u64::from(generation) << 48) | (tag & TAG_DIGEST)
}

/// How many generations `theirs` is ahead of `ours` (negative: behind). Generations wrap
/// (16 bits), so they are compared as serial numbers: ranks never drift 2^15 apart.
pub(super) fn ahead(theirs: u64, ours: u64) -> i16 {
    generation(theirs).wrapping_sub(generation(ours)) as i16
}

/// Whether two commit tags list the same members.
pub(super) fn same_members(a: u64, b: u64) -> bool {
    a & TAG_DIGEST == b & TAG_DIGEST
}

#[derive(Default)]
pub(crate) struct RoundState {
    pub epoch: u32,
    pub step: usize,
    pub sent: bool,
    pub acc: Vec<u8>,
}

/// A group's collective state on this member.
#[derive(Default)]
pub(crate) struct Coll {
    pub barrier_done: u32,
    pub barrier: Option<RoundState>,
    pub reduce_done: u32,
    pub reduce: Option<RoundState>,
    /// Rounds of the allreduce in progress already complete (a reduction larger than one
    /// round buffer runs in several; a call resumed after a timeout skips these).
    pub reduce_rounds_done: usize,
}
