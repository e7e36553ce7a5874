//! Groups: create, add, commit (every member lists the same ranks), delete, and the state
//! their collectives run on (see [`collectives`]).
//!
//! Groups must be created, filled and committed in the same order on all members (their ids
//! must agree); commit checks that all members list the same ranks. Each committed group owns
//! an internal segment, registered with every member, for its collectives. As in GPI-2, ranks
//! may be added to a committed group; it is then used again once every member, the added
//! ones included, has committed it again.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{Deadline, Group, Rank, SegKey, Timeout, INTERNAL_BASE};

mod collectives;
mod commit;
mod doubling;
pub(crate) mod state;

use state::{Coll, Committed, GroupState};

impl Context {
    fn invalid_group(group: Group, why: &'static str) -> Error {
        Error::InvalidGroup {
            group: group.0,
            why,
        }
    }

    /// Ranks of `group`, ascending.
    pub fn group_members(&self, group: Group) -> Result<Vec<Rank>> {
        let g = self.groups.groups.lock();
        match g.get(usize::from(group.0)) {
            Some(Some(st)) => Ok(st.members.clone()),
            _ => Err(Self::invalid_group(group, "no such group")),
        }
    }

    /// Members of `group` split by host (see [`crate::Topology`]): hosts in the order of
    /// their lowest member, ranks ascending within each. The same on every member; what
    /// hierarchical collectives are built on.
    pub fn group_hosts(&self, group: Group) -> Result<Vec<Vec<Rank>>> {
        Ok(self.topology().split_by_host(&self.group_members(group)?))
    }

    /// Creates an empty group (`gaspi_group_create`).
    pub fn group_create(&self) -> Result<Group> {
        let mut g = self.groups.groups.lock();
        let free = g.iter().skip(1).position(|s| s.is_none()).map(|i| i + 1);
        let i = free.ok_or(Error::TooManyGroups {
            max: g.len() as u32,
        })?;
        g[i] = Some(GroupState::new(Vec::new()));
        Ok(Group(i as u8))
    }

    /// Adds `rank` to a group (`gaspi_group_add`). The group may be committed already, as in
    /// GPI-2 (its GPI2_GRP.c adds to any existing group): the member list changes at once
    /// ([`group_size`](Self::group_size)), and the group's collectives fail with
    /// [`Error::GroupChanged`] until every member has committed it again.
    pub fn group_add(&self, group: Group, rank: Rank) -> Result<()> {
        self.check_rank(rank)?;
        let mut g = self.groups.groups.lock();
        let st = g
            .get_mut(usize::from(group.0))
            .and_then(|s| s.as_mut())
            .ok_or(Self::invalid_group(group, "no such group"))?;
        if st.members.contains(&rank) {
            return Err(Error::AlreadyMember {
                group: group.0,
                rank,
            });
        }
        st.members.push(rank);
        st.members.sort();
        Ok(())
    }

    /// Deletes a group (`gaspi_group_delete`); [`Group::ALL`] cannot be deleted. A commit
    /// of the group under way in another thread returns [`Error::InvalidGroup`] ("deleted
    /// while committing") at once, whatever its timeout.
    pub fn group_delete(&self, group: Group) -> Result<()> {
        if group == Group::ALL {
            return Err(Self::invalid_group(group, "GROUP_ALL cannot be deleted"));
        }
        let mut g = self.groups.groups.lock();
        let st = g
            .get_mut(usize::from(group.0))
            .and_then(|s| s.take())
            .ok_or(Self::invalid_group(group, "no such group"))?;
        // A commit of the group in another thread stops: it checks that its group is still
        // in the table under this lock before every announcement and after every wait, and
        // its waits (for the peers' registrations, for an acknowledgement) ask the mark.
        st.committing.deleted.store(true, Ordering::Release);
        if let Some(ack) = st.committing.waiting_for_ack.lock().as_ref() {
            ack.wake();
        }
        // Its internal segment, also one left by a commit that never completed. Under the
        // lock: no commit of this instance announces or re-creates it after, and a new
        // group of the id (made once the lock is free) does not lose its own to this.
        self.delete_key(Self::group_key(group));
        drop(g);
        self.sh.segments.wake_registered();
        Ok(())
    }

    /// Establishes the group with all members (`gaspi_group_commit`); this rank must be a
    /// member. Returns when every member has committed the same group. Committing a group
    /// again after ranks were added to it ([`group_add`](Self::group_add)) starts afresh with
    /// the new members (every member must commit); committing it again unchanged does
    /// nothing.
    ///
    /// As in GPI-2, members that list different ranks wait for their lists to agree until
    /// the timeout; then this returns [`Error::InvalidGroup`] ("members differ") where a
    /// member's list was seen to differ, else [`Error::Timeout`]. Either way, calling commit
    /// again (with the same members: it resumes; or after `group_add`) can still succeed,
    /// whatever commits of the id failed or were abandoned on either side before.
    ///
    /// Every call makes progress, also with [`Timeout::TEST`]: what a call that times out
    /// has done is kept, and the next call with the same members goes on from there, so a
    /// loop that polls the commit with `Timeout::TEST` until it succeeds ends (see
    /// `group::commit`).
    pub fn group_commit(&self, group: Group, timeout: Timeout) -> Result<()> {
        self.commit(group, timeout.deadline())
    }

    pub(crate) fn commit_group_all(&self, deadline: Deadline) -> Result<()> {
        {
            let mut g = self.groups.groups.lock();
            g[0] = Some(GroupState::new((0..self.sh.nranks).map(Rank).collect()));
        }
        self.commit(Group::ALL, deadline)
    }

    fn group_key(group: Group) -> SegKey {
        INTERNAL_BASE + SegKey::from(group.0)
    }

    /// Number of groups (`gaspi_group_num`).
    pub fn group_num(&self) -> u32 {
        self.groups
            .groups
            .lock()
            .iter()
            .filter(|s| s.is_some())
            .count() as u32
    }

    /// Number of members (`gaspi_group_size`).
    pub fn group_size(&self, group: Group) -> Result<u32> {
        Ok(self.group_members(group)?.len() as u32)
    }

    /// `gaspi_group_max`.
    pub fn group_max(&self) -> u32 {
        self.sh.config.group_max
    }

    /// Members, the committed state and the collective state of `group`.
    #[allow(clippy::type_complexity)]
    fn committed(&self, group: Group) -> Result<(Vec<Rank>, Arc<Committed>, Arc<Mutex<Coll>>)> {
        // Every collective starts here: none starts after termination.
        self.sh.check_open()?;
        let g = self.groups.groups.lock();
        let st = g
            .get(usize::from(group.0))
            .and_then(|s| s.as_ref())
            .ok_or(Self::invalid_group(group, "no such group"))?;
        let c = st
            .committed
            .clone()
            .ok_or(Self::invalid_group(group, "not committed"))?;
        if c.members != st.members {
            return Err(Error::GroupChanged { group: group.0 });
        }
        Ok((c.members.clone(), c, st.coll.clone()))
    }

    /// The members of `group` when it is ready for collectives: committed, and unchanged
    /// since (what segment creation on a group needs).
    pub(crate) fn committed_members(&self, group: Group) -> Result<Vec<Rank>> {
        Ok(self.committed(group)?.0)
    }

    /// A collective that starts while a member has failed or left can never complete: it
    /// fails at once, naming that member. (Once started, see [`Watch::Collective`].)
    fn check_members(&self, members: &[Rank]) -> Result<()> {
        match self.sh.state.first_unreachable(members.iter().copied()) {
            Some(rank) => Err(Error::PeerFailed { rank }),
            None => Ok(()),
        }
    }
}
