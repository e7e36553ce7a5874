//! `--pin-to-socket`, `--pin-memory-to-socket` and `-N`: each rank bound to one socket (NUMA
//! node) of its host by `numactl`, the sockets dealt round-robin by local rank.

use crate::cli::Cli;
use crate::error::{Error, Result};
use crate::hardware;
use crate::which::find_on_path;

/// How the ranks are bound to the sockets of their host.
#[derive(Clone, Copy, Debug)]
pub struct Pinning {
    /// Bind the rank's CPUs (`numactl --cpunodebind`): `--pin-to-socket` or `-N`.
    pub cpus: bool,
    /// Bind the rank's memory (`numactl --membind`): `--pin-memory-to-socket`.
    pub memory: bool,
    /// NUMA nodes per host (this host's count; hosts are assumed alike).
    pub sockets: usize,
}

impl Pinning {
    /// The pinning the options ask for, `None` when they ask for none. When the ranks run
    /// on this host (`ranks_here`), `numactl` must be installed: without it every rank
    /// would fail to start.
    pub fn from_cli(cli: &Cli, ranks_here: bool) -> Result<Option<Pinning>> {
        if !(cli.pins_cpus() || cli.pin_memory_to_socket) {
            return Ok(None);
        }
        let pinning = Pinning {
            cpus: cli.pins_cpus(),
            memory: cli.pin_memory_to_socket,
            sockets: hardware::count_numa_nodes(),
        };
        if ranks_here && find_on_path("numactl").is_none() {
            return Err(Error::NumactlMissing {
                what: if cli.pin_to_socket {
                    "--pin-to-socket"
                } else if cli.numa {
                    "-N/--NUMA"
                } else {
                    "--pin-memory-to-socket"
                },
            });
        }
        Ok(Some(pinning))
    }

    /// The socket of the rank with local rank `local_rank`: round-robin over the sockets.
    pub fn socket(&self, local_rank: usize) -> usize {
        local_rank % self.sockets.max(1)
    }

    /// The `numactl ...` words in front of the command of the rank with local rank
    /// `local_rank`.
    pub fn numactl_prefix(&self, local_rank: usize) -> Vec<String> {
        let node = self.socket(local_rank);
        let mut argv = vec!["numactl".to_string()];
        if self.cpus {
            argv.push(format!("--cpunodebind={node}"));
        }
        if self.memory {
            argv.push(format!("--membind={node}"));
        }
        argv
    }
}
