//! `group_commit`: how the members of a group agree on it.
//!
//! Each member announces the group's internal segment to every other member, tagged with the
//! generation of the commit for that pair of ranks and a digest of its member list (see
//! [`commit_tag`]), and waits for the same from each. Two ranks whose histories of the group
//! id differ (a commit one of them gave up after a timeout, or one they listed each other in
//! with different members) hold different generations for their pair: the one behind takes
//! the other's, so the next commit both make with the same members succeeds. A peer's
//! registration may be left over from a commit it abandoned (its deletion is still on the
//! way), so a pair is done only once each side has seen the other's registration of this
//! generation: a rank re-announces its segment marked [`TAG_SEEN`] when it has seen its
//! peer's, and waits until the peer's is marked too.

use std::sync::Arc;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{Deadline, Group, Rank, SegKey};

use super::collectives::NOTIF_SLOTS;
use super::doubling::MAX_STEPS;
use super::state::{
    ahead, commit_tag, generation, same_members, with_generation, Committed, Pending, TAG_SEEN,
};

/// Where this rank stands with one peer in a commit.
struct Pair {
    rank: Rank,
    /// The tag this rank announced to the peer (generation and member digest).
    tag: u64,
    /// This rank has seen the peer's registration of `tag` and announced so.
    seen: bool,
    /// The peer has seen this rank's registration of `tag` (its own carries [`TAG_SEEN`]).
    confirmed: bool,
}

impl Context {
    pub(super) fn commit(&self, group: Group, deadline: Deadline) -> Result<()> {
        let members = self.group_members(group)?;
        let me = members
            .iter()
            .position(|r| *r == self.sh.rank)
            .ok_or(Self::invalid_group(group, "this rank is not a member"))?;
        let key = Self::group_key(group);
        let Some(tags) = self.begin_commit(group, &members)? else {
            return Ok(());
        };
        let buf = self.sh.config.allreduce_round_bytes();
        let seg = match self.sh.segments.local(key) {
            Some(s) => s,
            None => {
                let mem = self.sh.new_memory(key, 4 * MAX_STEPS * buf, NOTIF_SLOTS)?;
                self.sh.insert_local(key, mem)?
            }
        };
        for (&r, &tag) in members.iter().zip(&tags) {
            self.register_key(key, r, tag, deadline)?;
        }
        let mut pairs: Vec<Pair> = members
            .iter()
            .zip(&tags)
            .filter(|(r, _)| **r != self.sh.rank)
            .map(|(&rank, &tag)| Pair {
                rank,
                tag,
                seen: false,
                confirmed: false,
            })
            .collect();
        // First every peer's registration (this rank says it saw each at once), then every
        // peer's word that it saw ours: so our word to one peer never waits for another
        // peer's word, and no two ranks can wait for each other's word in a cycle.
        for p in &mut pairs {
            self.match_peer(group, key, p, false, deadline)?;
        }
        for p in &mut pairs {
            self.match_peer(group, key, p, true, deadline)?;
        }
        let mut g = self.groups.groups.lock();
        if let Some(Some(st)) = g.get_mut(usize::from(group.0)) {
            st.committed = Some(Arc::new(Committed {
                key,
                seg,
                members,
                me,
                buf,
            }));
            st.pending = None;
        }
        Ok(())
    }

    /// Waits until this rank has seen `p`'s registration of the pair's generation with the
    /// same members (and announced so), and with `confirm` until `p` has seen ours too. A
    /// peer ahead in generation (it began commits of this id with us that we did not) is
    /// caught up with: its generation becomes ours, announced again.
    fn match_peer(
        &self,
        group: Group,
        key: SegKey,
        p: &mut Pair,
        confirm: bool,
        deadline: Deadline,
    ) -> Result<()> {
        while !(p.seen && (p.confirmed || !confirm)) {
            let (ours, seen) = (p.tag, p.seen);
            // A registration behind ours is left from an earlier commit (or the peer has not
            // caught up yet); one of ours with other members may still be replaced by the
            // peer: neither ends the wait. Once seen, only the peer's word that it saw ours.
            let res = self.sh.wait_remote(p.rank, key, deadline, |s| {
                let d = ahead(s.tag, ours);
                d > 0 || (d == 0 && same_members(s.tag, ours) && (!seen || s.tag & TAG_SEEN != 0))
            });
            let theirs = match res {
                Ok(s) => s.tag,
                Err(Error::Timeout) => return Err(self.commit_timed_out(group, key, p)),
                Err(e) => return Err(e),
            };
            if ahead(theirs, ours) > 0 {
                p.tag = with_generation(ours, generation(theirs));
                (p.seen, p.confirmed) = (false, false);
                self.catch_up(group, p.rank, p.tag);
                self.register_key(key, p.rank, p.tag, deadline)?;
                continue;
            }
            if !p.seen {
                self.register_key(key, p.rank, p.tag | TAG_SEEN, deadline)?;
                p.seen = true;
            }
            p.confirmed = theirs & TAG_SEEN != 0;
        }
        Ok(())
    }

    /// What a commit that ran out of time reports: that the members differ, when `p`'s
    /// registration of the pair's generation lists other members than ours (GPI-2 waits for
    /// the lists to agree until the timeout too, then reports only the timeout); else
    /// [`Error::Timeout`], and calling commit again with the same members resumes.
    fn commit_timed_out(&self, group: Group, key: SegKey, p: &Pair) -> Error {
        match self.sh.segments.remote(p.rank, key) {
            Some(s) if ahead(s.tag, p.tag) == 0 && !same_members(s.tag, p.tag) => {
                Self::invalid_group(group, "members differ between ranks")
            }
            _ => Error::Timeout,
        }
    }

    /// Makes `tag` (a later generation, taken from `rank`) this rank's for the pair with
    /// `rank`: the next commit of the group counts on from it, and a resumed one uses it.
    fn catch_up(&self, group: Group, rank: Rank, tag: u64) {
        self.groups
            .commits
            .lock()
            .insert((group.0, rank), generation(tag));
        let mut g = self.groups.groups.lock();
        let pending = g
            .get_mut(usize::from(group.0))
            .and_then(|s| s.as_mut())
            .and_then(|st| st.pending.as_mut());
        if let Some(pending) = pending {
            if let Some(i) = pending.members.iter().position(|r| *r == rank) {
                pending.tags[i] = tag;
            }
        }
    }

    /// The tag to announce the group's segment with to each of `members` (in their order):
    /// those of the commit under way when this call resumes it (same members, after a
    /// timeout), else those of a new commit, after the segment of the previous one (committed
    /// with other members, or never finished) is gone. `None`: committed with these members
    /// already, nothing to do.
    fn begin_commit(&self, group: Group, members: &[Rank]) -> Result<Option<Vec<u64>>> {
        let key = Self::group_key(group);
        let have_segment = self.sh.segments.local(key).is_some();
        let resume = {
            let g = self.groups.groups.lock();
            let st = g
                .get(usize::from(group.0))
                .and_then(|s| s.as_ref())
                .ok_or(Self::invalid_group(group, "no such group"))?;
            if st.committed.as_ref().is_some_and(|c| c.members == members) {
                return Ok(None);
            }
            st.pending
                .as_ref()
                .filter(|p| p.members == members && have_segment)
                .map(|p| p.tags.clone())
        };
        if let Some(tags) = resume {
            return Ok(Some(tags));
        }
        // Peers learn of the old segment's end before the new one's registration (same
        // ordered channel), so none takes the old one for the new.
        self.delete_key(key);
        let tags: Vec<u64> = {
            let mut commits = self.groups.commits.lock();
            members
                .iter()
                .map(|&r| {
                    let c = commits.entry((group.0, r)).or_default();
                    *c = c.wrapping_add(1);
                    commit_tag(members, *c)
                })
                .collect()
        };
        let mut g = self.groups.groups.lock();
        let st = g
            .get_mut(usize::from(group.0))
            .and_then(|s| s.as_mut())
            .ok_or(Self::invalid_group(group, "no such group"))?;
        st.committed = None;
        st.coll = Arc::default();
        st.pending = Some(Pending {
            members: members.to_vec(),
            tags: tags.clone(),
        });
        Ok(Some(tags))
    }
}
