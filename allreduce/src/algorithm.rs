//! The allreduce algorithms a collective can run, and their names.

/// Allreduce algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Chosen by message size (see [`Thresholds`](crate::Thresholds)).
    #[default]
    Auto,
    /// Pipelined ring: bandwidth-optimal, `2(p-1)` steps.
    Ring,
    /// Recursive doubling with folding: `log2(p)` steps, whole message per step.
    RecursiveDoubling,
    /// Recursive halving then doubling: bandwidth-optimal in `2 log2(p)` steps.
    Rabenseifner,
    /// Reduce-scatter inside each host over shared memory, an allreduce of each shard
    /// between the hosts (ring, Rabenseifner or recursive doubling by the shard's size),
    /// allgather inside each host: only what must cross a host's link does.
    Hierarchical,
    /// Every rank sends its vector to every other and reduces them all: one step of latency,
    /// `p-1` copies of the vector per rank (tiny vectors).
    OneShot,
    /// Ranks that share memory reduce their block straight from each other's buffers, then
    /// write it into the others' (past the cache, the others copy it): one copy per byte,
    /// no staging. Every member must be reached through shared memory.
    SingleCopy,
}

impl Algorithm {
    /// The algorithm `TNT_ALLREDUCE_ALGORITHM` names (case and spaces ignored).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Algorithm::Auto),
            "ring" => Some(Algorithm::Ring),
            "rd" | "recursive-doubling" | "recursive_doubling" => {
                Some(Algorithm::RecursiveDoubling)
            }
            "rabenseifner" | "rhd" => Some(Algorithm::Rabenseifner),
            "hierarchical" | "hier" => Some(Algorithm::Hierarchical),
            "one-shot" | "one_shot" | "oneshot" => Some(Algorithm::OneShot),
            "single-copy" | "single_copy" => Some(Algorithm::SingleCopy),
            _ => None,
        }
    }

    /// The algorithm's word in the setup signature the members compare.
    pub(crate) fn tag(self) -> u64 {
        self as u64
    }
}
