//! Per-step timings (`train --profile`): compute, exposed communication, optimizer.

use std::fmt;

/// One step's timings in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepTimes {
    /// Forward and backward until `backward` returned.
    pub compute_ms: f64,
    /// Waiting for gradient allreduces after backward returned (not hidden behind it).
    pub exposed_comm_ms: f64,
    /// The optimizer's update.
    pub optimizer_ms: f64,
    /// The whole step (data to optimizer), without metric aggregation and logging.
    pub step_ms: f64,
}

/// Medians over the profiled steps.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProfileSummary {
    /// Steps the medians are over.
    pub steps: usize,
    /// Each timing's median.
    pub median: StepTimes,
    /// On a GPU: bytes the caching allocator had handed out after step 2 and after the last
    /// step (equal when nothing leaks).
    pub device_bytes: Option<DeviceMemory>,
}

/// GPU memory in use by the rank (libtorch's caching allocator, bytes handed out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// After the second step (parameters, gradients, optimizer state, staging buffers).
    pub after_step_2: u64,
    /// After the last step.
    pub at_end: u64,
}

impl ProfileSummary {
    /// Medians over `steps`, skipping the first `warmup` (allocation, first-touch effects).
    pub fn from_steps(steps: &[StepTimes], warmup: usize) -> Option<Self> {
        let used = if steps.len() > warmup {
            &steps[warmup..]
        } else {
            steps
        };
        if used.is_empty() {
            return None;
        }
        let med = |f: fn(&StepTimes) -> f64| median(used.iter().map(f).collect());
        Some(ProfileSummary {
            steps: used.len(),
            median: StepTimes {
                compute_ms: med(|s| s.compute_ms),
                exposed_comm_ms: med(|s| s.exposed_comm_ms),
                optimizer_ms: med(|s| s.optimizer_ms),
                step_ms: med(|s| s.step_ms),
            },
            device_bytes: None,
        })
    }
}

impl fmt::Display for ProfileSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.median;
        let share = if m.step_ms > 0.0 {
            100.0 * m.exposed_comm_ms / m.step_ms
        } else {
            0.0
        };
        write!(
            f,
            "profile: median over {} steps: step {:.3} ms, compute {:.3} ms, exposed comm {:.3} ms \
             ({share:.1}% of step), optimizer {:.3} ms",
            self.steps, m.step_ms, m.compute_ms, m.exposed_comm_ms, m.optimizer_ms
        )?;
        if let Some(mem) = self.device_bytes {
            let mib = |b: u64| b as f64 / (1 << 20) as f64;
            write!(
                f,
                ", GPU memory {:.0} MiB after step 2, {:.0} MiB at the end",
                mib(mem.after_step_2),
                mib(mem.at_end)
            )?;
        }
        Ok(())
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_skip_warmup() {
        let s = |x: f64| StepTimes {
            compute_ms: x,
            exposed_comm_ms: x / 10.0,
            optimizer_ms: 1.0,
            step_ms: x + 1.0,
        };
        let steps = [s(100.0), s(3.0), s(1.0), s(2.0)];
        let p = ProfileSummary::from_steps(&steps, 1).unwrap();
        assert_eq!(p.steps, 3);
        assert_eq!(p.median.compute_ms, 2.0);
        assert_eq!(p.median.step_ms, 3.0);
        assert!(ProfileSummary::from_steps(&[], 0).is_none());
        assert!(p.to_string().contains("exposed comm 0.200 ms"));
        assert!(!p.to_string().contains("GPU memory"));
        let with_gpu = ProfileSummary {
            device_bytes: Some(DeviceMemory {
                after_step_2: 3 << 20,
                at_end: 3 << 20,
            }),
            ..p
        };
        assert!(with_gpu
            .to_string()
            .ends_with("GPU memory 3 MiB after step 2, 3 MiB at the end"));
    }
}
