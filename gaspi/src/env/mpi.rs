//! Processes started by `mpirun`/`mpiexec`: this runtime does not bootstrap through MPI
//! (PMI), so such a job is refused rather than left to run as N separate 1-rank jobs.

use crate::error::{Error, Result};

/// The variable that gives the number of processes, and who sets it.
const MPI_SIZE_VARIABLES: [(&str, &str); 2] = [
    ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"),
    (
        "PMI_SIZE",
        "mpirun/mpiexec (MPICH, Intel MPI or another PMI launcher)",
    ),
];

/// An error when an MPI launcher started this process as one of more than one; `Ok` for a
/// 1-process `mpirun` and for no MPI launcher at all.
pub(super) fn refuse_mpi_launch(get: &impl Fn(&str) -> Option<String>) -> Result<()> {
    for (variable, launcher) in MPI_SIZE_VARIABLES {
        let Some(v) = get(variable) else { continue };
        let n: u32 = v.trim().parse().map_err(|_| {
            Error::Env(format!(
                "{variable}={v:?} is not a number of processes (set by {launcher})"
            ))
        })?;
        if n > 1 {
            return Err(Error::Env(format!(
                "started by {launcher} with {n} processes ({variable}={n}), but this runtime \
                 does not bootstrap through MPI: each process would be a separate 1-rank job. \
                 Start it with `tarantella -n {n} -- <program> [args]` instead \
                 (or `srun -n {n} <program> [args]` inside a Slurm allocation)"
            )));
        }
    }
    Ok(())
}
