//! What the soak does to each job, drawn from one seed: how long its ranks play, and for the
//! killed ones what is killed, with which signal, at which point.

use std::fmt;

/// splitmix64: a small seeded generator, plenty for choosing jobs and delays.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator whose whole sequence follows from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// Shuffles `v` in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The process a kill hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// The job's `tarantella`.
    Launcher,
    /// One rank's process.
    Rank(u16),
}

/// The signal a kill sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sig {
    /// SIGKILL: no chance to clean up.
    Kill,
    /// SIGTERM: the polite stop.
    Term,
    /// SIGSTOP: a hung process (ranks only); the job must still end.
    Stop,
}

impl Sig {
    /// The signal for `kill(2)`.
    pub fn signal(self) -> nix::sys::signal::Signal {
        use nix::sys::signal::Signal;
        match self {
            Sig::Kill => Signal::SIGKILL,
            Sig::Term => Signal::SIGTERM,
            Sig::Stop => Signal::SIGSTOP,
        }
    }
}

/// When a kill is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Point {
    /// Launcher: a random delay after `tarantella` was spawned, up to twice the median time
    /// until the first rank entered `main` (while it starts the ranks).
    /// Rank: as soon as the rank's `start` line arrives, i.e. as it enters `Context::init`.
    Start,
    /// A random delay after the first (launcher) or the target's (rank) `start` line, up to
    /// twice the median `Context::init` time so far: while the ranks meet.
    Init,
    /// A random delay after every rank is past `Context::init`, up to the job's run time.
    Run,
}

impl Point {
    /// Every point, in order.
    pub const ALL: [Point; 3] = [Point::Start, Point::Init, Point::Run];

    /// The point's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Point::Start => "start",
            Point::Init => "init",
            Point::Run => "run",
        }
    }
}

/// The kind of a kill: what, with which signal (the rank is drawn per job).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// `tarantella` gets the signal.
    Launcher(Sig),
    /// One rank gets it.
    Rank(Sig),
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 5] = [
        Kind::Launcher(Sig::Kill),
        Kind::Launcher(Sig::Term),
        Kind::Rank(Sig::Kill),
        Kind::Rank(Sig::Term),
        Kind::Rank(Sig::Stop),
    ];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (who, sig) = match self {
            Kind::Launcher(s) => ("launcher", s),
            Kind::Rank(s) => ("rank", s),
        };
        let sig = match sig {
            Sig::Kill => "SIGKILL",
            Sig::Term => "SIGTERM",
            Sig::Stop => "SIGSTOP",
        };
        write!(f, "{who} {sig}")
    }
}

/// One planned kill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kill {
    /// What gets the signal.
    pub target: Target,
    /// Which signal.
    pub sig: Sig,
    /// When, relative to the job's progress.
    pub point: Point,
    /// A number in `0..1_000_000` that picks the delay within the point's window.
    pub draw: u64,
}

impl Kill {
    /// The kill's kind (its target without the rank number).
    pub fn kind(&self) -> Kind {
        match self.target {
            Target::Launcher => Kind::Launcher(self.sig),
            Target::Rank(_) => Kind::Rank(self.sig),
        }
    }

    /// The delay within a window of `window_us` microseconds.
    pub fn delay_us(&self, window_us: u64) -> u64 {
        window_us * self.draw / 1_000_000
    }
}

/// What one job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobPlan {
    /// How long rank 0 plays after the segment is created (`soak-rank --run-ms`).
    pub run_ms: u64,
    /// The kill, for the killed jobs.
    pub kill: Option<Kill>,
}

/// The plan of every job: `round(jobs × fraction)` of them killed, the kinds and points
/// spread evenly over the killed jobs in a random order, the jobs chosen at random.
pub fn plan(jobs: usize, fraction: f64, ranks: u16, run_ms: (u64, u64), seed: u64) -> Vec<JobPlan> {
    let mut rng = Rng::new(seed);
    let killed = ((jobs as f64 * fraction.clamp(0.0, 1.0)).round() as usize).min(jobs);
    let mut order: Vec<usize> = (0..jobs).collect();
    rng.shuffle(&mut order);
    let mut combos = Vec::new();
    for kind in Kind::ALL {
        for point in Point::ALL {
            combos.push((kind, point));
        }
    }
    // Every kind and point in turn from a random one, so that a short run covers the later
    // ones too.
    let first = rng.below(combos.len() as u64) as usize;
    let mut kinds: Vec<(Kind, Point)> = (0..killed)
        .map(|i| combos[(first + i) % combos.len()])
        .collect();
    rng.shuffle(&mut kinds);
    let mut plans: Vec<JobPlan> = (0..jobs)
        .map(|_| JobPlan {
            run_ms: rng.between(run_ms.0, run_ms.1),
            kill: None,
        })
        .collect();
    for (&job, &(kind, point)) in order.iter().zip(&kinds) {
        let (target, sig) = match kind {
            Kind::Launcher(s) => (Target::Launcher, s),
            Kind::Rank(s) => (Target::Rank(rng.below(u64::from(ranks)) as u16), s),
        };
        plans[job].kill = Some(Kill {
            target,
            sig,
            point,
            draw: rng.below(1_000_000),
        });
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_follows_from_the_seed_and_kills_the_fraction_evenly() {
        let a = plan(1000, 0.1, 2, (10, 100), 7);
        assert_eq!(a, plan(1000, 0.1, 2, (10, 100), 7));
        assert_ne!(a, plan(1000, 0.1, 2, (10, 100), 8));
        let killed: Vec<Kill> = a.iter().filter_map(|p| p.kill).collect();
        assert_eq!(killed.len(), 100);
        for kind in Kind::ALL {
            for point in Point::ALL {
                let n = killed
                    .iter()
                    .filter(|k| k.kind() == kind && k.point == point)
                    .count();
                assert!((6..=7).contains(&n), "{kind} {point:?}: {n}");
            }
        }
        assert!(a.iter().all(|p| (10..=100).contains(&p.run_ms)));
        assert!(killed.iter().all(|k| match k.target {
            Target::Rank(r) => r < 2,
            Target::Launcher => k.sig != Sig::Stop,
        }));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::new(1);
        assert!((0..10_000).all(|_| r.below(3) < 3));
        assert_eq!(r.below(0), 0);
        assert!((0..1000).all(|_| (5..=6).contains(&r.between(5, 6))));
    }
}
