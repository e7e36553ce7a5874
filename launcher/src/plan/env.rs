//! The environment of the ranks beyond gaspi's own variables: the names other launchers
//! give the same facts (torchrun's `RANK`, `WORLD_SIZE`, ..., GPI-2's `GASPI_SOCKET`,
//! `GASPI_MFILE`, `GASPI_MASTER`), and what the user adds with `-x`, which may not replace
//! any variable tarantella sets.

use gaspi::env as genv;
use gaspi::env::torchrun::{
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
};

use super::{host_address, Mode, Plan, RankPlan};
use crate::error::{Error, Result};
use crate::rundir;

/// torchrun's index of the rank's host among the hosts of the job. The runtime has no use
/// for it (so `gaspi::env::torchrun` does not name it); programs written for torchrun do.
pub const NODE_RANK: &str = "NODE_RANK";
/// All of torchrun's variables that every rank gets, in torchrun's order. PyTorch programs
/// read them (`torch.distributed`'s `env://`, Lightning, ...). Our own bootstrap uses
/// `GASPI_RENDEZVOUS`: `MASTER_ADDR` and `MASTER_PORT` are for the program's own use, a
/// free port of their own.
pub const TORCHRUN_VARIABLES: [&str; 7] = [
    RANK,
    WORLD_SIZE,
    LOCAL_RANK,
    LOCAL_WORLD_SIZE,
    NODE_RANK,
    MASTER_ADDR,
    MASTER_PORT,
];

/// Set with `-N`: a GPI-2 program binds itself to the CPUs of socket `GASPI_SOCKET`.
pub const GASPI_SET_NUMA_SOCKET: &str = "GASPI_SET_NUMA_SOCKET";

/// The machine file of `ranks`: rank r's host on line r, as GPI-2's `gaspi_run` passes it in
/// `GASPI_MFILE`. Ranks on this host get its name (what `hostname` prints), as `gaspi_run`
/// names the host it runs on; ranks on other hosts their hostfile name, without `user@`.
pub fn machine_file(ranks: &[RankPlan]) -> Vec<String> {
    let here = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    ranks
        .iter()
        .map(|r| {
            r.host
                .as_deref()
                .map_or(here.clone(), |h| host_address(h).to_string())
        })
        .collect()
}

impl Plan {
    /// The variables other launchers set, under their names, so that programs written for
    /// them run unchanged.
    pub(super) fn convention_vars(&self, r: &RankPlan) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = [
            (RANK, r.rank),
            (WORLD_SIZE, self.nranks),
            (LOCAL_RANK, r.local_rank),
            (LOCAL_WORLD_SIZE, r.local_nranks),
            (NODE_RANK, r.node_rank),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        vars.push((MASTER_ADDR.to_string(), self.master_addr()));
        if let Some(port) = self.master_port {
            vars.push((MASTER_PORT.to_string(), port.to_string()));
        }
        // GPI-2's `gaspi_run` numbers the ranks of a host 0..k-1 in GASPI_SOCKET (the socket
        // they bind to under -N). GPI-2 allows at most 256 ranks per host, and gaspi reads
        // it as a byte: a rank beyond gets none rather than one that fails its start.
        if let Ok(socket) = u8::try_from(r.local_rank) {
            vars.push((genv::SOCKET.to_string(), socket.to_string()));
        }
        if let Some(master) = self.machine_file.first() {
            vars.push((genv::MASTER.to_string(), master.clone()));
        }
        // For an ssh rank the file must be on its own host: its wrapper writes a copy there
        // and sets GASPI_MFILE itself (see spawn::ssh).
        if self.mode == Mode::Local {
            let path = self.run_dir.join(rundir::MACHINE_FILE);
            vars.push((genv::MFILE.to_string(), path.to_string_lossy().into_owned()));
        }
        vars
    }
}

/// The variables tarantella sets on every rank that `-x` must not replace, each with what to
/// do instead. They wire the job together (rank numbers, sizes, rendezvous, token, id,
/// timeout, transport) or mark its processes for `--cleanup`: a value from `-x` would break
/// the job or its teardown, or put the token on a command line. The other launchers' names
/// for the same facts are refused too: a rank whose `RANK` disagrees with its `GASPI_RANK`
/// is a job at odds with itself. `GASPI_LOG` stays open to `-x`: it only filters the
/// runtime's log, finer than `--log-level` can.
const LAUNCHER_VARIABLES: &[(&str, &str)] = &[
    (genv::RANK, "tarantella numbers the ranks"),
    (genv::NRANKS, "use -n"),
    (
        genv::LOCAL_RANK,
        "tarantella numbers the ranks on each host",
    ),
    (genv::LOCAL_NRANKS, "use --n-per-node"),
    (
        genv::RENDEZVOUS,
        "tarantella picks a free port on the first host",
    ),
    (genv::JOB_TOKEN, "tarantella draws a random one per run"),
    (genv::JOB_ID, "use --job-id"),
    (genv::INIT_TIMEOUT_MS, "use --timeout"),
    (genv::TRANSPORT, "use --transport"),
    (tnt_env::JOB_ID, "use --job-id"),
    (RANK, "tarantella numbers the ranks"),
    (WORLD_SIZE, "use -n"),
    (LOCAL_RANK, "tarantella numbers the ranks on each host"),
    (LOCAL_WORLD_SIZE, "use --n-per-node"),
    (NODE_RANK, "tarantella numbers the hosts"),
    (MASTER_ADDR, "it is rank 0's host"),
    (MASTER_PORT, "tarantella picks a free port on rank 0's host"),
    (genv::SOCKET, "tarantella numbers the ranks on each host"),
    (genv::MASTER, "it is rank 0's host"),
    (genv::MFILE, "tarantella writes the machine file of the job"),
    (GASPI_SET_NUMA_SOCKET, "use -N"),
];

/// One `-x`: `VAR=VALUE`, or `VAR` for the value `lookup` (tarantella's environment) gives
/// it, as mpirun's `-x VAR` forwards the launcher's value.
pub fn parse_export(x: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<(String, String)> {
    let (var, value) = match x.split_once('=') {
        Some((var, value)) => (var, Some(value.to_string())),
        None => (x, None),
    };
    let ok = !var.is_empty()
        && !var.as_bytes()[0].is_ascii_digit()
        && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(Error::BadExport(x.to_string()));
    }
    if let Some(&(var, instead)) = LAUNCHER_VARIABLES.iter().find(|(name, _)| *name == var) {
        return Err(Error::LauncherVariable { var, instead });
    }
    let value = match value {
        Some(v) => v,
        None => lookup(var).ok_or_else(|| Error::ExportUnset(var.to_string()))?,
    };
    Ok((var.to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_environment(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn exports_are_validated() {
        assert_eq!(
            parse_export("A_1=x=y", no_environment).unwrap(),
            ("A_1".into(), "x=y".into())
        );
        assert_eq!(
            parse_export("E=", no_environment).unwrap(),
            ("E".into(), String::new())
        );
        for bad in ["=v", "1A=v", "A-B=v", "", "A-B"] {
            assert!(
                matches!(parse_export(bad, no_environment), Err(Error::BadExport(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bare_name_exports_the_launchers_value_or_says_it_is_unset() {
        let shell = |var: &str| (var == "OMP_NUM_THREADS").then(|| "4".to_string());
        assert_eq!(
            parse_export("OMP_NUM_THREADS", shell).unwrap(),
            ("OMP_NUM_THREADS".into(), "4".into())
        );
        let err = parse_export("NOT_SET_HERE", shell).unwrap_err().to_string();
        assert_eq!(
            err,
            "-x NOT_SET_HERE: NOT_SET_HERE is not set in tarantella's environment; \
             set it, or give the value with -x NOT_SET_HERE=VALUE"
        );
        // The launcher's own variables are refused in this form too, before any lookup.
        let err = parse_export("GASPI_RANK", |_| panic!("looked up")).unwrap_err();
        assert!(matches!(err, Error::LauncherVariable { .. }), "{err}");
    }
}
