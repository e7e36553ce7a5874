//! The caches' part of the model: what a copy, a reduction or a kernel's copy costs by
//! whether its bytes are in the last-level cache, by the share of the working set that fits
//! it or by how recently each byte was touched (`recency.rs`).

use super::super::program::{Op, Program};
use super::super::replay::replay;
use super::super::*;
use super::one_message;
use crate::Algorithm;

/// This VM over TCP with nothing but the kernel's copies costing time (1 GB/s from memory,
/// 4 GB/s from the cache), each byte's recency not tracked.
fn kernel_copies_alone() -> Machine {
    Machine {
        net_post_overhead: 0.0,
        net_send_cpu: 0.0,
        net_recv_cpu: 0.0,
        net_alpha: 0.0,
        net_stream_bw: 1e15,
        net_copy_bw: 1e9,
        net_copy_bw_cache: 4e9,
        recv_overhead: 0.0,
        oversub_net_wake: 0.0,
        oversub_wake: 0.0,
        host_mem_bw: 1e15,
        llc_by_reuse: false,
        ..Machine::tcp()
    }
}

/// When rank 1 has received a 1 MB message from rank 0 over TCP on `m`.
fn received_over_tcp(m: &Machine) -> f64 {
    let mut program = Program {
        ranks: one_message(1_000_000),
        segment_bytes: 1 << 20,
    };
    let tcp = Cluster {
        intra: Intra::Tcp,
        ..Cluster::new(2, 2)
    };
    replay(&mut program, m, &tcp, 1).unwrap().ends[0][1]
}

/// Where the working set decides what the cache holds (`llc_by_reuse` off), the kernel's
/// copies of a network message run at `net_copy_bw_cache` while the host's working set fits
/// the last-level cache and at `net_copy_bw` once it spills.
#[test]
fn the_kernel_copies_a_working_set_in_cache_faster() {
    let received = |cache_bytes: usize| {
        received_over_tcp(&Machine {
            cache_bytes,
            ..kernel_copies_alone()
        })
    };
    // Both sides copy at once on the two cores.
    let fits = received(1 << 30);
    assert!((fits - 0.25e-3).abs() < 1e-9, "{fits}");
    // Working set 2 MiB, cache 1 MiB: half of each byte at either rate.
    let half = received(1 << 20);
    assert!((half - (0.5e-3 + 0.125e-3)).abs() < 1e-9, "{half}");
}

/// On an oversubscribed host, `oversub_net_miss` of the kernel's copies come from memory
/// even where the cache holds the bytes; with a core per rank it changes nothing. A share
/// past 1 is refused.
#[test]
fn an_oversubscribed_host_copies_network_bytes_partly_from_memory() {
    let received = |cores: usize, miss: f64| {
        received_over_tcp(&Machine {
            cores,
            oversub_net_miss: miss,
            cache_bytes: 1 << 30,
            ..kernel_copies_alone()
        })
    };
    // A core per rank: both sides copy from the cache at once, whatever the share.
    assert!((received(2, 0.5) - 0.25e-3).abs() < 1e-9);
    // One core for both ranks: the two sides' copies in turn, half of each byte from
    // memory.
    let half = received(1, 0.5);
    assert!((half - 2.0 * (0.125e-3 + 0.5e-3)).abs() < 1e-9, "{half}");
    assert!((received(1, 0.0) - 0.5e-3).abs() < 1e-9);
    let mut bad = Machine::tcp();
    assert!(bad.set("oversub_net_miss", "1.5").is_err());
    assert!(bad.set("oversub_net_miss", "0.25").is_ok());
    assert_eq!(bad.oversub_net_miss, 0.25);
}

/// Where the working set decides what the cache holds (`llc_by_reuse` off), single-copy
/// folds every peer's operand of a chunk into it in turn: after the first, a reduction reads
/// only the peer's bytes from memory, a third of the traffic, at three times the reduction's
/// memory rate.
#[test]
fn a_reduction_into_a_chunk_still_in_cache_reads_only_the_peers_bytes() {
    let len = 1_000_000;
    let from_peer = |folded| Op::ReadPeer {
        from: 1,
        len,
        reduce: true,
        folded,
        src: 0,
        dst: 0,
    };
    // A cache that holds the chunk and next to none of the working set.
    let spilled = Machine {
        cache_bytes: 1 << 20,
        core_cache_bytes: 0,
        llc_by_reuse: false,
        ..Machine::shm()
    };
    let time = |m: &Machine, folded| {
        let mut program = Program {
            ranks: vec![vec![vec![from_peer(folded)]], vec![vec![]]],
            segment_bytes: 1 << 45,
        };
        replay(&mut program, m, &Cluster::new(2, 2), 1)
            .unwrap()
            .ends[0][0]
    };
    // Bound by the core: the memory rate, times three when folded.
    let cpu = Machine {
        reduce_bw_mem: 1e9,
        reduce_bw_cache: 1e12,
        host_mem_bw: 1e15,
        ..spilled.clone()
    };
    assert!((time(&cpu, false) - 1e-3).abs() < 1e-8);
    assert!((time(&cpu, true) - 1e-3 / 3.0).abs() < 1e-8);
    // Bound by the host's memory: three bytes of traffic per byte, one when folded.
    let memory = Machine {
        reduce_bw_mem: 1e15,
        reduce_bw_cache: 1e15,
        host_mem_bw: 1e9,
        ..spilled
    };
    assert!((time(&memory, false) - 3e-3).abs() < 1e-8);
    assert!((time(&memory, true) - 1e-3).abs() < 1e-8);
    // A chunk larger than the cache is not still in it.
    let small = Machine {
        cache_bytes: 1 << 19,
        ..cpu
    };
    assert!((time(&small, true) - 1e-3).abs() < 1e-8);
    // The builder marks all but the first peer's reduction of each chunk.
    let program =
        super::program::build(Algorithm::SingleCopy, &Cluster::new(3, 3), 3 << 20, 4, 0).unwrap();
    let reductions: Vec<bool> = program.ranks[0][0]
        .iter()
        .filter_map(|op| match *op {
            Op::ReadPeer {
                reduce: true,
                folded,
                ..
            } => Some(folded),
            _ => None,
        })
        .collect();
    assert!(!reductions.is_empty() && reductions.len().is_multiple_of(2));
    assert!(
        reductions.chunks(2).all(|pair| pair == [false, true]),
        "{reductions:?}"
    );
}

/// Where each byte's recency decides (`llc_by_reuse`): a peer's bytes reduced right after
/// it wrote them into staging come from the cache, and so does the vector while fewer
/// bytes than the cache holds were touched since the run before; past that, the vector's
/// reads and writes come from memory, whatever the working set.
#[test]
fn a_byte_is_in_the_cache_by_how_many_bytes_were_touched_since() {
    const LEN: u32 = 1_000_000;
    let reduce_after_a_peers_write = |cache_bytes: usize| {
        let m = Machine {
            cache_bytes,
            // Least-recently-used: nothing held past the cache's size.
            llc_falloff: 1e6,
            llc_by_reuse: true,
            shm_alpha: 0.0,
            shm_copy_bw_cache: 1e21,
            shm_copy_bw_mem: 1e21,
            recv_overhead: 0.0,
            reduce_bw_cache: 1e12,
            reduce_bw_mem: 1e9,
            host_mem_bw: 1e15,
            core_cache_bytes: 0,
            ..Machine::shm()
        };
        // Rank 1 writes into rank 0's staging at 0; rank 0 reduces it into its vector.
        let mut program = Program {
            ranks: vec![
                vec![vec![
                    Op::Recv { notif: 0 },
                    Op::Reduce {
                        len: LEN,
                        src: 0,
                        dst: 1 << 21,
                    },
                ]],
                vec![vec![Op::Send {
                    to: 0,
                    len: LEN,
                    notif: 0,
                    src: 0,
                    dst: 0,
                }]],
            ],
            segment_bytes: 4 << 20,
        };
        replay(&mut program, &m, &Cluster::new(2, 2), 1)
            .unwrap()
            .ends[0][0]
    };
    // Since the vector was last touched, the peer's write touched 2 MB (its source and the
    // staging): a 3 MB cache holds all, every byte at the cache's rate.
    let held = reduce_after_a_peers_write(3_000_000);
    assert!((held - 1e-6).abs() < 1e-12, "{held}");
    // A 1.5 MB cache holds the staging the peer just wrote but not the vector: two of the
    // three streams (the vector read and written) from memory.
    let spilled = reduce_after_a_peers_write(1_500_000);
    let expect = f64::from(LEN) * (1.0 / 3.0 / 1e12 + 2.0 / 3.0 / 1e9);
    assert!((spilled - expect).abs() < 1e-12, "{spilled} {expect}");
}

/// `Machine::cluster_10gbit`, behind the automatic choice's rules and the choice table in
/// `docs/allreduce.md`, keeps the working-set model (`llc_by_reuse` off) and predicts what
/// it did when the table was derived: the times of a few cells where its cache spills,
/// pinned. Why pinned: a change to the shared replay once moved four of the table's cells
/// beyond the grid of `the_runtime_choice_is_the_simulators_choice` (a bare notification no
/// longer waited behind the spilling host's memory), and nothing else noticed.
#[test]
fn the_cluster_model_predicts_as_when_the_choice_table_was_derived() {
    let m = Machine::cluster_10gbit();
    let cells = [
        (
            Algorithm::Ring,
            Cluster::new(2, 2),
            1 << 30,
            0.25558799074486144,
        ),
        (
            Algorithm::Hierarchical,
            Cluster::new(16, 2),
            1 << 30,
            1.6466245670559556,
        ),
        (
            Algorithm::SingleCopy,
            Cluster::new(8, 8),
            64 << 20,
            0.042168248135589004,
        ),
        (
            Algorithm::RecursiveDoubling,
            Cluster::new(4, 4),
            16 << 20,
            0.018118050470809777,
        ),
    ];
    let got: Vec<f64> = cells
        .iter()
        .map(|(a, c, bytes, _)| predict(*a, c, *bytes, 4, &m).unwrap().seconds)
        .collect();
    for ((algorithm, _, _, pinned), s) in cells.iter().zip(got) {
        assert!(
            (s / pinned - 1.0).abs() < 1e-12,
            "{algorithm:?} {s:e} against {pinned:e}"
        );
    }
}

/// Single-copy on 2 ranks reduces half of both vectors and pushes the result into the
/// peer's: in the next run it reads and writes the same halves, the peer's one last written
/// by itself. With a private tier nearly free, that costs nearly nothing while the two
/// halves fit the core's private cache, and the last-level cache's rates once they do not:
/// of a 16 MiB half reduced in 256 KiB chunks, the push finds only the last few chunks
/// still there.
#[test]
fn what_a_rank_touched_last_runs_at_the_private_rates_while_it_fits_its_core() {
    let m = Machine {
        private_bytes: 2 << 20,
        private_copy_bw: 1e15,
        private_reduce_bw: 1e15,
        shm_alpha: 0.0,
        shm_notify_alpha: 0.0,
        recv_overhead: 0.0,
        core_cache_bytes: 0,
        shm_copy_bw_cache: 10e9,
        reduce_bw_cache: 10e9,
        cache_bytes: 1 << 30,
        ..Machine::xeon_shm()
    };
    let per_byte = |m: &Machine, bytes: usize| {
        predict(Algorithm::SingleCopy, &Cluster::new(2, 2), bytes, 4, m)
            .unwrap()
            .seconds
            / bytes as f64
    };
    let without = Machine {
        private_bytes: 0,
        ..m.clone()
    };
    // Per rank, half of each vector reduced and half copied, at 10 GB/s.
    let expected = 1.0 / 10e9;
    assert!((per_byte(&without, 1 << 20) / expected - 1.0).abs() < 1e-3);
    // 1 MiB: 1 MiB touched per rank, all in its private cache.
    assert!(per_byte(&m, 1 << 20) < 1e-3 * expected);
    // 32 MiB: 32 MiB touched per rank, 16 times the private cache.
    let spilled = per_byte(&m, 32 << 20);
    assert!(spilled > 0.95 * expected, "{spilled:e} {expected:e}");
    assert!((per_byte(&without, 32 << 20) / expected - 1.0).abs() < 1e-3);
}
