//! Which rank runs on which host, and where among that host's ranks: filling each host in
//! turn (mpirun's `--map-by slot`, the default) or dealing ranks round-robin over the hosts
//! (`--map-by node`), within the slots of each host.

use crate::cli::{Cli, MapBy};
use crate::error::{Error, Result};
use crate::{hostfile, hostlist};

/// Where one rank of a local or ssh job runs.
#[derive(Clone, Debug)]
pub struct RankPlan {
    /// The rank, `0..N-1`.
    pub rank: usize,
    /// The ssh destination (`[user@]host`) of the rank's host; `None` for this host (local
    /// mode).
    pub host: Option<String>,
    /// The rank's index among the ranks of its host, `0..local_nranks-1`.
    pub local_rank: usize,
    /// How many ranks run on the rank's host.
    pub local_nranks: usize,
    /// Index of the rank's host among the hosts that run ranks, in host order.
    pub node_rank: usize,
}

/// The ranks of a job on this host alone (no `--hostfile` or `-H`): `-n`, else the ranks
/// per host, else one rank, as torchrun's `--nproc-per-node` defaults, GPUs or not.
pub fn on_this_host(cli: &Cli) -> Result<Vec<RankPlan>> {
    let per_node = cli.ranks_per_node();
    let n = cli.nranks.or(per_node).unwrap_or(1);
    if let Some(k) = per_node.filter(|&k| k < n) {
        return Err(Error::NotEnoughSlots {
            requested: n,
            available: k,
            detail: format!(
                "{} {k} on this host, no --hostfile",
                cli.ranks_per_node_flag()
            ),
        });
    }
    Ok(place(&[(None, n)], n, cli.map_by))
}

/// The ranks of a job on the hosts of `--hostfile` or `-H`: `-n` of them, else as many as
/// the hosts have slots (the ranks per host, when given, stand for every host's slots).
pub fn on_hosts(cli: &Cli) -> Result<Vec<RankPlan>> {
    let per_node = cli.ranks_per_node();
    let hosts = match &cli.hostfile {
        Some(path) => hostfile::read(path)?,
        None => hostlist::parse(&cli.hosts)?,
    };
    // More ranks per host than a host's slots is a mistake to report, not a request to
    // quietly lower (the job would run with fewer ranks than asked).
    if let Some(k) = per_node {
        if let Some(h) = hosts.iter().find(|h| h.limit().is_some_and(|l| l < k)) {
            return Err(Error::PerNodeAboveSlots {
                flag: cli.ranks_per_node_flag(),
                per_node: k,
                host: h.name.clone(),
                limit: h.limit().unwrap_or_default(),
                limit_name: if h.max_slots.is_some() {
                    "max_slots"
                } else {
                    "slots"
                },
            });
        }
    }
    let caps: Vec<(Option<String>, usize)> = hosts
        .iter()
        .map(|h| (Some(h.name.clone()), per_node.or(h.slots).unwrap_or(1)))
        .collect();
    let total: usize = caps.iter().map(|c| c.1).sum();
    let n = cli.nranks.unwrap_or(total);
    if n > total {
        let detail = caps
            .iter()
            .map(|(h, c)| format!("{}: {c}", h.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::NotEnoughSlots {
            requested: n,
            available: total,
            detail,
        });
    }
    Ok(place(&caps, n, cli.map_by))
}

/// The host of an ssh destination, as the ranks reach it: `node1` of `user@node1`.
pub fn host_address(destination: &str) -> &str {
    destination.rsplit('@').next().unwrap_or(destination)
}

/// Places `n` ranks on hosts of the given capacities (`None` = this host), in host order;
/// `n` is at most the total capacity.
pub fn place(caps: &[(Option<String>, usize)], n: usize, by: MapBy) -> Vec<RankPlan> {
    let mut host_of_rank: Vec<usize> = Vec::with_capacity(n);
    match by {
        MapBy::Slot => {
            for (h, (_, cap)) in caps.iter().enumerate() {
                let here = (*cap).min(n - host_of_rank.len());
                host_of_rank.extend(std::iter::repeat_n(h, here));
            }
        }
        MapBy::Node => {
            let mut left: Vec<usize> = caps.iter().map(|(_, cap)| *cap).collect();
            while host_of_rank.len() < n && left.iter().any(|&l| l > 0) {
                for (h, l) in left.iter_mut().enumerate() {
                    if *l > 0 && host_of_rank.len() < n {
                        *l -= 1;
                        host_of_rank.push(h);
                    }
                }
            }
        }
    }
    let mut per_host = vec![0usize; caps.len()];
    for &h in &host_of_rank {
        per_host[h] += 1;
    }
    // Node ranks count the hosts that run a rank, in host order (torchrun's NODE_RANK).
    let mut node_of_host = vec![0usize; caps.len()];
    let mut nodes = 0;
    for (h, &count) in per_host.iter().enumerate() {
        if count > 0 {
            node_of_host[h] = nodes;
            nodes += 1;
        }
    }
    let mut seen = vec![0usize; caps.len()];
    host_of_rank
        .iter()
        .enumerate()
        .map(|(rank, &h)| {
            seen[h] += 1;
            RankPlan {
                rank,
                host: caps[h].0.clone(),
                local_rank: seen[h] - 1,
                local_nranks: per_host[h],
                node_rank: node_of_host[h],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[(&str, usize)]) -> Vec<(Option<String>, usize)> {
        list.iter()
            .map(|(h, c)| (Some(h.to_string()), *c))
            .collect()
    }

    /// (rank, host, local rank, local ranks, node rank) of every rank.
    fn table(ranks: &[RankPlan]) -> Vec<(usize, String, usize, usize, usize)> {
        ranks
            .iter()
            .map(|r| {
                let host = r.host.clone().unwrap();
                (r.rank, host, r.local_rank, r.local_nranks, r.node_rank)
            })
            .collect()
    }

    #[test]
    fn by_slot_fills_hosts_in_order() {
        let r = place(&caps(&[("a", 2), ("b", 2), ("c", 2)]), 3, MapBy::Slot);
        assert_eq!(
            table(&r),
            [
                (0, "a".into(), 0, 2, 0),
                (1, "a".into(), 1, 2, 0),
                (2, "b".into(), 0, 1, 1)
            ]
        );
    }

    #[test]
    fn by_node_deals_ranks_round_robin_skipping_full_hosts() {
        let r = place(&caps(&[("a", 3), ("b", 1), ("c", 2)]), 5, MapBy::Node);
        assert_eq!(
            table(&r),
            [
                (0, "a".into(), 0, 2, 0),
                (1, "b".into(), 0, 1, 1),
                (2, "c".into(), 0, 2, 2),
                (3, "a".into(), 1, 2, 0),
                (4, "c".into(), 1, 2, 2)
            ]
        );
        // Fewer ranks than hosts: the unused hosts get no node rank.
        let r = place(&caps(&[("a", 2), ("b", 2), ("c", 2)]), 2, MapBy::Node);
        assert_eq!(
            table(&r),
            [(0, "a".into(), 0, 1, 0), (1, "b".into(), 0, 1, 1)]
        );
    }

    #[test]
    fn this_host_alone() {
        for by in [MapBy::Slot, MapBy::Node] {
            let r = place(&[(None, 3)], 3, by);
            let local: Vec<(usize, usize, usize)> = r
                .iter()
                .map(|r| (r.local_rank, r.local_nranks, r.node_rank))
                .collect();
            assert_eq!(local, [(0, 3, 0), (1, 3, 0), (2, 3, 0)], "{by:?}");
        }
    }
}
