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
//! peer's, and waits until the peer's is marked too. The segment table latches that mark
//! (see [`TAG_SEEN`]): a peer done with its commit may delete the group or begin the next
//! commit at once, and its deletion or next registration must not hide the mark from us.
//!
//! **Progress.** Every step with a peer happens once per generation and is recorded in the
//! commit's [`Pending`] state: the announcement sent, the peer's registration seen (and the
//! mark sent), the peer's mark seen, and the acknowledgements still due. A call does what it
//! can with every peer before it waits for anything, and a call that times out keeps all of
//! it; the next call with the same members goes on from there. So a commit polled with
//! `Timeout::TEST` (GPI-2 codes loop on `gaspi_group_commit(g, GASPI_TEST)`), or with any
//! timeout shorter than a round trip, completes after finitely many calls.
//!
//! **No deadlock.** What this rank sends a peer depends on nothing but what that peer sent
//! it: its announcement is sent when the commit begins, its mark as soon as the peer's
//! announcement is seen; neither waits for a third rank, nor for an acknowledgement. A call
//! waits only (a) for an acknowledgement, which the peer's progress thread sends whatever
//! the peer's own commit is doing (or the peer has failed, which ends the wait), and (b) for
//! any registration that lets some pair move on, after it has taken every step that was
//! possible. So no two ranks can wait for each other in a cycle: the guarantee that the two
//! phases (every peer's registration seen before any peer's mark awaited) gave when each
//! wait was for one peer at a time.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::memory::segment_table::LocalSegment;
use crate::transport::requests::Ack;
use crate::types::{Deadline, Group, Rank, SegKey};

use super::collectives::NOTIF_SLOTS;
use super::doubling::MAX_STEPS;
use super::state::{
    ahead, commit_tag, generation, same_members, with_generation, Committed, Committing,
    GroupState, PairProgress, Pending, TAG_SEEN,
};

/// The next step with a peer that its registrations allow.
enum Next {
    /// The peer is at a later generation: take it.
    CatchUp(u64),
    /// The peer's registration of this generation is here: say so.
    Seen,
    /// The peer's mark of this generation is here.
    Confirmed,
}

impl Context {
    pub(super) fn commit(&self, group: Group, deadline: Deadline) -> Result<()> {
        let members = self.group_members(group)?;
        let me = members
            .iter()
            .position(|r| *r == self.sh.rank)
            .ok_or(Self::invalid_group(group, "this rank is not a member"))?;
        let key = Self::group_key(group);
        let inst = self.commit_lock(group)?;
        let _held = match deadline.remaining() {
            None => inst.lock.lock(),
            Some(d) => inst.lock.try_lock_for(d).ok_or(Error::Timeout)?,
        };
        let Some(mut pending) = self.begin_commit(group, &inst, &members)? else {
            return Ok(());
        };
        let buf = self.sh.config.allreduce_round_bytes();
        let res = self
            .group_segment(group, &inst, 4 * MAX_STEPS * buf)
            .and_then(|seg| Ok((seg, self.advance(group, &inst, &mut pending, deadline)?)));
        let mut g = self.groups.groups.lock();
        // The group may have been deleted meanwhile (and its id taken again): whatever this
        // call did for it went with it (its segment too, see `group_delete`).
        let st = Self::current(&mut g, group, &inst)?;
        match res {
            Ok((seg, ())) => {
                st.committed = Some(Arc::new(Committed {
                    key,
                    seg,
                    members,
                    me,
                    buf,
                }));
                st.pending = None;
                Ok(())
            }
            Err(e) => {
                st.pending = Some(pending);
                Err(e)
            }
        }
    }

    fn commit_lock(&self, group: Group) -> Result<Arc<Committing>> {
        let g = self.groups.groups.lock();
        match g.get(usize::from(group.0)) {
            Some(Some(st)) => Ok(st.committing.clone()),
            _ => Err(Self::invalid_group(group, "no such group")),
        }
    }

    /// The state of `group` while it is still the instance `inst` (not deleted, nor deleted
    /// and made anew since); else the error a commit of `inst` returns.
    fn current<'a>(
        g: &'a mut [Option<GroupState>],
        group: Group,
        inst: &Arc<Committing>,
    ) -> Result<&'a mut GroupState> {
        match g.get_mut(usize::from(group.0)) {
            Some(Some(st)) if Arc::ptr_eq(&st.committing, inst) => Ok(st),
            _ => Err(Self::invalid_group(group, "deleted while committing")),
        }
    }

    /// Whether `group` is still the instance `inst`: checked after every wait of a commit.
    fn check_current(&self, group: Group, inst: &Arc<Committing>) -> Result<()> {
        Self::current(&mut self.groups.groups.lock(), group, inst).map(|_| ())
    }

    /// The group's internal segment: the one of the commit resumed, else a new one. Under
    /// the groups lock, as `group_delete` deletes it: none is made for a deleted group.
    fn group_segment(
        &self,
        group: Group,
        inst: &Arc<Committing>,
        size: usize,
    ) -> Result<Arc<LocalSegment>> {
        let key = Self::group_key(group);
        let mut g = self.groups.groups.lock();
        Self::current(&mut g, group, inst)?;
        match self.sh.segments.local(key) {
            Some(s) => Ok(s),
            None => {
                let mem = self.sh.new_memory(key, size, NOTIF_SLOTS)?;
                self.sh.insert_local(key, mem)
            }
        }
    }

    /// Takes every step the peers' registrations allow, then waits for what lets the next
    /// one happen, until every pair is done (see the module's notes on progress and
    /// deadlock). On `Timeout` (or another error) `p` holds how far the commit got. Stops
    /// when the group is deleted (see `group_delete`).
    fn advance(
        &self,
        group: Group,
        inst: &Arc<Committing>,
        p: &mut Pending,
        deadline: Deadline,
    ) -> Result<()> {
        let key = Self::group_key(group);
        let peers: Vec<Rank> = p.pairs.iter().map(|x| x.rank).collect();
        loop {
            for pair in &mut p.pairs {
                self.step(group, inst, pair)?;
            }
            // An acknowledgement comes from the peer's progress thread, whatever the peer's
            // commit does: waiting for it first cannot hold up a peer.
            if let Some(pair) = p.pairs.iter_mut().find(|x| !x.acks.is_empty()) {
                // A peer that is alive but does not answer (stopped, or hung) holds this
                // wait up to the deadline, unless the group is deleted meanwhile.
                let ack = &pair.acks[0].1;
                *inst.waiting_for_ack.lock() = Some(ack.slot.clone());
                let deleted = || inst.deleted.load(Ordering::Acquire);
                let res = ack.wait_until(&self.sh.rpc, deadline, deleted);
                *inst.waiting_for_ack.lock() = None;
                self.check_current(group, inst)?;
                match res {
                    // Only a deletion stops the wait, and the check above has seen it.
                    None => return Err(Self::invalid_group(group, "deleted while committing")),
                    Some(Err(Error::Timeout)) => return Err(self.commit_timed_out(group, key, p)),
                    Some(res) => Self::acknowledged(pair, 0, res)?,
                }
                continue;
            }
            if p.pairs.iter().all(PairProgress::done) {
                return Ok(());
            }
            let pairs = &p.pairs;
            let ready = || {
                inst.deleted.load(Ordering::Acquire)
                    || pairs.iter().any(|x| self.next(key, x).is_some())
            };
            let res = self.sh.wait_registered(&peers, deadline, ready);
            self.check_current(group, inst)?;
            match res {
                Err(Error::Timeout) => return Err(self.commit_timed_out(group, key, p)),
                res => res?,
            }
        }
    }

    /// Announces the group's segment to `rank` with `tag`. Under the groups lock, as
    /// `group_delete` marks the group deleted and deletes the segment (telling the peers):
    /// no announcement of a deleted group follows, to take the place of a later one.
    fn announce(
        &self,
        group: Group,
        inst: &Arc<Committing>,
        rank: Rank,
        tag: u64,
    ) -> Result<Option<Ack>> {
        let mut g = self.groups.groups.lock();
        Self::current(&mut g, group, inst)?;
        self.announce_key(Self::group_key(group), rank, tag)
    }

    /// Takes the acknowledgements that have come from `pair`'s peer, then every step with
    /// it that its registrations allow; never waits.
    fn step(&self, group: Group, inst: &Arc<Committing>, pair: &mut PairProgress) -> Result<()> {
        let key = Self::group_key(group);
        let mut i = 0;
        while i < pair.acks.len() {
            match pair.acks[i].1.wait_resumable(&self.sh.rpc, Deadline::NOW) {
                Err(Error::Timeout) => i += 1,
                res => Self::acknowledged(pair, i, res)?,
            }
        }
        loop {
            if !pair.announced {
                let ack = self.announce(group, inst, pair.rank, pair.tag)?;
                pair.acks.extend(ack.map(|a| (pair.tag, a)));
                pair.announced = true;
            }
            match self.next(key, pair) {
                None => return Ok(()),
                Some(Next::CatchUp(theirs)) => {
                    let tag = with_generation(pair.tag, generation(theirs));
                    self.catch_up(group, pair.rank, tag);
                    pair.restart(tag);
                }
                Some(Next::Seen) => {
                    let mark = pair.tag | TAG_SEEN;
                    let ack = self.announce(group, inst, pair.rank, mark)?;
                    pair.acks.extend(ack.map(|a| (mark, a)));
                    pair.seen = true;
                }
                Some(Next::Confirmed) => pair.confirmed = true,
            }
        }
    }

    /// `res` answered `pair.acks[i]`, which is done with. A registration of the current
    /// generation that the peer refused (say, it could not map our shared memory) is sent
    /// again by the next call: the plain one or the mark, whichever it was; what the peer
    /// confirmed stays confirmed. A refusal of an earlier generation's (carried over by a
    /// catch-up) concerns a commit that is over, and undoes nothing.
    fn acknowledged(pair: &mut PairProgress, i: usize, res: Result<()>) -> Result<()> {
        let (tag, _) = pair.acks.remove(i);
        match res {
            Err(_) if tag & !TAG_SEEN != pair.tag => Ok(()),
            Err(e) => {
                if tag & TAG_SEEN != 0 {
                    pair.seen = false;
                } else {
                    pair.announced = false;
                }
                Err(e)
            }
            ok => ok,
        }
    }

    /// The next step with `p`'s peer that its registrations with us allow, if any.
    fn next(&self, key: SegKey, p: &PairProgress) -> Option<Next> {
        // Done, unless our mark was refused after the peer's came (then it goes again): a
        // later generation of the peer is for its next commit.
        if p.confirmed {
            return (!p.seen).then_some(Next::Seen);
        }
        // The registration is read before the latch: the peer's mark is latched before any
        // registration it sends later is recorded, so a later one read here (the peer's next
        // commit) comes with the mark visible below. Read the other way round, the mark
        // and the next registration could both land between the two reads, and the peer's
        // next generation would be taken for an abandoned one.
        let theirs = self.sh.segments.remote(p.rank, key).map(|s| s.tag);
        // The peer's mark counts also when the peer has deleted the segment or registered
        // its next generation since (latched). One of another generation never matches.
        if p.seen && self.sh.segments.latched(p.rank, key) == Some(p.tag | TAG_SEEN) {
            return Some(Next::Confirmed);
        }
        // A registration behind ours is left from an earlier commit (or the peer has not
        // caught up yet); one of ours with other members may still be replaced by the peer:
        // neither is a step. One ahead of ours without the mark we wait for: the peer
        // abandoned this generation (its mark would have come before, in order).
        let theirs = theirs?;
        match ahead(theirs, p.tag) {
            d if d > 0 => Some(Next::CatchUp(theirs)),
            0 if !p.seen && same_members(theirs, p.tag) => Some(Next::Seen),
            _ => None,
        }
    }

    /// What a commit that ran out of time reports: that the members differ, when a peer's
    /// registration of its pair's generation lists other members than ours (GPI-2 waits for
    /// the lists to agree until the timeout too, then reports only the timeout); else
    /// [`Error::Timeout`], and calling commit again with the same members resumes.
    fn commit_timed_out(&self, group: Group, key: SegKey, p: &Pending) -> Error {
        let differ = p.pairs.iter().filter(|x| !x.done()).any(|x| {
            self.sh
                .segments
                .remote(x.rank, key)
                .is_some_and(|s| ahead(s.tag, x.tag) == 0 && !same_members(s.tag, x.tag))
        });
        if differ {
            Self::invalid_group(group, "members differ between ranks")
        } else {
            Error::Timeout
        }
    }

    /// Makes `tag` (a later generation, taken from `rank`) this rank's for the pair with
    /// `rank`: the next commit of the group counts on from it.
    fn catch_up(&self, group: Group, rank: Rank, tag: u64) {
        self.groups
            .commits
            .lock()
            .insert((group.0, rank), generation(tag));
    }

    /// The commit to work on, taken out of the group's state: the one under way when this
    /// call resumes it (same members, after a timeout), else a new one, after the segment of
    /// the previous one (committed with other members, or never finished) is gone. `None`:
    /// committed with these members already, nothing to do.
    fn begin_commit(
        &self,
        group: Group,
        inst: &Arc<Committing>,
        members: &[Rank],
    ) -> Result<Option<Pending>> {
        let key = Self::group_key(group);
        // All under the groups lock, as `group_delete` deletes the segment.
        let mut g = self.groups.groups.lock();
        let st = Self::current(&mut g, group, inst)?;
        if st.committed.as_ref().is_some_and(|c| c.members == members) {
            return Ok(None);
        }
        let have_segment = self.sh.segments.local(key).is_some();
        match st.pending.take() {
            Some(p) if p.members == members && have_segment => return Ok(Some(p)),
            _ => {}
        }
        st.committed = None;
        st.coll = Arc::default();
        // Peers learn of the old segment's end before the new one's registration (same
        // ordered channel), so none takes the old one for the new.
        self.delete_key(key);
        let pairs: Vec<PairProgress> = {
            let mut commits = self.groups.commits.lock();
            members
                .iter()
                .filter(|r| **r != self.sh.rank)
                .map(|&r| {
                    let c = commits.entry((group.0, r)).or_default();
                    *c = c.wrapping_add(1);
                    PairProgress::new(r, commit_tag(members, *c))
                })
                .collect()
        };
        Ok(Some(Pending {
            members: members.to_vec(),
            pairs,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack() -> Ack {
        Ack {
            req: 0,
            slot: Arc::default(),
        }
    }

    /// A refusal undoes only the step it answers, and only in the current generation.
    #[test]
    fn a_refused_registration_is_sent_again_and_nothing_else_is_undone() {
        let (old, now) = (
            commit_tag(&[Rank(0), Rank(1)], 1),
            commit_tag(&[Rank(0), Rank(1)], 2),
        );
        let mut pair = PairProgress::new(Rank(1), now);
        (pair.announced, pair.seen, pair.confirmed) = (true, true, true);
        pair.acks = vec![(old, ack()), (now | TAG_SEEN, ack()), (now, ack())];
        // An earlier generation's, carried over by a catch-up: that commit is over.
        assert!(Context::acknowledged(&mut pair, 0, Err(Error::Timeout)).is_ok());
        assert!(pair.announced && pair.seen && pair.confirmed);
        // Our mark: sent again, although the peer's came already.
        assert!(Context::acknowledged(&mut pair, 0, Err(Error::Timeout)).is_err());
        assert!(pair.announced && !pair.seen && pair.confirmed);
        // Our registration: sent again.
        assert!(Context::acknowledged(&mut pair, 0, Err(Error::Timeout)).is_err());
        assert!(!pair.announced && pair.acks.is_empty());
    }
}
