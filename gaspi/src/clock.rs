//! The process clock behind `gaspi_time_get` and `gaspi_time_ticks`. Its origin is the first
//! time it is read in the process (at the latest, `init`), not `init` itself: programs time
//! their own start-up by reading it before `gaspi_proc_init`, which GPI-2 allows.
//!
//! Ticks are the CPU's time-stamp counter where it runs at a constant rate (x86-64 with an
//! invariant TSC), as in GPI-2, and [`ticks_per_us`] (`gaspi_cpu_frequency`) is its
//! frequency, measured once against the monotonic clock. So a GPI-2 program that reads the
//! counter itself (`rdtsc`, as GPI-2's benchmarks do) and divides by `gaspi_cpu_frequency`
//! gets the right time, as does one that divides `gaspi_time_ticks`. Elsewhere a tick is a
//! nanosecond of the monotonic clock and the frequency 1000 MHz.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The clock's origin: the monotonic time and the tick count when it was first read.
struct Origin {
    at: Instant,
    ticks: u64,
}

fn origin() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    ORIGIN.get_or_init(|| Origin {
        at: Instant::now(),
        ticks: raw_ticks(),
    })
}

/// Starts the clock if nothing has read it yet, and measures the tick rate.
pub(crate) fn start() {
    origin();
    ticks_per_us();
}

/// Milliseconds since the clock's origin (`gaspi_time_get`).
pub fn time_ms() -> f64 {
    origin().at.elapsed().as_secs_f64() * 1e3
}

/// Ticks since the clock's origin (`gaspi_time_ticks`); [`ticks_per_us`] per microsecond.
pub fn time_ticks() -> u64 {
    let origin = origin().ticks;
    // Saturating: cores' counters may differ by a few ticks.
    raw_ticks().saturating_sub(origin)
}

/// Ticks per microsecond, which `gaspi_cpu_frequency` reports in MHz: the time-stamp
/// counter's frequency, or 1000 where a tick is a nanosecond. Measured on the first call
/// (about 10 ms).
pub fn ticks_per_us() -> f32 {
    static RATE: OnceLock<f32> = OnceLock::new();
    *RATE.get_or_init(|| {
        if tsc::usable() {
            tsc::measure_mhz()
        } else {
            NS_PER_US
        }
    })
}

/// The rate of the nanosecond ticks.
const NS_PER_US: f32 = 1000.0;

/// The time-stamp counter where it is usable, else nanoseconds of the monotonic clock.
fn raw_ticks() -> u64 {
    tsc::read().unwrap_or_else(|| {
        static NS_ORIGIN: OnceLock<Instant> = OnceLock::new();
        NS_ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
    })
}

#[cfg(target_arch = "x86_64")]
mod tsc {
    use std::arch::x86_64::{__cpuid, _rdtsc, CpuidResult};
    use std::sync::OnceLock;

    use super::{Duration, Instant};

    /// Whether the counter is a clock here: it ticks at a constant rate in every power state
    /// and on every core (CPUID 0x8000_0007, EDX bit 8, "invariant TSC").
    pub(super) fn usable() -> bool {
        static INVARIANT: OnceLock<bool> = OnceLock::new();
        *INVARIANT.get_or_init(|| {
            // CPUID is available on every x86-64 CPU.
            let max: CpuidResult = __cpuid(0x8000_0000);
            if max.eax < 0x8000_0007 {
                return false;
            }
            let power = __cpuid(0x8000_0007);
            power.edx & (1 << 8) != 0
        })
    }

    /// The counter, where it is a clock.
    pub(super) fn read() -> Option<u64> {
        // SAFETY: RDTSC is available on every x86-64 CPU and has no memory effects.
        usable().then(|| unsafe { _rdtsc() })
    }

    /// The counter's frequency in MHz: the median of five 2 ms windows timed by the
    /// monotonic clock.
    pub(super) fn measure_mhz() -> f32 {
        let mut mhz: Vec<f64> = (0..5)
            .map(|_| window_mhz(Duration::from_millis(2)))
            .collect();
        mhz.sort_by(f64::total_cmp);
        mhz[2] as f32
    }

    fn window_mhz(length: Duration) -> f64 {
        let (t0, c0) = paired_read();
        while t0.elapsed() < length {
            std::hint::spin_loop();
        }
        let (t1, c1) = paired_read();
        c1.wrapping_sub(c0) as f64 / (t1 - t0).as_secs_f64() / 1e6
    }

    /// The monotonic clock and the counter read at one moment: the clock between two reads
    /// of the counter, taken again while those are far apart (the thread was preempted
    /// between them), the counter their midpoint.
    fn paired_read() -> (Instant, u64) {
        /// About 10 us at 2 GHz: far above two back-to-back reads, far below a preemption.
        const TIGHT: u64 = 20_000;
        let mut last = (Instant::now(), 0);
        for _ in 0..100 {
            let before = read().unwrap_or(0);
            let at = Instant::now();
            let after = read().unwrap_or(0);
            last = (at, before + after.wrapping_sub(before) / 2);
            if after.wrapping_sub(before) < TIGHT {
                break;
            }
        }
        last
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc {
    pub(super) fn usable() -> bool {
        false
    }

    pub(super) fn read() -> Option<u64> {
        None
    }

    pub(super) fn measure_mhz() -> f32 {
        super::NS_PER_US
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_views_advance_together_from_one_origin() {
        let (t0, m0) = (time_ticks(), time_ms());
        std::thread::yield_now();
        let (t1, m1) = (time_ticks(), time_ms());
        assert!(t1 >= t0 && m1 >= m0);
        // The same origin: ms and ticks differ by the time between the reads only.
        let ticks_ms = t1 as f64 / (f64::from(ticks_per_us()) * 1e3);
        assert!((m1 - ticks_ms).abs() < 1.0, "{m1} ms vs {t1} ticks");
    }

    /// Ticks over the rate measure the same time as the monotonic clock: over 50 ms, within
    /// 5%. Each end reads the clock between two tick reads, again while those are far apart
    /// (a preemption), so only the rate's error remains.
    #[test]
    fn ticks_over_the_rate_are_time() {
        let mhz = f64::from(ticks_per_us());
        assert!(mhz > 1.0, "{mhz} MHz");
        let tight = (mhz * 20.0) as u64; // 20 us of ticks
        let paired = || {
            let mut last = (0.0, 0);
            for _ in 0..100 {
                let (before, ms, after) = (time_ticks(), time_ms(), time_ticks());
                last = (ms, before + (after - before) / 2);
                if after - before < tight {
                    break;
                }
            }
            last
        };
        let (m0, t0) = paired();
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            std::hint::spin_loop();
        }
        let (m1, t1) = paired();
        let by_ticks = (t1 - t0) as f64 / (mhz * 1e3);
        let by_clock = m1 - m0;
        assert!(
            (by_ticks / by_clock - 1.0).abs() < 0.05,
            "{by_ticks} ms by ticks at {mhz} MHz, {by_clock} ms by the clock"
        );
    }
}
