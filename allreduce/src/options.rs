//! Options of a collective and the automatic choice of algorithm.

use gaspi::{QueueId, Timeout};

use crate::algorithm::Algorithm;
use crate::error::{Error, Result};
use crate::thresholds::Thresholds;

/// Who drives a collective forward: which thread runs its sends, receives and reductions
/// between `start` and the end of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Driver {
    /// The calling thread, inside `test` and `wait` (no extra thread).
    #[default]
    Caller,
    /// A thread per collective that runs each started operation to completion; `test`
    /// only looks and `wait` sleeps until it is done.
    Thread,
}

/// How much less a host's link carries in the hierarchical allreduce than in a flat ring
/// laid out in rank order: `(p-1)/p` of the vector each way against `(H-1)/H` for `p`
/// ranks on `H` hosts. It tends to 1 as hosts multiply (the ring already crosses each
/// host's link only once per direction), and below [`HIERARCHICAL_MIN_SAVING`] the
/// hierarchical allreduce's intra-host phases cost more than the link saves.
fn link_saving(ranks: usize, hosts: usize) -> f64 {
    let (p, h) = (ranks as f64, hosts as f64);
    ((p - 1.0) / p) / ((h - 1.0) / h)
}

/// The link saving from which `Auto` takes the hierarchical allreduce across hosts: the
/// simulator's choice on the 1024-rank table's machine, since the intra-host phases read the
/// peers' memory in place and overlap the link piece by piece. 8 hosts of 2 save 1.071 and
/// the hierarchical allreduce wins by 5% at 16 MiB; 12 hosts of 4 save 1.068 and the ring
/// wins by more than 5% from 256 KiB; 16 hosts of 2 (1.03) or of 4 (1.05): the ring or a
/// tie. It was 1.4 while those phases were staged and ran before and after the link's.
const HIERARCHICAL_MIN_SAVING: f64 = 1.07;

/// Below this size the hierarchical allreduce is taken across hosts whatever the link
/// saving, where every host holds several members: the vector is latency-bound and the
/// inter-host phase's `H`-rank allreduce takes fewer steps than a flat one over all ranks
/// (the simulator: 8–32 ranks on 2–8 per host, 1–4 MiB).
const HIERARCHICAL_LATENCY_MAX: usize = 16 << 20;

/// Pipelining chunk of the ring and of the chain broadcast when every member is reached
/// through shared memory: small enough that the pipeline fills quickly, large enough that
/// a notification per chunk costs nothing (measured: 256 KiB beats 4 MiB by 1.3-1.5x at
/// 4-64 MiB on 2 ranks).
pub const SHM_CHUNK_BYTES: usize = 256 << 10;
/// The chunk when some member is reached through the network: every frame costs a header
/// and a wake-up of the receiving thread, so it is larger than over shared memory; with the
/// ring's staging slots 1 MiB keeps 4 chunks in flight (measured over TCP loopback, 16 and
/// 64 MiB, three alternating rounds: 2.2-2.7 GB/s busbw with 1 MiB against 1.8-2.5 with
/// 4 MiB at 2 ranks, and 1.1-1.35 against 0.96-1.2 at 4 ranks).
pub const NET_CHUNK_BYTES: usize = 1 << 20;

/// How a collective is set up. `Options::default()` suits most uses; environment variables
/// override the automatic choices (read when a collective is created):
///
/// | variable | meaning |
/// |---|---|
/// | `TNT_ALLREDUCE_ALGORITHM` | `auto`, `ring`, `rd`, `rabenseifner`, `hierarchical`, `one-shot`, `single-copy`: used when `algorithm` is `Auto` |
/// | `TNT_ALLREDUCE_SMALL_MAX` | bytes: recursive doubling up to this size |
/// | `TNT_ALLREDUCE_RING_MIN` | bytes: ring from this size |
/// | `TNT_ALLREDUCE_SINGLE_COPY_MIN` | bytes: single-copy from this size when all members share memory (on 2 ranks too) |
/// | `TNT_ALLREDUCE_CHUNK` | bytes: pipelining chunk (ring, chain broadcast) |
/// | `TNT_ALLREDUCE_CACHE_BYTES` | bytes: the host's last-level cache, as single-copy plans for it (`0`: always copy past it) |
/// | `TNT_BROADCAST_TREE_MAX` | bytes: binomial-tree broadcast up to this size, chain above |
///
/// Byte counts are plain numbers or carry a binary suffix: `64K`, `4M`, `1G`.
#[derive(Clone, Debug)]
pub struct Options {
    /// The allreduce algorithm; [`Algorithm::Auto`] (the default) picks one by message
    /// size and by how the group's members sit on hosts. Broadcasts ignore it.
    pub algorithm: Algorithm,
    /// Where [`Algorithm::Auto`] switches algorithms.
    pub thresholds: Thresholds,
    /// Pipelining chunk in bytes; `None` picks [`SHM_CHUNK_BYTES`] when every member is
    /// reached through shared memory and [`NET_CHUNK_BYTES`] otherwise.
    pub chunk_bytes: Option<usize>,
    /// Broadcasts up to this many bytes use the binomial tree, larger ones the chain.
    pub tree_max: usize,
    /// The gaspi queue the collective posts on; `None` (the default): each run takes a
    /// queue of the collectives' own, created on the context for them (at most
    /// [`QUEUES_MAX`](crate::QUEUES_MAX)), so that neither the application's waits nor
    /// another collective's flushes meet this run's requests.
    pub queue: Option<QueueId>,
    /// Bound on the collective constructor (it talks to every member).
    pub setup_timeout: Timeout,
    /// Who drives the collective forward: the caller inside `test`/`wait` (the default) or
    /// a thread of the collective's own.
    pub driver: Driver,
    /// The host's last-level cache in bytes, as single-copy plans for it: while the vectors
    /// of the group's ranks on this host fit it together, each rank writes its finished
    /// block into the peers' buffers; past it the peers copy the block with streaming
    /// stores. `None` (the default): the cache Linux describes in sysfs, one instance per
    /// rank at most (32 MiB where it says nothing). Members may differ: the group copies
    /// past the cache if any member's cache is exceeded.
    pub cache_bytes: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            algorithm: Algorithm::Auto,
            thresholds: Thresholds::default(),
            chunk_bytes: None,
            tree_max: 64 << 10,
            queue: None,
            setup_timeout: Timeout::BLOCK,
            driver: Driver::Caller,
            cache_bytes: None,
        }
    }
}

/// The value of environment variable `variable`, if set, parsed by `parse`; a value that
/// does not parse is an [`Error::BadEnvironment`] saying what was `expected`.
fn env_value<T>(
    variable: &'static str,
    expected: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>> {
    let bad = |value: String| Error::BadEnvironment {
        variable,
        value,
        expected,
    };
    match std::env::var(variable) {
        Ok(v) => parse(&v).map(Some).ok_or_else(|| bad(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(v.to_string_lossy().into_owned())),
    }
}

/// A byte count from the environment (see [`parse_bytes`]).
fn env_bytes(variable: &'static str) -> Result<Option<usize>> {
    env_value(
        variable,
        "a byte count (a number, optionally with K, M or G)",
        parse_bytes,
    )
}

/// `4096`, `64K`, `4M`, `1G` (binary multiples, case-insensitive, optional `iB`/`B`).
pub(crate) fn parse_bytes(v: &str) -> Option<usize> {
    let v = v.trim();
    let v = v
        .strip_suffix("iB")
        .or_else(|| v.strip_suffix('B'))
        .unwrap_or(v);
    let (digits, shift) = match v.chars().last()?.to_ascii_uppercase() {
        'K' => (&v[..v.len() - 1], 10),
        'M' => (&v[..v.len() - 1], 20),
        'G' => (&v[..v.len() - 1], 30),
        _ => (v, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1 << shift)
}

impl Options {
    /// These options with the environment's overrides applied.
    pub(crate) fn resolved(&self) -> Result<Options> {
        let mut o = self.clone();
        if o.algorithm == Algorithm::Auto {
            if let Some(a) = env_value(
                "TNT_ALLREDUCE_ALGORITHM",
                "an allreduce algorithm (auto, ring, rd, rabenseifner, hierarchical, one-shot, single-copy)",
                Algorithm::parse,
            )? {
                o.algorithm = a;
            }
        }
        if let Some(v) = env_bytes("TNT_ALLREDUCE_SMALL_MAX")? {
            o.thresholds.small_max = v;
        }
        if let Some(v) = env_bytes("TNT_ALLREDUCE_RING_MIN")? {
            o.thresholds.ring_min = v;
        }
        if let Some(v) = env_bytes("TNT_ALLREDUCE_SINGLE_COPY_MIN")? {
            // Whoever sets it means it for every group size.
            o.thresholds.single_copy_min = v;
            o.thresholds.single_copy_min_two_ranks = v;
        }
        if let Some(v) = env_bytes("TNT_ALLREDUCE_CHUNK")? {
            o.chunk_bytes = Some(v);
        }
        if let Some(v) = env_bytes("TNT_ALLREDUCE_CACHE_BYTES")? {
            o.cache_bytes = Some(v);
        }
        if let Some(v) = env_bytes("TNT_BROADCAST_TREE_MAX")? {
            o.tree_max = v;
        }
        if o.chunk_bytes == Some(0) {
            return Err(Error::ZeroChunk);
        }
        Ok(o)
    }

    /// The algorithm for a vector of `bytes` over a group laid out on hosts as `hosts`
    /// (member indices per host). `Auto` takes the hierarchical allreduce above
    /// `small_max` when the group spans several hosts, some host holds several members
    /// (otherwise it would be the flat algorithm with extra steps) and that saves enough of
    /// the hosts' link (`link_saving`: few hosts), and below it recursive doubling;
    /// everything else by [`Thresholds`] as on one host. The rules are the simulator's
    /// choice (`allreduce::sim`; its test checks that they agree).
    ///
    /// With `shared_memory` (every member reached through shared memory: one host), two
    /// ranks or more and at least `Thresholds::single_copy_from` bytes, `Auto` takes
    /// single-copy.
    pub(crate) fn pick(
        &self,
        bytes: usize,
        hosts: &[Vec<usize>],
        shared_memory: bool,
    ) -> Algorithm {
        let ranks: usize = hosts.iter().map(Vec::len).sum();
        // Across hosts the hierarchical allreduce wins on latency below `HIERARCHICAL_MIN`
        // (its inter-host phase has one step per host, not per rank) wherever every host
        // has ranks to combine, and above only where it saves enough of the link.
        let layered = hosts.len() > 1
            && hosts.iter().any(|m| m.len() > 1)
            && ((bytes < HIERARCHICAL_LATENCY_MAX && hosts.iter().all(|m| m.len() > 1))
                || link_saving(ranks, hosts.len()) >= HIERARCHICAL_MIN_SAVING);
        match self.algorithm {
            Algorithm::Auto
                if shared_memory
                    && ranks > 1
                    && bytes >= self.thresholds.single_copy_from(ranks) =>
            {
                Algorithm::SingleCopy
            }
            Algorithm::Auto if layered && bytes > self.thresholds.small_max => {
                Algorithm::Hierarchical
            }
            Algorithm::Auto if hosts.len() > 1 && hosts.iter().any(|m| m.len() > 1) => {
                self.thresholds.flat_across_hosts(bytes, ranks)
            }
            Algorithm::Auto => self.thresholds.flat(bytes, ranks),
            a => a,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ranks` members on one host.
    fn one_host(ranks: usize) -> Vec<Vec<usize>> {
        vec![(0..ranks).collect()]
    }

    #[test]
    fn auto_picks_by_size() {
        let o = Options::default();
        assert_eq!(
            o.pick(4 << 10, &one_host(4), false),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(
            o.pick(64 << 10, &one_host(4), false),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(
            o.pick(256 << 10, &one_host(4), false),
            Algorithm::Rabenseifner
        );
        // Three ranks: Rabenseifner's fold does not pay; the ring right above small_max.
        assert_eq!(o.pick(1 << 20, &one_host(3), false), Algorithm::Ring);
        assert_eq!(
            o.pick(1 << 20, &one_host(8), false),
            Algorithm::Rabenseifner
        );
        assert_eq!(o.pick(4 << 20, &one_host(4), false), Algorithm::Ring);
        assert_eq!(o.pick(64 << 20, &one_host(4), false), Algorithm::Ring);
        assert_eq!(o.pick(256 << 10, &one_host(2), false), Algorithm::Ring);
        let forced = Options {
            algorithm: Algorithm::Rabenseifner,
            ..Options::default()
        };
        assert_eq!(forced.pick(8, &one_host(3), false), Algorithm::Rabenseifner);
        // Ranks sharing memory reduce all but tiny vectors from each other's buffers.
        for ranks in [2, 3, 4, 5] {
            for bytes in [16 << 10, 256 << 10, 1 << 20, 64 << 20] {
                let got = o.pick(bytes, &one_host(ranks), true);
                assert_eq!(got, Algorithm::SingleCopy, "{ranks} x {bytes}");
            }
        }
        assert_eq!(o.pick(64 << 20, &one_host(2), false), Algorithm::Ring);
        // Two ranks from 4 KiB, more from 16 KiB: below, recursive doubling.
        assert_eq!(o.pick(4 << 10, &one_host(2), true), Algorithm::SingleCopy);
        assert_eq!(
            o.pick(2 << 10, &one_host(2), true),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(
            o.pick(8 << 10, &one_host(4), true),
            Algorithm::RecursiveDoubling
        );
        // From 8 ranks only from 256 KiB: below, 2(p-1) notifications a run cost more.
        assert_eq!(
            o.pick(64 << 10, &one_host(8), true),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(o.pick(256 << 10, &one_host(8), true), Algorithm::SingleCopy);
    }

    #[test]
    fn the_ring_needs_larger_vectors_on_larger_groups() {
        let o = Options::default();
        let spread = |n: usize| -> Vec<Vec<usize>> { (0..n).map(|r| vec![r]).collect() };
        let pick = |bytes: usize, n: usize| o.pick(bytes, &spread(n), false);
        assert_eq!(pick(4 << 20, 8), Algorithm::Ring);
        assert_eq!(pick(4 << 20, 16), Algorithm::Rabenseifner);
        assert_eq!(pick(16 << 20, 16), Algorithm::Ring);
        assert_eq!(pick(4 << 20, 32), Algorithm::Rabenseifner);
        assert_eq!(pick(16 << 20, 32), Algorithm::Ring);
        assert_eq!(pick(16 << 20, 64), Algorithm::Rabenseifner);
        assert_eq!(pick(64 << 20, 64), Algorithm::Ring);
        assert_eq!(pick(256 << 20, 1024), Algorithm::Rabenseifner);
        assert_eq!(pick(1 << 30, 1024), Algorithm::Ring);
        // Several ranks per host: Rabenseifner's exchanges between hosts share a host's
        // link, the ring's do not; the ring from ring_min again.
        let pairs: Vec<Vec<usize>> = (0..32).map(|h| vec![2 * h, 2 * h + 1]).collect();
        assert_eq!(o.pick(16 << 20, &pairs, false), Algorithm::Ring);
        assert_eq!(
            o.pick(4 << 20, &pairs, false),
            Algorithm::Hierarchical,
            "latency-bound: one step per host"
        );
    }

    #[test]
    fn auto_picks_hierarchical_across_hosts_with_several_ranks() {
        let o = Options::default();
        let two_by_two = vec![vec![0, 1], vec![2, 3]];
        let uneven = vec![vec![0], vec![1, 2, 3, 4]];
        for hosts in [&two_by_two, &uneven] {
            assert_eq!(o.pick(64 << 20, hosts, false), Algorithm::Hierarchical);
            assert_eq!(o.pick(1 << 20, hosts, false), Algorithm::Hierarchical);
            assert_eq!(
                o.pick((64 << 10) + 1, hosts, false),
                Algorithm::Hierarchical
            );
            // Small vectors stay latency-bound: recursive doubling.
            assert_eq!(o.pick(64 << 10, hosts, false), Algorithm::RecursiveDoubling);
            assert_eq!(o.pick(0, hosts, false), Algorithm::RecursiveDoubling);
        }
        // A few hosts: what the link saves is worth the intra-host phases.
        let four_by_two: Vec<Vec<usize>> = (0..4).map(|h| vec![2 * h, 2 * h + 1]).collect();
        assert_eq!(
            o.pick(64 << 20, &four_by_two, false),
            Algorithm::Hierarchical
        );
        let two_plus_one = vec![vec![0, 1], vec![2]];
        assert_eq!(
            o.pick(64 << 20, &two_plus_one, false),
            Algorithm::Hierarchical
        );
        // Many hosts: the ring crosses each host's link once per direction too, and the
        // hierarchical allreduce's intra-host phases cost more than the link saves.
        let sixteen_by_two: Vec<Vec<usize>> = (0..16).map(|h| vec![2 * h, 2 * h + 1]).collect();
        assert_eq!(o.pick(64 << 20, &sixteen_by_two, false), Algorithm::Ring);
        // One rank per host, or one host: nothing to gain, the flat rules.
        let spread = vec![vec![0], vec![1], vec![2], vec![3]];
        assert_eq!(o.pick(64 << 20, &spread, false), Algorithm::Ring);
        assert_eq!(o.pick(1 << 20, &spread, false), Algorithm::Rabenseifner);
        assert_eq!(o.pick(64 << 20, &one_host(4), false), Algorithm::Ring);
        // The threshold moves with small_max; a forced algorithm is kept.
        let later = Options {
            thresholds: Thresholds {
                small_max: 1 << 20,
                ..Thresholds::default()
            },
            ..Options::default()
        };
        assert_eq!(
            later.pick(1 << 20, &two_by_two, false),
            Algorithm::RecursiveDoubling
        );
        assert_eq!(
            later.pick(2 << 20, &two_by_two, false),
            Algorithm::Hierarchical
        );
        let ring = Options {
            algorithm: Algorithm::Ring,
            ..Options::default()
        };
        assert_eq!(ring.pick(64 << 20, &two_by_two, false), Algorithm::Ring);
        let hier = Options {
            algorithm: Algorithm::Hierarchical,
            ..Options::default()
        };
        assert_eq!(hier.pick(8, &one_host(3), false), Algorithm::Hierarchical);
    }

    #[test]
    fn byte_counts_parse_with_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes(" 64K"), Some(64 << 10));
        assert_eq!(parse_bytes("4m"), Some(4 << 20));
        assert_eq!(parse_bytes("4MiB"), Some(4 << 20));
        assert_eq!(parse_bytes("1G"), Some(1 << 30));
        assert_eq!(parse_bytes("1.5M"), None);
        assert_eq!(parse_bytes("M"), None);
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("x"), None);
    }

    #[test]
    fn bad_environment_values_say_what_was_expected() {
        // A variable of this test alone: the others never read it.
        std::env::set_var("TNT_TEST_BAD_ENV_VALUE", "12Q");
        let e = env_bytes("TNT_TEST_BAD_ENV_VALUE").unwrap_err();
        assert!(
            matches!(
                &e,
                Error::BadEnvironment { variable: "TNT_TEST_BAD_ENV_VALUE", value, .. }
                    if value == "12Q"
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("is not a byte count"), "{e}");
        std::env::set_var("TNT_TEST_BAD_ENV_VALUE", "64K");
        assert_eq!(env_bytes("TNT_TEST_BAD_ENV_VALUE").unwrap(), Some(64 << 10));
        std::env::remove_var("TNT_TEST_BAD_ENV_VALUE");
        assert_eq!(env_bytes("TNT_TEST_BAD_ENV_VALUE").unwrap(), None);
    }

    #[test]
    fn algorithm_names_parse() {
        assert_eq!(Algorithm::parse("RD"), Some(Algorithm::RecursiveDoubling));
        assert_eq!(Algorithm::parse(" ring "), Some(Algorithm::Ring));
        assert_eq!(
            Algorithm::parse("Hierarchical"),
            Some(Algorithm::Hierarchical)
        );
        assert_eq!(Algorithm::parse("hier"), Some(Algorithm::Hierarchical));
        assert_eq!(Algorithm::parse("bogus"), None);
    }
}
