//! How recently each byte of every rank's segment was touched, as the number of distinct
//! bytes its host's ranks touched since (its reuse distance): a copy or a reduction finds
//! in the last-level cache what was touched within the cache's size, and takes the rest
//! from memory, as a least-recently-used cache would.
//!
//! Why per byte and not one share of the whole working set: the algorithms touch their
//! segments differently at the same size. The ring stages through a few chunk slots that
//! it reuses at once, while recursive doubling and Rabenseifner stage a whole half or the
//! whole vector; a peer's write into staging is reduced right after, and the vector is read
//! again only a run later. One share per working set charged them all alike, so at 64 MiB
//! on 2 ranks it predicted the ring 36–58% slow and Rabenseifner within 5%, where both move
//! the same bytes (docs/allreduce.md, "Simulator").
//!
//! Why distinct bytes: a vector touched three times in a run (sent, reduced into, sent
//! again) is still one vector in the cache. Every byte keeps the touch that last stamped
//! it, so the distinct bytes touched after a stamp are the bytes whose stamps are later; a
//! Fenwick tree over the touches counts them.
//!
//! Where the distance starts: the last-level cache counts it from the end of the touch
//! that stamped a byte, as fitted since session 26. A core's private cache
//! ([`Recency::counting_from_touch_start`], session 32) counts it from the touch's
//! beginning: every copy and reduction passes over its bytes in the same order each time,
//! so between two passes over a byte lie the rest of the first pass and the start of the
//! second, and a least-recently-used cache of 2 MiB keeps nothing of a 16 MiB copy for the
//! next pass. From the end, the whole copy stayed in it until the next touch.

use rangemap::RangeMap;

use super::program::Program;

/// When each byte was last touched, and how many distinct bytes were touched since.
pub(crate) struct Recency {
    /// Per segment owner, ranges and the touch that last stamped them: the pool (ranks
    /// sharing a last-level cache) that touched them, and the touch's index in that pool.
    /// Empty where nothing is tracked.
    segments: Vec<RangeMap<u64, (u32, u32)>>,
    /// Per pool, the bytes that each touch still stamps.
    live: Vec<Fenwick>,
    /// Distinct bytes a line may be away from its last touch and surely be in the cache.
    cache: u64,
    /// How fast the share the cache holds falls past its size (`held_share`).
    falloff: f64,
    /// A byte's distance counts the bytes of the touch that stamped it too.
    from_start: bool,
}

impl Recency {
    /// Tracks the segments of `ranks` ranks in `pools` caches of `cache` bytes each whose
    /// share held falls past their size with the power `falloff`, or none (`track` false).
    pub(crate) fn new(
        ranks: usize,
        pools: usize,
        cache: usize,
        falloff: f64,
        track: bool,
    ) -> Recency {
        let (ranks, pools) = if track { (ranks, pools) } else { (0, 0) };
        Recency {
            segments: (0..ranks).map(|_| RangeMap::new()).collect(),
            live: (0..pools).map(|_| Fenwick::default()).collect(),
            cache: cache as u64,
            falloff,
            from_start: false,
        }
    }

    /// The same, counting each byte's distance from the beginning of the touch that
    /// stamped it (the module's doc says why).
    pub(crate) fn counting_from_touch_start(self) -> Recency {
        Recency {
            from_start: true,
            ..self
        }
    }

    /// Whether anything is tracked.
    pub(crate) fn tracks(&self) -> bool {
        !self.segments.is_empty()
    }

    /// Stamps every byte `program`'s actions touch as touched before the replay begins, by
    /// its owner's pool (`pool_of`), in one touch. Why: the measured runs follow many
    /// others, so what fits the cache is in it; without this, ranges a schedule touches
    /// only every other run (recursive doubling's two sets of staging slots) would miss in
    /// the runs the prediction averages.
    pub(crate) fn warm(&mut self, program: &Program, pool_of: impl Fn(usize) -> usize) {
        if !self.tracks() {
            return;
        }
        for live in &mut self.live {
            live.push();
        }
        for (me, schedules) in program.ranks.iter().enumerate() {
            for op in schedules.iter().flatten() {
                let (ranges, len) = op.touches(me);
                for (owner, at) in ranges.into_iter().flatten() {
                    self.stamp(pool_of(owner), owner, at, len);
                }
            }
        }
    }

    /// The share of `owner`'s segment range `[at, at+len)` that pool `pool`'s cache does
    /// not hold: bytes never touched, touched from another pool, or touched before more
    /// distinct bytes than the cache holds. 0 where nothing is tracked.
    pub(crate) fn missed(&self, pool: usize, owner: usize, at: u64, len: u32) -> f64 {
        if !self.tracks() || len == 0 {
            return 0.0;
        }
        let range = at..at + u64::from(len);
        let live = &self.live[pool];
        let held: f64 = self.segments[owner]
            .overlapping(&range)
            .filter(|(_, &(p, _))| p as usize == pool)
            .map(|(r, &(_, touch))| {
                let bytes = r.end.min(range.end) - r.start.max(range.start);
                let own = if self.from_start { live.of(touch) } else { 0 };
                let distance = live.after(touch) + own;
                bytes as f64 * held_share(distance, self.cache, self.falloff)
            })
            .sum();
        1.0 - held / f64::from(len)
    }

    /// Pool `pool` touched `len` bytes at each of `ranges` (`(owner, offset)`): one touch,
    /// later than every other.
    pub(crate) fn touch(&mut self, pool: usize, ranges: &[(usize, u64)], len: u32) {
        if !self.tracks() || len == 0 {
            return;
        }
        self.live[pool].push();
        for &(owner, at) in ranges {
            self.stamp(pool, owner, at, len);
        }
    }

    /// Stamps `owner`'s `[at, at+len)` with pool `pool`'s latest touch.
    fn stamp(&mut self, pool: usize, owner: usize, at: u64, len: u32) {
        let range = at..at + u64::from(len);
        let segment = &mut self.segments[owner];
        for (r, &(p, touch)) in segment.overlapping(&range) {
            let bytes = r.end.min(range.end) - r.start.max(range.start);
            self.live[p as usize].add(touch, -(bytes as i64));
        }
        let live = &mut self.live[pool];
        let touch = live.last();
        live.add(touch, i64::from(len));
        let pool = u32::try_from(pool).expect("pools are hosts, fewer than 2^32");
        segment.insert(range, (pool, touch));
    }
}

/// The share of the lines last touched `distance` distinct bytes ago that a cache of
/// `cache` bytes still holds: all of them within its size, and past it
/// `(cache / distance)^falloff`. A cache that evicts lines at random keeps about
/// `cache / distance` of a loop over `distance` bytes (falloff 1); least-recently-used
/// keeps none (falloff without bound).
fn held_share(distance: u64, cache: u64, falloff: f64) -> f64 {
    if distance <= cache {
        1.0
    } else {
        (cache as f64 / distance as f64).powf(falloff)
    }
}

/// Bytes per touch, with the sum over the touches after any one in O(log n). Touches are
/// appended in order.
#[derive(Default)]
struct Fenwick {
    /// 1-based Fenwick tree: `tree[i]` sums the touches `i - lowbit(i) + 1 ..= i`.
    tree: Vec<i64>,
    total: i64,
}

impl Fenwick {
    /// Appends a touch with no bytes.
    fn push(&mut self) {
        let i = self.tree.len() + 1;
        // A new node covers the touches after `i - lowbit(i)` and before itself.
        let covered = self.prefix(i - 1) - self.prefix(i - (i & i.wrapping_neg()));
        self.tree.push(covered);
    }

    /// The latest touch's index (one was pushed: `warm` or `touch` pushes before stamping).
    /// A replay has at most a few times 10^7 touches (a 1024-rank ring: about 6 M actions a
    /// run), far from the index's 2^32.
    fn last(&self) -> u32 {
        let last = self.tree.len().checked_sub(1).expect("a touch was pushed");
        u32::try_from(last).expect("fewer than 2^32 touches")
    }

    fn add(&mut self, touch: u32, bytes: i64) {
        self.total += bytes;
        let mut i = touch as usize + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] += bytes;
            i += i & i.wrapping_neg();
        }
    }

    /// Bytes of the touches `0..n`.
    fn prefix(&self, mut n: usize) -> i64 {
        let mut sum = 0;
        while n > 0 {
            sum += self.tree[n - 1];
            n -= n & n.wrapping_neg();
        }
        sum
    }

    /// Bytes `touch` still stamps.
    fn of(&self, touch: u32) -> u64 {
        (self.prefix(touch as usize + 1) - self.prefix(touch as usize)) as u64
    }

    /// Bytes of the touches after `touch`.
    fn after(&self, touch: u32) -> u64 {
        (self.total - self.prefix(touch as usize + 1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::{Fenwick, Recency};

    #[test]
    fn a_range_is_held_while_fewer_distinct_bytes_than_the_cache_were_touched_since() {
        // Least-recently-used: nothing held past the cache's size.
        let mut r = Recency::new(2, 1, 100, 1e6, true);
        assert_eq!(r.missed(0, 0, 0, 50), 1.0, "never touched");
        r.touch(0, &[(0, 0)], 50);
        assert_eq!(r.missed(0, 0, 0, 50), 0.0);
        // 40 + 2 * 30 = 100 distinct bytes later, still held; touching some of them again
        // adds nothing; 10 new bytes and it is gone.
        r.touch(0, &[(1, 0)], 40);
        r.touch(0, &[(1, 100), (1, 200)], 30);
        r.touch(0, &[(1, 0)], 40);
        r.touch(0, &[(1, 100)], 30);
        assert_eq!(r.missed(0, 0, 0, 50), 0.0);
        r.touch(0, &[(1, 300)], 10);
        assert!(r.missed(0, 0, 0, 50) > 1.0 - 1e-12);
        // Half of a range touched again: half held.
        r.touch(0, &[(0, 25)], 25);
        assert!((r.missed(0, 0, 0, 50) - 0.5).abs() < 1e-12);
        assert_eq!(r.missed(0, 0, 0, 0), 0.0);
    }

    #[test]
    fn past_its_size_the_cache_holds_a_share_falling_with_the_distance() {
        let held = |falloff| {
            let mut r = Recency::new(2, 1, 100, falloff, true);
            r.touch(0, &[(0, 0)], 50);
            // 400 distinct bytes since: four times the cache.
            r.touch(0, &[(1, 0), (1, 1000)], 200);
            1.0 - r.missed(0, 0, 0, 50)
        };
        assert!((held(1.0) - 0.25).abs() < 1e-12);
        assert!((held(2.0) - 0.0625).abs() < 1e-12);
        assert_eq!(held(0.0), 1.0, "falloff 0: a cache without bound");
    }

    #[test]
    fn from_the_touch_start_a_pass_larger_than_the_cache_leaves_nothing_for_the_next() {
        let held = |from_start: bool, touched: u32| {
            let r = Recency::new(1, 1, 100, 1e6, true);
            let mut r = if from_start {
                r.counting_from_touch_start()
            } else {
                r
            };
            r.touch(0, &[(0, 0), (0, 1000)], touched);
            r.touch(0, &[(0, 500)], 10);
            1.0 - r.missed(0, 0, 0, touched)
        };
        // 2 * 45 + 10 bytes from the touch's beginning: all held.
        assert_eq!(held(true, 45), 1.0);
        // 2 * 50 + 10: not by a least-recently-used cache, whose next pass would evict
        // each line before it reaches it; from the touch's end, all of it.
        assert!(held(true, 50) < 1e-12);
        assert_eq!(held(false, 50), 1.0);
        // A touch's bytes touched again later count in the later touch only.
        let mut r = Recency::new(1, 1, 100, 1e6, true).counting_from_touch_start();
        r.touch(0, &[(0, 0)], 90);
        r.touch(0, &[(0, 0)], 60);
        r.touch(0, &[(0, 500)], 10);
        assert_eq!(r.missed(0, 0, 60, 30), 0.0, "30 of its own and 70 since");
        r.touch(0, &[(0, 600)], 1);
        assert!(r.missed(0, 0, 60, 30) > 1.0 - 1e-12);
    }

    #[test]
    fn warming_stamps_what_the_schedules_touch_once_and_first() {
        use super::super::program::{Op, Program};
        let program = Program {
            ranks: vec![
                vec![vec![Op::Reduce {
                    len: 10,
                    src: 100,
                    dst: 0,
                }]],
                vec![
                    vec![Op::Send {
                        to: 0,
                        len: 10,
                        notif: 0,
                        src: 0,
                        dst: 100,
                    }],
                    vec![Op::Divide { len: 20, off: 50 }],
                ],
            ],
            segment_bytes: 200,
        };
        let mut r = Recency::new(2, 1, 25, 1e6, true);
        r.warm(&program, |_| 0);
        // Rank 0's [0, 10) and [100, 110), rank 1's [0, 10) and [50, 70): 50 distinct
        // bytes, all in the one touch, none after it.
        assert_eq!(r.live[0].after(0), 0);
        assert_eq!(r.live[0].total, 50);
        assert_eq!(r.missed(0, 0, 100, 10), 0.0);
        assert_eq!(r.missed(0, 1, 50, 20), 0.0);
        assert_eq!(r.missed(0, 1, 100, 10), 1.0, "never touched");
        // 30 new bytes: the cache of 25 no longer holds the warm ones.
        r.touch(0, &[(1, 150)], 30);
        assert_eq!(r.missed(0, 0, 0, 10), 1.0);
    }

    #[test]
    fn another_pools_cache_does_not_hold_what_this_one_touched() {
        let mut r = Recency::new(1, 2, 1 << 20, 1.0, true);
        r.touch(0, &[(0, 0)], 64);
        assert_eq!(r.missed(0, 0, 0, 64), 0.0);
        assert_eq!(r.missed(1, 0, 0, 64), 1.0);
        // Touched from pool 1 now: no longer in pool 0's cache by this model.
        r.touch(1, &[(0, 0)], 64);
        assert_eq!(r.missed(1, 0, 0, 64), 0.0);
        assert_eq!(r.missed(0, 0, 0, 64), 1.0);
    }

    #[test]
    fn nothing_is_tracked_when_off() {
        let mut r = Recency::new(2, 1, 100, 1.0, false);
        r.touch(0, &[(0, 0)], 50);
        assert!(!r.tracks());
        assert_eq!(r.missed(0, 0, 0, 50), 0.0);
    }

    #[test]
    fn the_tree_sums_the_touches_after_any_one() {
        let mut f = Fenwick::default();
        let bytes = [5i64, 0, 7, 3, 11, 2, 13, 1, 4];
        for (i, &b) in bytes.iter().enumerate() {
            f.push();
            f.add(i as u32, b);
        }
        f.add(2, -7);
        let mut now = bytes;
        now[2] = 0;
        for t in 0..bytes.len() {
            let after: i64 = now[t + 1..].iter().sum();
            assert_eq!(f.after(t as u32), after as u64, "after touch {t}");
        }
    }
}
