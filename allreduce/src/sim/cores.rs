//! The cores of the simulated hosts: where CPU work runs and when it ends.

/// The cores ranks compute on: per pool (a host, or the one machine all hosts share), each
/// core's busy intervals from the replay's present on. CPU work goes to the core where it
/// can start first, into the first idle gap long enough for it, so that work booked ahead
/// (a receiving thread's, at its message's arrival) does not hold back work that is ready
/// earlier: the kernel's scheduler is work-conserving. Ranks that wait give their core to
/// those that work (time-sharing in the coarse grain of whole actions) instead of every
/// rank being slowed alike. Of the cores where work that may move starts equally early, it
/// takes the one the fewest ranks call home, as the kernel wakes a thread on the idlest
/// core rather than on one that two ranks share.
pub(crate) struct Cores {
    /// Per pool, per core, busy intervals `(start, end)` in time order, none overlapping.
    busy: Vec<Vec<Vec<(f64, f64)>>>,
    /// Per pool, per core, how many ranks keep their work on it ([`home`](Self::home)).
    homes: Vec<Vec<usize>>,
    /// The replay's present: no work is ever booked before it, so intervals that ended by
    /// then are forgotten (per pool, as the pool is used, to keep each event cheap).
    present: f64,
}

impl Cores {
    pub(crate) fn new(pools: usize, cores: usize) -> Cores {
        Cores {
            busy: vec![vec![Vec::new(); cores.max(1)]; pools],
            homes: vec![vec![0; cores.max(1)]; pools],
            present: 0.0,
        }
    }

    /// Records that a rank keeps its own work on core `core` of pool `pool`.
    pub(crate) fn home(&mut self, pool: usize, core: usize) {
        self.homes[pool][core] += 1;
    }

    /// Moves the present to `now` (the time of the event being replayed).
    pub(crate) fn advance(&mut self, now: f64) {
        self.present = self.present.max(now);
    }

    /// Runs `seconds` of work on pool `pool`, ready at `ready`, on whichever of its cores
    /// starts it first; returns when it ends.
    pub(crate) fn run(&mut self, pool: usize, ready: f64, seconds: f64) -> f64 {
        self.run_on(pool, None, ready, seconds)
    }

    /// As [`run`](Self::run), on core `only` of the pool where that is `Some`.
    pub(crate) fn run_on(
        &mut self,
        pool: usize,
        only: Option<usize>,
        ready: f64,
        seconds: f64,
    ) -> f64 {
        if seconds <= 0.0 {
            return ready;
        }
        // The earliest start on each core: the first gap from `ready` that fits.
        let fit = |core: &[(f64, f64)]| -> (f64, usize) {
            let mut start = ready;
            for (i, &(from, to)) in core.iter().enumerate() {
                if to <= start {
                    continue;
                }
                if from >= start + seconds {
                    return (start, i);
                }
                start = start.max(to);
            }
            (start, core.len())
        };
        let present = self.present;
        let homes = &self.homes[pool];
        let cores = &mut self.busy[pool];
        debug_assert!(
            only.is_none_or(|o| o < cores.len()),
            "core {only:?} of {}",
            cores.len()
        );
        for core in cores.iter_mut() {
            let done = core.partition_point(|&(_, end)| end <= present);
            core.drain(..done);
        }
        let (core, (start, at)) = cores
            .iter()
            .enumerate()
            .filter(|&(i, _)| only.is_none_or(|o| o == i))
            .map(|(i, c)| (i, fit(c)))
            .min_by(|a, b| {
                let start = a.1 .0.total_cmp(&b.1 .0);
                start.then(homes[a.0].cmp(&homes[b.0]))
            })
            .unwrap_or((0, (ready, 0)));
        let end = start + seconds;
        cores[core].insert(at, (start, end));
        end
    }
}

#[cfg(test)]
mod tests {
    use super::Cores;

    #[test]
    fn work_ready_earlier_fills_the_first_gap_that_fits_before_work_booked_ahead() {
        let mut c = Cores::new(1, 1);
        // Booked ahead: [10, 11).
        assert_eq!(c.run(0, 10.0, 1.0), 11.0);
        // Ready at 0: it fits before, at [0, 4), then [4, 9).
        assert_eq!(c.run(0, 0.0, 4.0), 4.0);
        assert_eq!(c.run(0, 0.0, 5.0), 9.0);
        // The gap [9, 10) is too short for 2: after the booked work.
        assert_eq!(c.run(0, 0.0, 2.0), 13.0);
        // No work takes no core.
        assert_eq!(c.run(0, 2.0, 0.0), 2.0);
    }

    #[test]
    fn work_goes_to_the_core_where_it_starts_first() {
        let mut c = Cores::new(1, 2);
        assert_eq!(c.run(0, 0.0, 5.0), 5.0);
        assert_eq!(c.run(0, 0.0, 1.0), 1.0);
        assert_eq!(c.run(0, 0.0, 1.0), 2.0);
        assert_eq!(c.run(0, 1.5, 1.0), 3.0);
    }

    #[test]
    fn work_held_to_its_core_waits_there_while_another_is_free() {
        let mut c = Cores::new(1, 2);
        assert_eq!(c.run_on(0, Some(0), 0.0, 5.0), 5.0);
        assert_eq!(c.run_on(0, Some(0), 0.0, 1.0), 6.0);
        // Core 1 was free all along: work that may move takes it.
        assert_eq!(c.run(0, 0.0, 1.0), 1.0);
        assert_eq!(c.run_on(0, Some(1), 0.0, 1.0), 2.0);
    }

    #[test]
    fn work_that_may_move_takes_the_core_fewer_ranks_call_home_when_both_are_free() {
        let mut c = Cores::new(1, 2);
        c.home(0, 0);
        c.home(0, 0);
        c.home(0, 1);
        assert_eq!(c.run(0, 0.0, 1.0), 1.0);
        assert_eq!(c.busy[0][1], vec![(0.0, 1.0)]);
        // Core 0 starts it earlier: it goes there all the same.
        assert_eq!(c.run(0, 0.5, 1.0), 1.5);
        assert_eq!(c.busy[0][0], vec![(0.5, 1.5)]);
        // Without homes the first of the free cores takes it, as before.
        let mut c = Cores::new(1, 2);
        assert_eq!(c.run(0, 0.0, 1.0), 1.0);
        assert_eq!(c.busy[0][0], vec![(0.0, 1.0)]);
    }

    #[test]
    fn pools_are_apart_and_the_past_is_forgotten() {
        let mut c = Cores::new(2, 1);
        assert_eq!(c.run(0, 0.0, 5.0), 5.0);
        assert_eq!(c.run(1, 0.0, 1.0), 1.0);
        c.advance(6.0);
        assert_eq!(c.run(0, 6.0, 1.0), 7.0);
        assert_eq!(c.busy[0][0], vec![(6.0, 7.0)]);
    }
}
