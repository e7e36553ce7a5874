//! `gaspi_statistic_*`: the counters of [`crate::counters`] as the API reads them.

use crate::context::Context;
use crate::counters::Counter;

impl Context {
    /// Number of statistics counters (`gaspi_statistic_counter_max`).
    pub fn statistic_counter_max(&self) -> u32 {
        Counter::ALL.len() as u32
    }

    /// Current value of a counter (`gaspi_statistic_counter_get`).
    pub fn statistic_counter_get(&self, c: Counter) -> u64 {
        self.sh.stats.get(c)
    }

    /// Sets a counter back to 0 (`gaspi_statistic_counter_reset`).
    pub fn statistic_counter_reset(&self, c: Counter) {
        self.sh.stats.reset(c);
    }
}
