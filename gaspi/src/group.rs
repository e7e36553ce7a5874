//! Groups and their collectives: `barrier` (dissemination) and the small `allreduce`
//! (recursive doubling, with folding for non-power-of-two sizes).
//!
//! Each committed group owns an internal segment, registered with every member, holding
//! double-buffered (by epoch parity) notification slots and round buffers. Notification
//! values are epoch numbers, so no reset is needed and a peer that is already one collective
//! ahead cannot be confused with the current one. A call that times out keeps its progress;
//! calling it again resumes where it stopped.
//!
//! Groups must be created, filled and committed in the same order on all members (their ids
//! must agree); commit checks that all members list the same ranks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::notify::Watch;
use crate::reduce::UserReduce;
use crate::segment::{LocalSegment, SegKey, INTERNAL_BASE};
use crate::transport::Xfer;
use crate::types::{Deadline, Group, Rank, Timeout};

/// Rounds a collective may need: fold + log2(65536) exchanges + unfold.
const MAX_STEPS: usize = 18;
const NOTIF_SLOTS: u32 = 4 * MAX_STEPS as u32;
const EPOCH_CYCLE: u32 = 1 << 31;

fn next_epoch(e: u32) -> u32 {
    e % EPOCH_CYCLE + 1
}

fn barrier_slot(epoch: u32, round: usize) -> u32 {
    (epoch & 1) * MAX_STEPS as u32 + round as u32
}

fn reduce_slot(epoch: u32, step: usize) -> u32 {
    2 * MAX_STEPS as u32 + (epoch & 1) * MAX_STEPS as u32 + step as u32
}

#[derive(Default)]
struct Progress {
    epoch: u32,
    step: usize,
    sent: bool,
    acc: Vec<u8>,
}

#[derive(Default)]
struct Coll {
    barrier_done: u32,
    barrier: Option<Progress>,
    reduce_done: u32,
    reduce: Option<Progress>,
    /// Rounds of the allreduce in progress already complete (a reduction larger than one
    /// round buffer runs in several; a call resumed after a timeout skips these).
    reduce_rounds_done: usize,
}

struct Committed {
    key: SegKey,
    seg: Arc<LocalSegment>,
    me: usize,
    buf: usize,
}

pub(crate) struct GroupState {
    members: Vec<Rank>,
    committed: Option<Arc<Committed>>,
    coll: Arc<Mutex<Coll>>,
}

pub(crate) struct GroupTable {
    groups: Mutex<Vec<Option<GroupState>>>,
    /// Per group id, how many times it was committed here. Members create, commit and delete
    /// a group id in the same order, so the n-th commit is the same on all of them, and a
    /// peer's registration from an earlier life of the id is told apart from the current one.
    commits: Mutex<Vec<u16>>,
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
fn commit_tag(members: &[Rank], commit: u16) -> u64 {
    let digest = members.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, r| {
        (h ^ u64::from(r.0) ^ 0x5bd1).wrapping_mul(0x100_0000_01b3)
    });
    (u64::from(commit) << 48) | (digest & TAG_DIGEST)
}

const TAG_DIGEST: u64 = (1 << 48) - 1;

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

    /// Creates an empty group (`gaspi_group_create`).
    pub fn group_create(&self) -> Result<Group> {
        let mut g = self.groups.groups.lock();
        let free = g.iter().skip(1).position(|s| s.is_none()).map(|i| i + 1);
        let i = free.ok_or(Error::TooManyGroups {
            max: g.len() as u32,
        })?;
        g[i] = Some(GroupState {
            members: Vec::new(),
            committed: None,
            coll: Arc::default(),
        });
        Ok(Group(i as u8))
    }

    /// Adds `rank` to an uncommitted group (`gaspi_group_add`).
    pub fn group_add(&self, group: Group, rank: Rank) -> Result<()> {
        self.check_rank(rank)?;
        let mut g = self.groups.groups.lock();
        let st = g
            .get_mut(usize::from(group.0))
            .and_then(|s| s.as_mut())
            .ok_or(Self::invalid_group(group, "no such group"))?;
        if st.committed.is_some() {
            return Err(Self::invalid_group(group, "already committed"));
        }
        if st.members.contains(&rank) {
            return Err(Self::invalid_group(group, "rank is already a member"));
        }
        st.members.push(rank);
        st.members.sort();
        Ok(())
    }

    /// Deletes a group (`gaspi_group_delete`); [`Group::ALL`] cannot be deleted.
    pub fn group_delete(&self, group: Group) -> Result<()> {
        if group == Group::ALL {
            return Err(Self::invalid_group(group, "GROUP_ALL cannot be deleted"));
        }
        let st = {
            let mut g = self.groups.groups.lock();
            g.get_mut(usize::from(group.0))
                .and_then(|s| s.take())
                .ok_or(Self::invalid_group(group, "no such group"))?
        };
        if let Some(c) = st.committed {
            self.delete_key(c.key);
        }
        Ok(())
    }

    /// Establishes the group with all members (`gaspi_group_commit`); this rank must be a
    /// member. Returns when every member has committed the same group.
    pub fn group_commit(&self, group: Group, timeout: Timeout) -> Result<()> {
        self.commit(group, timeout.deadline())
    }

    pub(crate) fn commit_group_all(&self, deadline: Deadline) -> Result<()> {
        {
            let mut g = self.groups.groups.lock();
            g[0] = Some(GroupState {
                members: (0..self.sh.nranks).map(Rank).collect(),
                committed: None,
                coll: Arc::default(),
            });
        }
        self.commit(Group::ALL, deadline)
    }

    fn commit(&self, group: Group, deadline: Deadline) -> Result<()> {
        let members = self.group_members(group)?;
        let me = members
            .iter()
            .position(|r| *r == self.sh.rank)
            .ok_or(Self::invalid_group(group, "this rank is not a member"))?;
        let key = INTERNAL_BASE + SegKey::from(group.0);
        let commit = {
            let mut commits = self.groups.commits.lock();
            let c = &mut commits[usize::from(group.0)];
            // A commit resumed after a timeout keeps the count of its first call.
            if self.sh.segments.local(key).is_none() {
                *c = c.wrapping_add(1);
            }
            *c
        };
        let tag = commit_tag(&members, commit);
        let buf = self.sh.config.allreduce_round_bytes();
        let seg = match self.sh.segments.local(key) {
            Some(s) => s,
            None => {
                let mem = self.sh.new_memory(key, 4 * MAX_STEPS * buf, NOTIF_SLOTS)?;
                self.sh.insert_local_tagged(key, mem, tag)?
            }
        };
        for &r in &members {
            self.register_key(key, r, deadline)?;
        }
        for &r in members.iter().filter(|r| **r != self.sh.rank) {
            let theirs = self
                .sh
                .wait_remote(r, key, deadline, |s| s.tag >> 48 == tag >> 48)?;
            if theirs.tag != tag {
                return Err(Self::invalid_group(group, "members differ between ranks"));
            }
        }
        let mut g = self.groups.groups.lock();
        if let Some(Some(st)) = g.get_mut(usize::from(group.0)) {
            st.committed = Some(Arc::new(Committed { key, seg, me, buf }));
        }
        Ok(())
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
        Ok((st.members.clone(), c, st.coll.clone()))
    }

    /// A collective that starts while a member has failed or left can never complete: it
    /// fails at once, naming that member. (Once started, see [`Watch::Collective`].)
    fn check_members(&self, members: &[Rank]) -> Result<()> {
        match self.sh.state.first_unreachable(members.iter().copied()) {
            Some(rank) => Err(Error::PeerFailed { rank }),
            None => Ok(()),
        }
    }

    /// Waits until every member of `group` has entered the barrier (`gaspi_barrier`).
    pub fn barrier(&self, group: Group, timeout: Timeout) -> Result<()> {
        self.barrier_deadline(group, timeout.deadline())
    }

    pub(crate) fn barrier_deadline(&self, group: Group, deadline: Deadline) -> Result<()> {
        let (members, c, coll) = self.committed(group)?;
        let mut coll = coll.try_lock().ok_or(Error::ActiveCollective)?;
        if coll.barrier.is_none() {
            self.check_members(&members)?;
        }
        let n = members.len();
        let done = coll.barrier_done;
        let p = coll.barrier.get_or_insert_with(|| Progress {
            epoch: next_epoch(done),
            ..Default::default()
        });
        let epoch = p.epoch;
        while (1usize << p.step) < n {
            let dist = 1usize << p.step;
            let slot = barrier_slot(epoch, p.step);
            if !p.sent {
                let to = members[(c.me + dist) % n];
                self.internal_notify(to, c.key, slot, epoch)?;
                p.sent = true;
            }
            let mem = &c.seg.mem;
            let from = members[(c.me + n - dist) % n];
            let watch = Watch::Collective { from };
            self.wait_on(mem, deadline, watch, || {
                (mem.slot(slot).load(Ordering::Acquire) == epoch).then_some(())
            })?;
            p.step += 1;
            p.sent = false;
        }
        coll.barrier = None;
        coll.barrier_done = epoch;
        self.sh.stats.add(crate::stats::Counter::Barriers, 1);
        Ok(())
    }

    fn internal_notify(&self, to: Rank, key: SegKey, slot: u32, value: u32) -> Result<()> {
        let dest = self.dest(to, key, 0, 0)?;
        self.transport_for(&dest)?.notify(&dest, slot, value, None)
    }

    /// The engine of every small allreduce: `combine(lower, higher, out)` merges the values
    /// of two members, the lower group index first, so that every member computes the same
    /// bits. The reduction runs in rounds of at most one round buffer (whole `elem_size`
    /// elements each). A call resumed after a timeout continues with the state it left, so it
    /// must be given the same buffers.
    pub(crate) fn allreduce_bytes(
        &self,
        group: Group,
        input: &[u8],
        output: &mut [u8],
        elem_size: usize,
        combine: &mut UserReduce<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let (members, c, coll) = self.committed(group)?;
        let mut coll = coll.try_lock().ok_or(Error::ActiveCollective)?;
        if output.len() != input.len() {
            return Err(Error::InvalidSize(format!(
                "output of {} bytes for {} input bytes",
                output.len(),
                input.len()
            )));
        }
        if coll.reduce.is_none() && coll.reduce_rounds_done == 0 {
            self.check_members(&members)?;
        }
        let per_round = c.buf / elem_size.max(1) * elem_size;
        if per_round == 0 {
            return Err(Error::InvalidSize(format!(
                "an element of {elem_size} bytes exceeds the allreduce round buffer of {} bytes (allreduce_buf_size)",
                c.buf
            )));
        }
        let rounds = input.len().div_ceil(per_round).max(1);
        while coll.reduce_rounds_done < rounds {
            let start = coll.reduce_rounds_done * per_round;
            let end = (start + per_round).min(input.len());
            self.allreduce_round(
                &members,
                &c,
                &mut coll,
                &input[start..end],
                &mut output[start..end],
                combine,
                deadline,
            )?;
            coll.reduce_rounds_done += 1;
        }
        coll.reduce_rounds_done = 0;
        Ok(())
    }

    /// One round of recursive doubling over at most one round buffer.
    #[allow(clippy::too_many_arguments)]
    fn allreduce_round(
        &self,
        members: &[Rank],
        c: &Committed,
        coll: &mut Coll,
        input: &[u8],
        output: &mut [u8],
        combine: &mut UserReduce<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let n = members.len();
        let me = c.me;
        let p2 = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        let rem = n - p2;
        let done = coll.reduce_done;
        let p = coll.reduce.get_or_insert_with(|| Progress {
            epoch: next_epoch(done),
            step: 0,
            sent: false,
            acc: input.to_vec(),
        });
        if p.acc.len() != input.len() {
            return Err(Error::InvalidSize(
                "a resumed allreduce must be called with the same size".into(),
            ));
        }
        let len = input.len();
        let unfold_step = MAX_STEPS - 1;
        let folded_out = me < 2 * rem && me.is_multiple_of(2);
        let vindex = if me < 2 * rem { me / 2 } else { me - rem };
        let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
        let exchanges = p2.trailing_zeros() as usize;
        let mut tmp = vec![0u8; len];

        // Step 0: fold the extra members into their odd neighbours.
        if p.step == 0 {
            if me < 2 * rem {
                if folded_out {
                    self.exchange_send(c, members[me + 1], p, 0)?;
                } else {
                    let other = self.exchange_recv(
                        c,
                        Watch::Collective {
                            from: members[me - 1],
                        },
                        p.epoch,
                        0,
                        len,
                        deadline,
                    )?;
                    combine(&other, &p.acc, &mut tmp)?;
                    p.acc.copy_from_slice(&tmp);
                }
            }
            p.step = 1;
            p.sent = false;
        }
        if !folded_out {
            while p.step <= exchanges {
                let partner_v = vindex ^ (1 << (p.step - 1));
                let partner = real(partner_v);
                self.exchange_send(c, members[partner], p, p.step)?;
                let other = self.exchange_recv(
                    c,
                    Watch::Collective {
                        from: members[partner],
                    },
                    p.epoch,
                    p.step,
                    len,
                    deadline,
                )?;
                if partner_v < vindex {
                    combine(&other, &p.acc, &mut tmp)?;
                } else {
                    combine(&p.acc, &other, &mut tmp)?;
                }
                p.acc.copy_from_slice(&tmp);
                p.step += 1;
                p.sent = false;
            }
            if me < 2 * rem {
                self.exchange_send(c, members[me - 1], p, unfold_step)?;
            }
        } else {
            let result = self.exchange_recv(
                c,
                Watch::Collective {
                    from: members[me + 1],
                },
                p.epoch,
                unfold_step,
                len,
                deadline,
            )?;
            p.acc.copy_from_slice(&result);
        }
        output.copy_from_slice(&p.acc);
        let epoch = p.epoch;
        coll.reduce = None;
        coll.reduce_done = epoch;
        Ok(())
    }

    /// Sends the running value to `to`'s receive buffer of `step` (once per step).
    fn exchange_send(&self, c: &Committed, to: Rank, p: &mut Progress, step: usize) -> Result<()> {
        if p.sent {
            return Ok(());
        }
        let parity = (p.epoch & 1) as usize;
        let send_off = (parity * MAX_STEPS + step) * c.buf;
        let recv_off = (2 * MAX_STEPS + parity * MAX_STEPS + step) * c.buf;
        c.seg.mem.copy_in(send_off, &p.acc);
        let dest = self.dest(to, c.key, recv_off as u64, p.acc.len() as u64)?;
        let x = Xfer {
            local: &c.seg.mem,
            local_off: send_off,
            remote: &dest,
            remote_off: recv_off,
            len: p.acc.len(),
        };
        self.transport_for(&dest)?
            .write(&x, Some((reduce_slot(p.epoch, step), p.epoch)), None)?;
        p.sent = true;
        Ok(())
    }

    /// Waits (watching as `watch` says) for the partner's value of `step` and returns a
    /// copy.
    fn exchange_recv(
        &self,
        c: &Committed,
        watch: Watch<'_>,
        epoch: u32,
        step: usize,
        len: usize,
        deadline: Deadline,
    ) -> Result<Vec<u8>> {
        let slot = reduce_slot(epoch, step);
        let mem = &c.seg.mem;
        self.wait_on(mem, deadline, watch, || {
            (mem.slot(slot).load(Ordering::Acquire) == epoch).then_some(())
        })?;
        let parity = (epoch & 1) as usize;
        let recv_off = (2 * MAX_STEPS + parity * MAX_STEPS + step) * c.buf;
        let mut v = vec![0u8; len];
        mem.copy_out(recv_off, &mut v);
        Ok(v)
    }
}
