//! Which ranks share a host: the layout hierarchical collectives are built on.
//!
//! A *host* is what shared memory can span: the same kernel boot and the same network
//! namespace (containers and network namespaces used as hosts in tests count as hosts of
//! their own). Start-up learns every rank's host from the rendezvous and numbers the hosts
//! `0..` in the order of their lowest rank, so every rank computes the same numbering.

use crate::types::Rank;

/// The host of every rank of the job (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Per rank: its host's number.
    host_of: Vec<u16>,
    /// Number of hosts.
    hosts: u16,
}

impl Topology {
    /// The topology in which rank `r` runs on the host named `names[r]`; hosts are numbered
    /// by their lowest rank. Any names work (start-up passes its host identities; a model of
    /// a machine passes whatever distinguishes its hosts).
    pub fn from_names<S: PartialEq>(names: &[S]) -> Topology {
        let mut host_of = Vec::with_capacity(names.len());
        let mut firsts: Vec<&S> = Vec::new();
        for name in names {
            let host = match firsts.iter().position(|f| *f == name) {
                Some(h) => h,
                None => {
                    firsts.push(name);
                    firsts.len() - 1
                }
            };
            host_of.push(host as u16);
        }
        Topology {
            host_of,
            hosts: firsts.len() as u16,
        }
    }

    /// A job of `hosts × per_host` ranks placed by host: ranks `h·per_host ..` on host `h`
    /// (how the launcher places ranks by default).
    pub fn blocked(hosts: u16, per_host: u16) -> Topology {
        let names: Vec<u16> = (0..hosts)
            .flat_map(|h| std::iter::repeat_n(h, usize::from(per_host)))
            .collect();
        Topology::from_names(&names)
    }

    /// Number of ranks.
    pub fn num_ranks(&self) -> usize {
        self.host_of.len()
    }

    /// Number of hosts.
    pub fn num_hosts(&self) -> u16 {
        self.hosts
    }

    /// The host `rank` runs on; `None` for a rank outside the job.
    pub fn host_of(&self, rank: Rank) -> Option<u16> {
        self.host_of.get(rank.index()).copied()
    }

    /// How many ranks share `rank`'s host (0 for a rank outside the job).
    pub fn ranks_on_host_of(&self, rank: Rank) -> usize {
        match self.host_of(rank) {
            Some(h) => self.host_of.iter().filter(|&&o| o == h).count(),
            None => 0,
        }
    }

    /// `members` grouped by host: one list per host that holds any of them, hosts in the
    /// order of their lowest member, each list in the order the members are given. Ranks
    /// outside the job are left out.
    pub fn split_by_host(&self, members: &[Rank]) -> Vec<Vec<Rank>> {
        let mut order: Vec<u16> = Vec::new();
        let mut lists: Vec<Vec<Rank>> = Vec::new();
        for &m in members {
            let Some(h) = self.host_of(m) else { continue };
            match order.iter().position(|&o| o == h) {
                Some(i) => lists[i].push(m),
                None => {
                    order.push(h);
                    lists.push(vec![m]);
                }
            }
        }
        lists
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_numbered_by_their_lowest_rank() {
        let t = Topology::from_names(&["b", "a", "b", "c", "a"]);
        assert_eq!(t.num_hosts(), 3);
        assert_eq!(t.num_ranks(), 5);
        let hosts: Vec<_> = (0..5).map(|r| t.host_of(Rank(r)).unwrap()).collect();
        assert_eq!(hosts, [0, 1, 0, 2, 1]);
        assert_eq!(t.host_of(Rank(5)), None);
        assert_eq!(t.ranks_on_host_of(Rank(1)), 2);
        assert_eq!(t.ranks_on_host_of(Rank(3)), 1);
        assert_eq!(t.ranks_on_host_of(Rank(9)), 0);
    }

    #[test]
    fn members_split_by_host_in_member_order() {
        let t = Topology::from_names(&["b", "a", "b", "c", "a"]);
        let ranks = |v: &[u16]| v.iter().map(|&r| Rank(r)).collect::<Vec<_>>();
        assert_eq!(
            t.split_by_host(&ranks(&[0, 1, 2, 3, 4])),
            [ranks(&[0, 2]), ranks(&[1, 4]), ranks(&[3])]
        );
        assert_eq!(
            t.split_by_host(&ranks(&[4, 3, 9])),
            [ranks(&[4]), ranks(&[3])]
        );
        assert!(t.split_by_host(&[]).is_empty());
    }

    #[test]
    fn blocked_places_consecutive_ranks_together() {
        let t = Topology::blocked(2, 3);
        assert_eq!(t.num_hosts(), 2);
        assert_eq!(t.host_of(Rank(2)), Some(0));
        assert_eq!(t.host_of(Rank(3)), Some(1));
        assert_eq!(Topology::blocked(1, 1).num_hosts(), 1);
    }
}
