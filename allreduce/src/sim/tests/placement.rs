//! Where ranks' work runs on a host with more ranks than cores (`ranks_keep_cores`): dealt
//! to the cores in blocks and held there, or free to take whichever core starts it first.

use super::super::*;
use crate::Algorithm;

/// Two cores where only copies and reductions cost time, at one rate whatever the cache
/// holds, and nothing crosses between the cores' caches.
fn work_alone(keep: bool) -> Machine {
    Machine {
        cores: 2,
        hosts_share_cores: true,
        shm_alpha: 0.0,
        shm_notify_alpha: 0.0,
        recv_overhead: 0.0,
        oversub_wake: 0.0,
        shm_copy_bw_cache: 1e9,
        shm_copy_bw_mem: 1e9,
        reduce_bw_cache: 1e9,
        reduce_bw_mem: 1e9,
        host_mem_bw: 1e15,
        llc_by_reuse: false,
        core_cache_bytes: 0,
        private_bytes: 0,
        oversub_migration: 0.0,
        ranks_keep_cores: keep,
        ..Machine::shm()
    }
}

#[test]
fn a_pools_ranks_are_dealt_to_its_cores_in_blocks_only_where_they_outnumber_them() {
    let keep = work_alone(true);
    assert_eq!(
        keep.home_cores(&Cluster::new(3, 3)),
        [Some(0), Some(0), Some(1)]
    );
    assert_eq!(
        keep.home_cores(&Cluster::new(5, 5)),
        [Some(0), Some(0), Some(0), Some(1), Some(1)]
    );
    // A core per rank: any free core takes the work.
    assert_eq!(keep.home_cores(&Cluster::new(2, 2)), [None, None]);
    assert_eq!(work_alone(false).home_cores(&Cluster::new(3, 3)), [None; 3]);
    // Hosts with cores of their own deal their own ranks; one with a core each is free.
    let own = Machine {
        hosts_share_cores: false,
        ..keep
    };
    assert_eq!(
        own.home_cores(&Cluster::new(5, 3)),
        [Some(0), Some(0), Some(1), None, None]
    );
}

#[test]
fn three_ranks_held_to_two_cores_take_two_ranks_work_per_ring_step() {
    let time = |keep: bool, ranks: usize| {
        let c = Cluster::new(ranks, ranks);
        predict(Algorithm::Ring, &c, 12 << 20, 4, &work_alone(keep))
            .unwrap()
            .seconds
    };
    // Every rank copies and reduces the same bytes at each step. Held, two ranks take
    // turns on one core while the third has the other to itself: each step takes two
    // ranks' work. Free, three ranks' work spreads over both cores: one and a half.
    let ratio = time(true, 3) / time(false, 3);
    assert!((ratio - 2.0 / 1.5).abs() < 0.01, "{ratio}");
    // A core per rank: nothing to hold.
    assert_eq!(time(true, 2), time(false, 2));
}
