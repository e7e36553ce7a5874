//! Global-batch semantics: every rank shuffles the same way and takes its slice of each
//! global batch, so the set of samples per step does not depend on the number of ranks.

use std::ops::Range;

use crate::error::{Error, Result};

/// Default shuffle seed when none is given.
pub const DEFAULT_SEED: u64 = 42;

/// Rank `rank`'s part of a global batch of `global` samples over `ranks` ranks:
/// `global / ranks` samples, one more for ranks below `global % ranks`.
pub fn micro_batch_range(global: usize, ranks: usize, rank: usize) -> Result<Range<usize>> {
    if ranks == 0 || rank >= ranks {
        return Err(Error::Config(format!("rank {rank} is not in 0..{ranks}")));
    }
    if global < ranks {
        return Err(Error::Config(format!(
            "global batch size {global} is smaller than the number of ranks {ranks}; every \
             rank needs at least one sample"
        )));
    }
    let base = global / ranks;
    let extra = global % ranks;
    let start = rank * base + rank.min(extra);
    let len = base + usize::from(rank < extra);
    Ok(start..start + len)
}

/// Rank `rank`'s contiguous share of `len` samples that are each processed exactly once
/// (validation, evaluation, prediction): `len / ranks` samples, one more for ranks below
/// `len % ranks`. Unlike [`micro_batch_range`], a share may be empty (`len < ranks`).
pub fn eval_range(len: usize, ranks: usize, rank: usize) -> Result<Range<usize>> {
    if ranks == 0 || rank >= ranks {
        return Err(Error::Config(format!("rank {rank} is not in 0..{ranks}")));
    }
    let (base, extra) = (len / ranks, len % ranks);
    let start = rank * base + rank.min(extra);
    Ok(start..start + base + usize::from(rank < extra))
}

/// SplitMix64: small, fast, and the same on every platform.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `0..n` (n > 0), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// The sample order of `epoch`: a Fisher-Yates shuffle seeded by `(seed, epoch)` only, so a
/// resumed run sees the same order as an uninterrupted one.
pub fn epoch_permutation(len: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed ^ epoch.wrapping_mul(0xd6e8_feb8_6659_fd93));
    let mut order: Vec<usize> = (0..len).collect();
    for i in (1..len).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    order
}

/// The global batches of one epoch (the last incomplete one is dropped) and this rank's
/// sample indices in each.
pub fn local_batches(
    order: &[usize],
    global_batch: usize,
    ranks: usize,
    rank: usize,
) -> Result<Vec<Vec<usize>>> {
    let range = micro_batch_range(global_batch, ranks, rank)?;
    Ok(order
        .chunks_exact(global_batch)
        .map(|batch| batch[range.clone()].to_vec())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_batches_partition_the_global_batch() {
        for global in 3..40 {
            for ranks in 1..=global.min(7) {
                let mut next = 0;
                for rank in 0..ranks {
                    let r = micro_batch_range(global, ranks, rank).unwrap();
                    assert_eq!(r.start, next);
                    let expected = global / ranks + usize::from(rank < global % ranks);
                    assert_eq!(r.len(), expected);
                    next = r.end;
                }
                assert_eq!(next, global);
            }
        }
    }

    #[test]
    fn uneven_split_gives_extra_samples_to_low_ranks() {
        let lens: Vec<usize> = (0..3)
            .map(|r| micro_batch_range(11, 3, r).unwrap().len())
            .collect();
        assert_eq!(lens, [4, 4, 3]);
    }

    #[test]
    fn eval_ranges_cover_every_sample_once() {
        for len in 0..30 {
            for ranks in 1..=5 {
                let mut next = 0;
                for rank in 0..ranks {
                    let r = eval_range(len, ranks, rank).unwrap();
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, len, "len {len} over {ranks} ranks");
            }
        }
        assert!(eval_range(4, 2, 2).is_err());
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(micro_batch_range(2, 3, 0).is_err());
        assert!(micro_batch_range(8, 2, 2).is_err());
        assert!(micro_batch_range(8, 0, 0).is_err());
    }

    #[test]
    fn permutation_depends_on_seed_and_epoch_only() {
        let a = epoch_permutation(100, 42, 3);
        assert_eq!(a, epoch_permutation(100, 42, 3));
        assert_ne!(a, epoch_permutation(100, 42, 4));
        assert_ne!(a, epoch_permutation(100, 7, 3));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn union_of_local_batches_is_the_global_batch() {
        let order = epoch_permutation(50, 1, 0);
        let per_rank: Vec<_> = (0..3)
            .map(|r| local_batches(&order, 11, 3, r).unwrap())
            .collect();
        assert_eq!(per_rank[0].len(), 4); // 50 / 11, remainder dropped
        for step in 0..4 {
            let joined: Vec<usize> = per_rank.iter().flat_map(|b| b[step].clone()).collect();
            assert_eq!(joined, order[step * 11..(step + 1) * 11]);
        }
    }
}
