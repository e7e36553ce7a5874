//! Benchmarks of the tarantella workspace and the helpers they share.
//!
//! - `gaspi-p2p` (binary): point-to-point latency and bandwidth of the runtime.
//! - `allreduce-sweep` (binary): the nccl-tests table for allreduce or broadcast ([`sweep`]).
//! - `reduce-kernel` (binary): the reduction kernels alone against `copy_from_slice`.
//! - `allreduce-sim` (binary): the simulator's predictions, choice table and validation
//!   ([`validation`]: its files, pooled over runs).
//! - `vm-speed` (binary): this machine's state now (an in-cache copy, a cache line's and a
//!   256 KiB buffer's trip between two cores), recorded beside `benches/sim/measure.sh`'s runs.
//! - `soak` (binary, with its rank program `soak-rank`): back-to-back jobs under
//!   `tarantella`, some killed; start-time percentiles and leftovers (`docs/soak.md`).
//! - `benches/collectives.rs` (criterion): allreduce and broadcast at 2 and 4 ranks.
//!
//! Multi-rank benchmarks start their peer ranks through [`gaspi::testing::Job`] when no
//! launcher started them: the process re-executes itself as every rank, and rank 0 reports.
//!
//! Sizes on their command lines are written as nccl-tests writes them:
//!
//! ```
//! use tarantella_benches::parse_size;
//!
//! assert_eq!(parse_size("64M"), Ok(64 << 20));
//! assert_eq!(parse_size("4k"), Ok(4096));
//! assert!(parse_size("1.5G").is_err());
//! ```

pub mod sweep;
pub mod validation;

use gaspi::{Context, Group, ReduceOp, Timeout};

/// Set in the rank processes a benchmark starts.
pub const ROLE: &str = "TNT_BENCH_ROLE";

/// How long one collective step may take before a benchmark gives up on its peers.
pub const STEP_TIMEOUT: Timeout = Timeout(120_000);

/// The upper median of `samples` (at least one): what the benchmarks report of repeated
/// timings, steadier on this VM than the mean.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// A byte count as nccl-tests writes it: plain bytes, or a whole number with `K`, `M` or
/// `G` (either case; powers of 1024): `8`, `4K`, `64M`, `1G`.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let trimmed = text.trim();
    let (digits, unit): (&str, usize) = match trimmed.char_indices().last() {
        Some((i, 'K' | 'k')) => (&trimmed[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&trimmed[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&trimmed[..i], 1 << 30),
        _ => (trimmed, 1),
    };
    // Checked by hand: `parse` alone would also take a leading `+`.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not a size: use bytes or a whole number with K, M or G (e.g. 8, 4K, 64M)"
        ));
    }
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| format!("{text:?} is too large a size"))
}

/// Iterations that keep one measurement near `budget_bytes` of traffic (5 to 2000).
pub fn iterations(bytes: usize, budget_bytes: usize) -> usize {
    (budget_bytes / bytes.max(1)).clamp(5, 2000)
}

/// The largest of every rank's `v`.
pub fn max_over_ranks(ctx: &Context, v: f64) -> gaspi::Result<f64> {
    let mut out = [0f64];
    ctx.allreduce(&[v], &mut out, ReduceOp::Max, Group::ALL, STEP_TIMEOUT)?;
    Ok(out[0])
}

/// The sum of every rank's `v`.
pub fn sum_over_ranks(ctx: &Context, v: u64) -> gaspi::Result<u64> {
    let mut out = [0u64];
    ctx.allreduce(&[v], &mut out, ReduceOp::Sum, Group::ALL, STEP_TIMEOUT)?;
    Ok(out[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_nccl_tests_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 2g "), Ok(2 << 30));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn sizes_reject_what_is_not_a_whole_count() {
        for bad in ["", "K", "-4K", "+4", "1.5M", "4KB", "4T", "M4", "0x10"] {
            let err = parse_size(bad).expect_err(bad);
            assert!(err.contains("not a size"), "{bad:?}: {err}");
        }
        let err = parse_size("99999999999999999999G").unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let err = parse_size(&format!("{}G", usize::MAX / 2)).unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }
}
