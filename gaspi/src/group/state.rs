//! The state of the groups on this member: the table of groups, each committed group's
//! internal segment, and the progress of its collectives (resumable after a timeout).
//! Plain data; the operations are in `group` and `group::collectives`.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::memory::segment_table::LocalSegment;
use crate::types::{Rank, SegKey};

/// A committed group's internal segment and this member's place in it.
pub(crate) struct Committed {
    pub key: SegKey,
    pub seg: Arc<LocalSegment>,
    pub me: usize,
    pub buf: usize,
}

/// One group on this member.
pub(crate) struct GroupState {
    pub members: Vec<Rank>,
    pub committed: Option<Arc<Committed>>,
    pub coll: Arc<Mutex<Coll>>,
}

pub(crate) struct GroupTable {
    pub groups: Mutex<Vec<Option<GroupState>>>,
    /// Per group id, how many times it was committed here. Members create, commit and delete
    /// a group id in the same order, so the n-th commit is the same on all of them, and a
    /// peer's registration from an earlier life of the id is told apart from the current one.
    pub commits: Mutex<Vec<u16>>,
}

impl GroupTable {
    pub fn new(max: u32) -> Self {
        GroupTable {
            groups: Mutex::new((0..max).map(|_| None).collect()),
            commits: Mutex::new(vec![0; max as usize]),
        }
    }
}

/// The tag a group's internal segment is registered with: the commit count in the top 16
/// bits, a digest of the member list below.
pub(super) fn commit_tag(members: &[Rank], commit: u16) -> u64 {
    let digest = members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, r| {
        (h ^ u64::from(r.0) ^ 0x5bd1).wrapping_mul(0x100_0000_01b3)
    });
    (u64::from(commit) << 48) | (digest & TAG_DIGEST)
}

const TAG_DIGEST: u64 = (1 << 48) - 1;

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
