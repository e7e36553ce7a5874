//! Which host each rank runs on: filling each host in turn (mpirun's `--map-by slot`, the
//! default) or dealing ranks round-robin over the hosts (`--map-by node`).

use super::RankPlan;
use crate::cli::MapBy;

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
