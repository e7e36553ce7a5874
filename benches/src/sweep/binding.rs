//! Binding a rank to one CPU (`--map-cpu`), before it starts any thread: the threads gaspi
//! starts inherit the binding, as under srun's `--cpu-bind` or mpirun's `--bind-to core`.

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Binds the calling thread, and every thread it starts from now on, to `cpu`.
pub fn bind_to_cpu(cpu: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|_| {
        format!(
            "CPU {cpu} is beyond the {} a CPU set can hold",
            CpuSet::count()
        )
    })?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| format!("cannot bind to CPU {cpu}: {e} (is it one of this host's?)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sched::sched_getaffinity;

    #[test]
    fn a_bound_thread_and_the_threads_it_starts_run_on_that_cpu_alone() {
        // In a thread of its own: the binding must not reach the test harness's threads.
        std::thread::spawn(|| {
            bind_to_cpu(0).unwrap();
            let only_cpu_0 = |set: CpuSet| {
                (0..CpuSet::count())
                    .filter(|&c| set.is_set(c).unwrap())
                    .eq([0])
            };
            assert!(only_cpu_0(sched_getaffinity(Pid::from_raw(0)).unwrap()));
            let child = std::thread::spawn(|| sched_getaffinity(Pid::from_raw(0)).unwrap());
            assert!(only_cpu_0(child.join().unwrap()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_the_host_lacks_is_an_error_that_names_it() {
        let e = std::thread::spawn(|| bind_to_cpu(CpuSet::count() - 1))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(e.contains(&format!("CPU {}", CpuSet::count() - 1)), "{e}");
        let e = bind_to_cpu(CpuSet::count()).unwrap_err();
        assert!(e.contains("beyond"), "{e}");
    }
}
