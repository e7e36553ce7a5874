//! Two network namespaces as two hosts, for tests of what crosses hosts.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::Arc;

use super::job::Job;
use crate::types::Rank;

/// Two network namespaces joined by a veth pair: two hosts on one machine, host `h` at
/// [`TwoHosts::ADDRESSES`]`[h]`, for tests of what crosses hosts (root needed). Deleted, and
/// the veth with them, when dropped.
pub struct TwoHosts {
    names: [String; 2],
    /// The first end of the veth pair: gone with its namespace once moved there, deleted
    /// on drop if creation failed before.
    veth: String,
}

impl TwoHosts {
    /// The hosts' addresses (each namespace has its own network, so concurrent pairs do not
    /// collide).
    pub const ADDRESSES: [Ipv4Addr; 2] =
        [Ipv4Addr::new(10, 199, 0, 1), Ipv4Addr::new(10, 199, 0, 2)];

    /// Creates the pair, named after `tag` (a few characters telling concurrent tests of
    /// one binary apart) and this process; the error names the `ip` command that failed.
    pub fn create(tag: &str) -> Result<TwoHosts, String> {
        let id = std::process::id() % 100_000;
        let names = [format!("tnt-{tag}a{id}"), format!("tnt-{tag}b{id}")];
        let run = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        };
        let veth = [format!("v{tag}a{id}"), format!("v{tag}b{id}")];
        // Dropped (and the namespaces and the veth deleted) on any failure below.
        let hosts = TwoHosts {
            names: names.clone(),
            veth: veth[0].clone(),
        };
        run(&["netns", "add", &names[0]])?;
        run(&["netns", "add", &names[1]])?;
        run(&[
            "link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1],
        ])?;
        for h in 0..2 {
            run(&["link", "set", &veth[h], "netns", &names[h]])?;
            let address = format!("{}/24", Self::ADDRESSES[h]);
            run(&["-n", &names[h], "addr", "add", &address, "dev", &veth[h]])?;
            run(&["-n", &names[h], "link", "set", &veth[h], "up"])?;
            run(&["-n", &names[h], "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// The namespace of host `h` (0 or 1), for `ip netns exec`.
    pub fn name(&self, h: usize) -> &str {
        &self.names[h]
    }

    /// Runs `job`'s rank `r` on host `host_of(r)` (0 or 1; anything else is a bug of the
    /// test, which panics), the rendezvous on host 0 (where rank 0 must be).
    pub fn place(&self, job: &mut Job, host_of: impl Fn(Rank) -> usize + Send + Sync + 'static) {
        let names = self.names.clone();
        job.rendezvous_ip = IpAddr::V4(Self::ADDRESSES[0]);
        job.wrapper = Some(Arc::new(move |r| {
            let h = host_of(r);
            let name = names
                .get(h)
                .unwrap_or_else(|| panic!("rank {r} placed on host {h} of two"));
            vec!["ip".into(), "netns".into(), "exec".into(), name.clone()]
        }));
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
    }
}
