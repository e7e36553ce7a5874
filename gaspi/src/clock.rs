//! The process clock behind `gaspi_time_get` and `gaspi_time_ticks`. Its origin is the first
//! time it is read in the process (at the latest, `init`), not `init` itself: programs time
//! their own start-up by reading it before `gaspi_proc_init`, which GPI-2 allows.

use std::sync::OnceLock;
use std::time::Instant;

fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Starts the clock if nothing has read it yet.
pub(crate) fn start() {
    origin();
}

/// Milliseconds since the clock's origin (`gaspi_time_get`).
pub fn time_ms() -> f64 {
    origin().elapsed().as_secs_f64() * 1e3
}

/// Nanoseconds since the clock's origin (`gaspi_time_ticks`); see [`TICKS_PER_US`].
pub fn time_ticks() -> u64 {
    origin().elapsed().as_nanos() as u64
}

/// Ticks per microsecond: `gaspi_cpu_frequency` reports this in MHz (1000: a tick is 1 ns).
pub const TICKS_PER_US: f32 = 1000.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_views_advance_together_from_one_origin() {
        let (t0, m0) = (time_ticks(), time_ms());
        std::thread::yield_now();
        let (t1, m1) = (time_ticks(), time_ms());
        assert!(t1 >= t0 && m1 >= m0);
        // The same origin: ms and ns differ by the time between the reads only.
        assert!((m1 - t1 as f64 / 1e6).abs() < 1.0, "{m1} ms vs {t1} ns");
    }
}
