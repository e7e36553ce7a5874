//! Where everything of a hierarchical allreduce lies: the units the vector is cut into, who
//! owns each on every host, and the segment offsets and notification ids of every phase,
//! computed from the group's layout alone so that every rank computes the same.

use super::action::{Action, Schedule};
use super::embed::Embedding;
use super::shape::{align, Shape};

/// The layout of one hierarchical allreduce (see `hierarchical.rs` for the algorithm).
///
/// **Units.** The vector is split into `shards` balanced shards (the most ranks on one
/// host), and each shard into `pieces` balanced pieces; a unit is one piece of one shard,
/// numbered piece-major (`u = piece * shards + shard`), which is the order every rank takes
/// its units in. On a host of `k` ranks, shard `s` and all its pieces are owned by the rank
/// of local index `s mod k`.
///
/// **Notification ids**: the intra-host phases take ids `0..intra_ids`, enough for either
/// way of running them (staged or shared, see [`HostMemory`](super::HostMemory)), so that
/// hosts running them differently still agree on the rest; each unit's allreduce between
/// hosts gets a range after that, and staging, shared with units no member of it runs.
pub(super) struct Layout<'a> {
    pub sh: &'a Shape,
    pub hosts: &'a [Vec<usize>],
    /// Shards: the most ranks on one host.
    pub shards: usize,
    /// Pieces per shard.
    pub pieces: usize,
    /// Chunk of the staged intra-host phases.
    chunk: usize,
    /// Chunks of the largest unit.
    per_unit: usize,
    /// The most ranks on one host.
    host_max: usize,
    /// Reduce-scatter slots of the host that needs the most (see [`Layout::rs_slot`]).
    rs_slots: usize,
    /// Segment offset of the first reduce-scatter slot (the end of the inter-host staging).
    pub rs_base: usize,
    /// Bytes per reduce-scatter slot.
    rs_bytes: usize,
    /// The fewest ranks on one host.
    k_min: usize,
    /// The shape of the units' allreduces between hosts, but for `me` and `count`.
    sub: Shape,
    /// Per region (see [`Layout::region`]): staging offset and first id.
    regions: Vec<(usize, u32)>,
    pub notifications: u32,
}

impl<'a> Layout<'a> {
    /// The layout with at most `pieces` pieces per shard: fewer where the notification ids
    /// would not fit the segment's (one piece always fits as well as it can).
    pub fn new(
        sh: &'a Shape,
        hosts: &'a [Vec<usize>],
        pieces: usize,
        inter: &dyn Fn(&Shape, bool) -> Schedule,
        avg: bool,
    ) -> Self {
        let pieces = pieces.max(1);
        let host_max = hosts.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let shards = host_max;
        let units = shards * pieces;
        let max_unit = sh.count.div_ceil(shards).div_ceil(pieces) * sh.elem;
        // A rank of a host of `k` owns up to ceil(S/k) shards, each of `pieces` units with
        // k-1 senders.
        let rs_slots = hosts
            .iter()
            .map(|m| shards.div_ceil(m.len().max(1)) * pieces * m.len().saturating_sub(1))
            .max()
            .unwrap_or(0);
        // Half of the ids for the intra-host phases, as few chunks as that takes.
        let ids_per_chunk = rs_slots + units;
        let budget = (sh.notif_limit / 2) as usize;
        let min_chunk = max_unit.div_ceil((budget / ids_per_chunk).max(1));
        let chunk = sh
            .chunk_bytes
            .max(min_chunk)
            .max(sh.elem)
            .next_multiple_of(sh.elem);
        let per_unit = max_unit.div_ceil(chunk).max(1);
        let staged_ids = ids_per_chunk * per_unit;
        let shared_ids = 2 * host_max + units;
        let intra_ids = staged_ids.max(shared_ids) as u32;
        // Regions (staging and ids) of the units' allreduces between hosts, see
        // `Layout::region`; the rest of the ids shared among them.
        let k_min = hosts.iter().map(Vec::len).min().unwrap_or(1).max(1);
        let regions = pieces * shards.div_ceil(k_min);
        let share = sh.notif_limit.saturating_sub(intra_ids) / regions as u32;
        let mut lay = Layout {
            sh,
            hosts,
            shards,
            pieces,
            k_min,
            chunk,
            per_unit,
            host_max,
            rs_slots,
            rs_base: 0,
            rs_bytes: align(max_unit),
            sub: Shape {
                me: 0,
                ranks: hosts.len(),
                count: 0,
                notif_limit: share,
                // The units' rings between hosts all have their slots at once.
                ring_staging_bytes: sh.ring_staging_bytes / pieces,
                ..*sh
            },
            regions: Vec::new(),
            notifications: 0,
        };
        // Each region as large as the largest of its units needs, sized by member 0's
        // schedule: the builders' staging and ids do not depend on the member (checked when
        // a member builds its own).
        let mut need = vec![(0, 0); regions];
        if hosts.len() > 1 {
            for u in 0..units {
                let (_, len) = lay.unit(u);
                if len > 0 {
                    let sized = inter(&lay.sub_shape(0, len), avg);
                    let r = &mut need[lay.region(u)];
                    r.0 = r.0.max(align(Embedding::staging_bytes(&sized, len)));
                    r.1 = r.1.max(sized.notifications);
                }
            }
        }
        let (mut next_byte, mut next_id) = (align(sh.data_bytes()), intra_ids);
        for (bytes, ids) in need {
            lay.regions.push((next_byte, next_id));
            next_byte += bytes;
            next_id += ids;
        }
        lay.rs_base = next_byte;
        lay.notifications = next_id;
        if pieces > 1 && lay.notifications > sh.notif_limit {
            return Self::new(sh, hosts, pieces - 1, inter, avg);
        }
        lay
    }

    /// The shape of member `h`'s part in the allreduce between hosts of a unit of `len`
    /// bytes.
    fn sub_shape(&self, h: usize, len: usize) -> Shape {
        Shape {
            me: h,
            count: len / self.sh.elem,
            ..self.sub
        }
    }

    /// The region (staging and ids) of unit `u`'s allreduce between hosts. Units whose
    /// allreduces share a member need different regions; others may share one, which
    /// keeps the staging a few pieces' worth rather than one per unit. A rank owns the
    /// shards of one residue modulo its host's `k`, any two of them at least `k >= k_min`
    /// apart, so `shard / k_min` differs between them: with the piece, that numbers the
    /// regions of every rank's units apart on every host.
    fn region(&self, u: usize) -> usize {
        let (s, q) = (u % self.shards, u / self.shards);
        q * self.shards.div_ceil(self.k_min) + s / self.k_min
    }

    /// Units in all.
    pub fn units(&self) -> usize {
        self.shards * self.pieces
    }

    /// The piece of its shard unit `u` is.
    pub fn piece(&self, u: usize) -> usize {
        u / self.shards
    }

    /// Byte range of unit `u`.
    pub fn unit(&self, u: usize) -> (usize, usize) {
        let (s, q) = (u % self.shards, u / self.shards);
        let (off, len) = self.sh.block(s, self.shards);
        let n = len / self.sh.elem;
        let (start, end) = (n * q / self.pieces, n * (q + 1) / self.pieces);
        (off + start * self.sh.elem, (end - start) * self.sh.elem)
    }

    /// Local index of unit `u`'s owner on a host of `k` ranks.
    pub fn owner(&self, u: usize, k: usize) -> usize {
        (u % self.shards) % k
    }

    /// Segment bytes with the staged reduce-scatter's slots, and without them.
    pub fn segment_bytes(&self, staged: bool) -> usize {
        if staged {
            self.rs_base + self.rs_slots * self.rs_bytes
        } else {
            self.rs_base
        }
    }

    /// Chunks of the staged intra-host phases over unit `u`'s range, as
    /// `(index, offset, len)`.
    pub fn chunks(&self, u: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let (off, len) = self.unit(u);
        super::shape::chunks(off, len, self.chunk)
    }

    /// The owner's staging slot for unit `u` from local rank `j` on a host of `k`: the
    /// owner (local `o`) numbers its units in the order it takes them and its senders
    /// skipping itself.
    pub fn rs_slot(&self, k: usize, u: usize, j: usize) -> usize {
        let (s, q) = (u % self.shards, u / self.shards);
        let owner = s % k;
        let owned = (self.shards - owner).div_ceil(k);
        let t = q * owned + s / k;
        t * (k - 1) + if j < owner { j } else { j - 1 }
    }

    /// Segment offset of chunk `c` of reduce-scatter slot `slot`.
    pub fn rs_at(&self, slot: usize, c: usize) -> usize {
        self.rs_base + slot * self.rs_bytes + c * self.chunk
    }

    pub fn rs_id(&self, slot: usize, c: usize) -> u32 {
        (slot * self.per_unit + c) as u32
    }

    pub fn ag_id(&self, u: usize, c: usize) -> u32 {
        ((self.rs_slots + u) * self.per_unit + c) as u32
    }

    /// Shared intra-host phases: local rank `j`'s input is in place.
    pub fn ready_id(&self, j: usize) -> u32 {
        j as u32
    }

    /// Shared intra-host phases: unit `u` is final on its owner.
    pub fn final_id(&self, u: usize) -> u32 {
        (self.host_max + u) as u32
    }

    /// Shared intra-host phases: local rank `j` has copied all it needed.
    pub fn done_id(&self, j: usize) -> u32 {
        (self.host_max + self.units() + j) as u32
    }

    /// Host `h`'s part of the allreduce of unit `u` between the hosts, relocated, without
    /// its trailing flush (the enclosing schedule's own final flush covers it).
    pub fn inter_host(
        &self,
        u: usize,
        h: usize,
        inter: &dyn Fn(&Shape, bool) -> Schedule,
        avg: bool,
    ) -> Vec<Action> {
        let (off, len) = self.unit(u);
        let r = self.region(u);
        let (staging, first_id) = self.regions[r];
        let sub = inter(&self.sub_shape(h, len), avg);
        let s = u % self.shards;
        let members: Vec<usize> = self.hosts.iter().map(|m| m[s % m.len()]).collect();
        debug_assert!(
            {
                let (end, last_id) = self
                    .regions
                    .get(r + 1)
                    .copied()
                    .unwrap_or((self.rs_base, self.notifications));
                sub.segment_bytes - align(len) <= end - staging
                    && first_id + sub.notifications <= last_id
            },
            "an inter-host schedule outgrew member 0's"
        );
        let body = match sub.actions.split_last() {
            Some((Action::Flush, rest)) => rest,
            _ => &sub.actions[..],
        };
        let mut out = Vec::with_capacity(body.len());
        Embedding {
            members: &members,
            data: off,
            data_bytes: len,
            staging,
            first_id,
        }
        .append(body, &mut out);
        out
    }
}
