//! All ranks of a schedule in one process, against a model of asynchronous transports: a
//! send is delivered at a random later point, reading its source *at delivery time* (like
//! TCP reading the segment when the socket has room), and a `Flush` delivers the rank's
//! pending sends. Ranks run several collectives back to back and refill their input as
//! soon as they finish, as applications do. Wrong data, a notification overwritten before
//! it was consumed, or a deadlock fail the test.

use super::*;
use crate::element::Element;
use crate::reduction::Reduction;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
}

struct Pending {
    to: usize,
    src: usize,
    dst: usize,
    len: usize,
    notif: u32,
}

struct Rank {
    /// Runs cycle through these.
    scheds: Vec<Schedule>,
    mem: Vec<u8>,
    notif: Vec<bool>,
    cursor: usize,
    run: usize,
    pending: std::collections::VecDeque<Pending>,
}

impl Rank {
    fn actions(&self) -> &[Action] {
        &self.scheds[self.run % self.scheds.len()].actions
    }
}

fn deliver(ranks: &mut [Rank], from: usize) {
    let Some(s) = ranks[from].pending.pop_front() else {
        return;
    };
    let data = ranks[from].mem[s.src..s.src + s.len].to_vec();
    let target = &mut ranks[s.to];
    target.mem[s.dst..s.dst + s.len].copy_from_slice(&data);
    let slot = &mut target.notif[s.notif as usize];
    assert!(
        !*slot,
        "rank {from} overwrote notification {} of rank {} before it was consumed",
        s.notif, s.to
    );
    *slot = true;
}

struct Sim {
    elem_count: usize,
    runs: usize,
    seed: u64,
    op: Reduction,
}

impl Sim {
    /// Runs `runs` collectives; `input(rank, run)` fills data, `check(rank, run, data)`
    /// checks the result.
    fn run(
        &self,
        scheds: Vec<Vec<Schedule>>,
        input: impl Fn(usize, usize) -> Option<Vec<i64>>,
        check: impl Fn(usize, usize, &[i64]),
    ) {
        let p = scheds.len();
        let all = || scheds.iter().flatten();
        let size = all().map(|s| s.segment_bytes).max().unwrap_or(0);
        let notifs = all().map(|s| s.notifications).max().unwrap_or(0) as usize;
        let bytes = self.elem_count * 8;
        let mut ranks: Vec<Rank> = scheds
            .into_iter()
            .map(|scheds| Rank {
                scheds,
                mem: vec![0xAB; size.max(bytes)],
                notif: vec![false; notifs],
                cursor: 0,
                run: 0,
                pending: Default::default(),
            })
            .collect();
        for (i, r) in ranks.iter_mut().enumerate() {
            if let Some(v) = input(i, 0) {
                r.mem[..bytes].copy_from_slice(bytemuck::cast_slice(&v));
            }
        }
        let mut rng = Lcg(self.seed);
        let mut idle_rounds = 0;
        while ranks.iter().any(|r| r.run < self.runs) {
            let i = rng.next() % p;
            if rng.next().is_multiple_of(3) {
                deliver(&mut ranks, rng.next() % p);
            }
            let progressed = ranks[i].run < self.runs && step(&mut ranks, i, self.op);
            if ranks[i].run < self.runs && ranks[i].cursor == ranks[i].actions().len() {
                let data: Vec<i64> = bytemuck::pod_collect_to_vec(&ranks[i].mem[..bytes]);
                check(i, ranks[i].run, &data);
                ranks[i].run += 1;
                ranks[i].cursor = 0;
                if let Some(v) = input(i, ranks[i].run) {
                    ranks[i].mem[..bytes].copy_from_slice(bytemuck::cast_slice(&v));
                }
            }
            idle_rounds = if progressed { 0 } else { idle_rounds + 1 };
            if idle_rounds > 50 * p {
                // Nothing moved for a while: deliver everything; if still stuck, deadlock.
                let before: usize = ranks.iter().map(|r| r.pending.len()).sum();
                for j in 0..p {
                    while !ranks[j].pending.is_empty() {
                        deliver(&mut ranks, j);
                    }
                }
                let moved =
                    (0..p).any(|j| ranks[j].run < self.runs && step(&mut ranks, j, self.op));
                assert!(before > 0 || moved, "deadlock: every rank waits");
                idle_rounds = 0;
            }
        }
        for r in &ranks {
            assert!(r.pending.is_empty(), "sends left after the last flush");
        }
    }
}

/// Advances rank `i` by one action if it can.
fn step(ranks: &mut [Rank], i: usize, op: Reduction) -> bool {
    let p = ranks.len();
    let r = &mut ranks[i];
    let Some(action) = r.actions().get(r.cursor).cloned() else {
        return false;
    };
    match action {
        Action::Send {
            to,
            src,
            dst,
            len,
            notif,
        } => {
            assert_ne!(to, i, "send to self");
            r.pending.push_back(Pending {
                to,
                src,
                dst,
                len,
                notif,
            });
        }
        Action::Recv { notif } => {
            if !r.notif[notif as usize] {
                return false;
            }
            r.notif[notif as usize] = false;
        }
        Action::Reduce {
            src,
            dst,
            len,
            src_first,
        } => {
            let s: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[src..src + len]);
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[dst..dst + len]);
            i64::combine(op, &mut d, &s, src_first);
            r.mem[dst..dst + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::ReduceFrom {
            from,
            src,
            dst,
            len,
            src_first,
        } => {
            // Shared memory: the peer's bytes as they are now.
            assert_ne!(from, i, "reduce from self");
            let s: Vec<i64> = bytemuck::pod_collect_to_vec(&ranks[from].mem[src..src + len]);
            let r = &mut ranks[i];
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[dst..dst + len]);
            i64::combine(op, &mut d, &s, src_first);
            r.mem[dst..dst + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::CopyFrom {
            from,
            src,
            dst,
            len,
        } => {
            assert_ne!(from, i, "copy from self");
            let s = ranks[from].mem[src..src + len].to_vec();
            ranks[i].mem[dst..dst + len].copy_from_slice(&s);
        }
        Action::Divide { off, len } => {
            let mut d: Vec<i64> = bytemuck::pod_collect_to_vec(&r.mem[off..off + len]);
            i64::divide(&mut d, p);
            r.mem[off..off + len].copy_from_slice(bytemuck::cast_slice(&d));
        }
        Action::Flush => {
            while !ranks[i].pending.is_empty() {
                deliver(ranks, i);
            }
        }
    }
    ranks[i].cursor += 1;
    true
}

fn value(rank: usize, run: usize, j: usize) -> i64 {
    let v = (rank as i64 + 1) * 1000 + j as i64 * 7 + run as i64 * 13;
    if j.is_multiple_of(3) {
        -v
    } else {
        v
    }
}

fn shapes(p: usize, count: usize, chunk: usize, staging: usize) -> impl Iterator<Item = Shape> {
    (0..p).map(move |me| Shape {
        me,
        ranks: p,
        count,
        elem: 8,
        chunk_bytes: chunk,
        notif_limit: 65536,
        ring_staging_bytes: staging,
    })
}

fn check_allreduce(
    name: &str,
    build: impl Fn(&Shape, bool) -> Vec<Schedule>,
    p: usize,
    count: usize,
    chunk: usize,
    op: Reduction,
) {
    check_allreduce_staged(name, build, p, count, chunk, RING_STAGING_BYTES, op)
}

fn check_allreduce_staged(
    name: &str,
    build: impl Fn(&Shape, bool) -> Vec<Schedule>,
    p: usize,
    count: usize,
    chunk: usize,
    staging: usize,
    op: Reduction,
) {
    for seed in 1..4 {
        let scheds = shapes(p, count, chunk, staging)
            .map(|sh| build(&sh, op == Reduction::Avg))
            .collect();
        let sim = Sim {
            elem_count: count,
            runs: 3,
            seed,
            op,
        };
        sim.run(
            scheds,
            |rank, run| Some((0..count).map(|j| value(rank, run, j)).collect()),
            |rank, run, data| {
                for (j, got) in data.iter().enumerate() {
                    let vals = (0..p).map(|r| value(r, run, j));
                    let want = match op {
                        Reduction::Sum => vals.sum::<i64>(),
                        Reduction::Avg => vals.sum::<i64>() / p as i64,
                        Reduction::Max => vals.max().unwrap(),
                        Reduction::Min => vals.min().unwrap(),
                        Reduction::Prod => vals.fold(1i64, |a, b| a.wrapping_mul(b)),
                    };
                    assert_eq!(
                        *got, want,
                        "{name}: p={p} count={count} chunk={chunk} staging={staging} {op:?} \
                         seed={seed}: rank {rank} run {run} element {j}"
                    );
                }
            },
        );
    }
}

const COUNTS: [usize; 7] = [0, 1, 2, 3, 7, 100, 1003];

#[test]
fn ring_reduces_every_shape() {
    for p in 1..=6 {
        for count in COUNTS {
            for chunk in [8, 24, 1 << 20] {
                // Two slots (the fewest), three, and room for every chunk.
                for staging in [0, 3 * chunk, RING_STAGING_BYTES] {
                    check_allreduce_staged(
                        "ring",
                        |sh, avg| vec![ring(sh, avg)],
                        p,
                        count,
                        chunk,
                        staging,
                        Reduction::Sum,
                    );
                }
            }
            check_allreduce(
                "ring",
                |sh, avg| vec![ring(sh, avg)],
                p,
                count,
                16,
                Reduction::Avg,
            );
        }
    }
}

#[test]
fn recursive_doubling_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Max, Reduction::Avg] {
                check_allreduce(
                    "rd",
                    |sh, avg| (0..2).map(|q| recursive_doubling(sh, avg, q)).collect(),
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

#[test]
fn rabenseifner_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Min, Reduction::Avg] {
                check_allreduce(
                    "rabenseifner",
                    |sh, avg| vec![rabenseifner(sh, avg)],
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

#[test]
fn ring_staging_is_a_few_slots_whatever_the_message() {
    for p in [2, 3, 5] {
        let sh = Shape {
            me: 1,
            ranks: p,
            count: 16 << 20,
            elem: 4,
            chunk_bytes: 1 << 20,
            notif_limit: 65536,
            ring_staging_bytes: 4 << 20,
        };
        let s = ring(&sh, false);
        assert_eq!(s.segment_bytes, (64 << 20) + (4 << 20), "p={p}");
        let credits = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Send { len: 0, .. }))
            .count();
        let reduces = s
            .actions
            .iter()
            .filter(|a| matches!(a, Action::Reduce { .. }))
            .count();
        // Every received chunk but the last four frees its slot with a credit.
        assert!(reduces >= 32, "p={p}: {reduces} chunks");
        assert_eq!(credits, reduces - 4, "p={p}");
    }
}

/// Layouts of the hierarchical tests: even, uneven both ways, interleaved placement, one
/// host, one rank per host, three hosts.
const LAYOUTS: [&[&[usize]]; 8] = [
    &[&[0, 1], &[2, 3]],
    &[&[0, 1, 2], &[3, 4]],
    &[&[0], &[1, 2, 3, 4]],
    &[&[0, 2], &[1, 3]],
    &[&[0, 1, 2, 3]],
    &[&[0], &[1], &[2]],
    &[&[0, 1], &[2, 3], &[4, 5]],
    &[&[0, 3], &[1, 4], &[2]],
];

fn layout(hosts: &[&[usize]]) -> Vec<Vec<usize>> {
    hosts.iter().map(|m| m.to_vec()).collect()
}

/// An inter-host builder: a flat allreduce given its shape, `avg` and the run's parity.
type Inter = fn(&Shape, bool, usize) -> Schedule;

const INTERS: [(&str, Inter); 3] = [
    ("ring", |sh, avg, _| ring(sh, avg)),
    ("rd", recursive_doubling),
    ("rabenseifner", |sh, avg, _| rabenseifner(sh, avg)),
];

/// How the hosts of a hierarchical test run their intra-host phases: all staged, all
/// shared, or alternating by host (hosts may differ in the runtime).
#[derive(Clone, Copy, Debug)]
enum Memories {
    Staged,
    Shared,
    Mixed,
}

impl Memories {
    fn of(self, host: usize) -> HostMemory {
        match self {
            Memories::Staged => HostMemory::Staged,
            Memories::Shared => HostMemory::Shared,
            Memories::Mixed if host.is_multiple_of(2) => HostMemory::Shared,
            Memories::Mixed => HostMemory::Staged,
        }
    }
}

/// The hierarchical schedules of both parities (recursive doubling between hosts
/// alternates its slots from run to run), `pieces` per shard, hosts running their phases
/// as `memories` says.
fn hier(
    hosts: &[Vec<usize>],
    pieces: usize,
    memories: Memories,
    inter: Inter,
) -> impl Fn(&Shape, bool) -> Vec<Schedule> + '_ {
    move |sh, avg| {
        let host = hosts.iter().position(|m| m.contains(&sh.me)).unwrap();
        (0..2)
            .map(|q| {
                let inter = |sub: &Shape, avg| inter(sub, avg, q);
                hierarchical(sh, hosts, pieces, memories.of(host), avg, &inter)
            })
            .collect()
    }
}

const OPS: [Reduction; 5] = [
    Reduction::Sum,
    Reduction::Max,
    Reduction::Min,
    Reduction::Prod,
    Reduction::Avg,
];

#[test]
fn hierarchical_reduces_every_layout() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in COUNTS {
            for (inter_name, inter) in INTERS {
                for op in OPS {
                    let name = format!("hierarchical {hosts:?} over {inter_name}");
                    check_allreduce(
                        &name,
                        hier(&hosts, 1, Memories::Staged, inter),
                        p,
                        count,
                        16,
                        op,
                    );
                }
            }
        }
    }
}

/// Pieces and intra-host phases in every combination: several pieces per shard (more than
/// some counts have elements for), staged, shared and mixed hosts, chunks of one and three
/// elements, two and three ring slots.
#[test]
fn hierarchical_pipelines_pieces_staged_and_shared() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in COUNTS {
            for memories in [Memories::Staged, Memories::Shared, Memories::Mixed] {
                for pieces in [1, 3, 8, 16] {
                    let name = format!("hierarchical {hosts:?} {memories:?} {pieces} pieces");
                    for (_, inter) in INTERS {
                        for op in [Reduction::Sum, Reduction::Avg] {
                            let build = hier(&hosts, pieces, memories, inter);
                            check_allreduce(&name, build, p, count, 16, op);
                        }
                    }
                    for chunk in [8, 24] {
                        for staging in [0, 3 * chunk] {
                            check_allreduce_staged(
                                &name,
                                hier(&hosts, pieces, memories, INTERS[0].1),
                                p,
                                count,
                                chunk,
                                staging,
                                Reduction::Min,
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Through the plan, as the collective builds it: each shard's algorithm between hosts
/// picked by its size (thresholds low enough that the counts here meet all three).
#[test]
fn hierarchical_plan_mixes_algorithms_between_hosts() {
    use crate::algorithm::Algorithm;
    use crate::options::Thresholds;
    use crate::plan::allreduce_plan;
    let thresholds = Thresholds {
        small_max: 64,
        ring_min: 1024,
        single_copy_min: usize::MAX,
    };
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in [5, 17, 40, 150, 1003] {
            for op in [Reduction::Sum, Reduction::Avg] {
                check_allreduce(
                    &format!("plan {hosts:?}"),
                    |sh, avg| {
                        let host = hosts.iter().position(|m| m.contains(&sh.me)).unwrap();
                        let memory = Memories::Mixed.of(host);
                        allreduce_plan(
                            Algorithm::Hierarchical,
                            sh,
                            &hosts,
                            memory,
                            &thresholds,
                            avg,
                        )
                        .schedules
                    },
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

#[test]
fn hierarchical_keeps_notification_ids_within_the_limit() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for (name, inter) in INTERS {
            for me in 0..p {
                let sh = Shape {
                    me,
                    ranks: p,
                    count: 1 << 20,
                    elem: 4,
                    chunk_bytes: 8,
                    notif_limit: 1000,
                    ring_staging_bytes: RING_STAGING_BYTES,
                };
                let inter = |sub: &Shape, avg| inter(sub, avg, 0);
                for memory in [HostMemory::Staged, HostMemory::Shared] {
                    let s = hierarchical(&sh, &hosts, 8, memory, false, &inter);
                    assert!(
                        s.notifications <= 1000,
                        "{hosts:?} {name} {memory:?}: {}",
                        s.notifications
                    );
                }
            }
        }
    }
}

/// Staging: the reduce-scatter slots of the units a rank owns (staged: under the vector;
/// shared: none) and the units' ring slots between hosts, a few pieces' worth; what crosses
/// hosts is only the shards.
#[test]
fn hierarchical_staging_and_traffic_are_bounded() {
    let hosts = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
    let data = 64 << 20;
    for me in 0..8 {
        let sh = Shape {
            me,
            ranks: 8,
            count: data / 4,
            elem: 4,
            chunk_bytes: 1 << 20,
            notif_limit: 65536,
            ring_staging_bytes: RING_STAGING_BYTES,
        };
        for (memory, intra) in [(HostMemory::Staged, 3 * data / 4), (HostMemory::Shared, 0)] {
            let s = hierarchical(&sh, &hosts, 8, memory, false, &|sub: &Shape, avg| {
                ring(sub, avg)
            });
            // 8 pieces of 2 MiB per shard, each ring's single slot a 1 MiB block.
            assert_eq!(
                s.segment_bytes,
                data + intra + 8 * (1 << 20),
                "rank {me} {memory:?}"
            );
            let off_host: usize = s
                .actions
                .iter()
                .filter_map(|a| match a {
                    Action::Send { to, len, .. } if (*to < 4) != (me < 4) => Some(*len),
                    _ => None,
                })
                .sum();
            // A ring of two hosts over a quarter of the vector: the quarter, once.
            assert_eq!(off_host, data / 4, "rank {me} {memory:?}");
        }
    }
}

#[test]
fn host_layouts_partition_the_group() {
    assert_eq!(
        host_layout(vec![vec![0, 1], vec![2, 3]], 4),
        [vec![0, 1], vec![2, 3]]
    );
    // Out of range, repeated and empty entries go; members no host lists get their own.
    assert_eq!(
        host_layout(vec![vec![0, 7, 0], vec![], vec![2]], 4),
        [vec![0], vec![2], vec![1], vec![3]]
    );
    assert_eq!(host_layout(Vec::new(), 2), [vec![0], vec![1]]);
}

#[test]
fn ring_keeps_notification_ids_within_the_limit() {
    let sh = Shape {
        me: 0,
        ranks: 5,
        count: 1 << 20,
        elem: 4,
        chunk_bytes: 8,
        notif_limit: 1000,
        ring_staging_bytes: RING_STAGING_BYTES,
    };
    let s = ring(&sh, false);
    assert!(s.notifications <= 1000, "{}", s.notifications);
}

type BcastBuilder = fn(&Shape, usize) -> Schedule;

fn check_broadcast(name: &str, build: BcastBuilder, p: usize, count: usize, root: usize) {
    for seed in 1..4 {
        let scheds = shapes(p, count, 40, RING_STAGING_BYTES)
            .map(|sh| vec![build(&sh, root)])
            .collect();
        let sim = Sim {
            elem_count: count,
            runs: 3,
            seed,
            op: Reduction::Sum,
        };
        sim.run(
            scheds,
            |rank, run| (rank == root).then(|| (0..count).map(|j| value(root, run, j)).collect()),
            |rank, run, data| {
                for (j, got) in data.iter().enumerate() {
                    assert_eq!(
                        *got,
                        value(root, run, j),
                        "{name}: p={p} count={count} root={root} seed={seed}: \
                         rank {rank} run {run} element {j}"
                    );
                }
            },
        );
    }
}

#[test]
fn broadcasts_reach_every_rank_from_any_root() {
    for p in 1..=7 {
        for count in [0, 1, 5, 100] {
            for root in 0..p {
                check_broadcast("tree", broadcast_tree, p, count, root);
                check_broadcast("chain", broadcast_chain, p, count, root);
            }
        }
    }
}

#[test]
fn one_shot_reduces_every_shape() {
    for p in 1..=9 {
        for count in COUNTS {
            for op in [Reduction::Sum, Reduction::Max, Reduction::Avg] {
                check_allreduce(
                    "one-shot",
                    |sh, avg| (0..2).map(|q| one_shot(sh, avg, q)).collect(),
                    p,
                    count,
                    64,
                    op,
                );
            }
        }
    }
}

/// Replays the ranks' schedules on symbols instead of numbers: every element of every rank's
/// segment holds the expression that produced it (`x3` for rank 3's input, `(a∘b)` for a
/// reduce with `a` first). Sends are delivered when posted, which is one legal order of a
/// correct schedule; the expressions do not depend on the order.
fn symbolic_results(scheds: &[Schedule], count: usize) -> Vec<Vec<String>> {
    let p = scheds.len();
    let words = |bytes: usize| bytes / 8;
    let size = scheds.iter().map(|s| s.segment_bytes).max().unwrap_or(0);
    let notifs = scheds.iter().map(|s| s.notifications).max().unwrap_or(0) as usize;
    let mut mem: Vec<Vec<String>> = (0..p)
        .map(|r| {
            let mut m = vec![String::from("?"); words(size).max(count)];
            m[..count].fill(format!("x{r}"));
            m
        })
        .collect();
    let mut notif = vec![vec![false; notifs]; p];
    let mut cursor = vec![0usize; p];
    loop {
        let mut moved = false;
        for i in 0..p {
            while let Some(action) = scheds[i].actions.get(cursor[i]) {
                match *action {
                    Action::Send {
                        to,
                        src,
                        dst,
                        len,
                        notif: id,
                    } => {
                        let data = mem[i][words(src)..words(src + len)].to_vec();
                        mem[to][words(dst)..words(dst + len)].clone_from_slice(&data);
                        notif[to][id as usize] = true;
                    }
                    Action::Recv { notif: id } => {
                        if !notif[i][id as usize] {
                            break;
                        }
                        notif[i][id as usize] = false;
                    }
                    Action::Reduce {
                        src,
                        dst,
                        len,
                        src_first,
                    } => {
                        for w in 0..words(len) {
                            let (s, d) = (&mem[i][words(src) + w], &mem[i][words(dst) + w]);
                            let e = if src_first {
                                format!("({s}∘{d})")
                            } else {
                                format!("({d}∘{s})")
                            };
                            mem[i][words(dst) + w] = e;
                        }
                    }
                    Action::ReduceFrom {
                        from,
                        src,
                        dst,
                        len,
                        src_first,
                    } => {
                        for w in 0..words(len) {
                            let (s, d) = (&mem[from][words(src) + w], &mem[i][words(dst) + w]);
                            let e = if src_first {
                                format!("({s}∘{d})")
                            } else {
                                format!("({d}∘{s})")
                            };
                            mem[i][words(dst) + w] = e;
                        }
                    }
                    Action::CopyFrom {
                        from,
                        src,
                        dst,
                        len,
                    } => {
                        let data = mem[from][words(src)..words(src + len)].to_vec();
                        mem[i][words(dst)..words(dst + len)].clone_from_slice(&data);
                    }
                    Action::Divide { .. } | Action::Flush => {}
                }
                cursor[i] += 1;
                moved = true;
            }
        }
        if cursor
            .iter()
            .zip(scheds)
            .all(|(&c, s)| c == s.actions.len())
        {
            return mem.into_iter().map(|m| m[..count].to_vec()).collect();
        }
        assert!(moved, "deadlock: every rank waits");
    }
}

/// "Results are bit-identical on every member": every rank computes every element with the
/// same expression (the same operands in the same order and association), so floating-point
/// rounding and the operand order of MIN/MAX agree too.
#[test]
fn every_rank_reduces_each_element_along_the_same_expression() {
    type Build = fn(&Shape) -> Schedule;
    let algorithms: [(&str, Build); 5] = [
        ("ring", |sh| ring(sh, false)),
        ("rd", |sh| recursive_doubling(sh, false, 0)),
        ("rabenseifner", |sh| rabenseifner(sh, false)),
        ("one-shot", |sh| one_shot(sh, false, 0)),
        ("single-copy", |sh| single_copy(sh, false)),
    ];
    for (name, build) in algorithms {
        for p in 1..=7 {
            for count in [1, 5, 64] {
                let scheds: Vec<Schedule> = shapes(p, count, 16, 32).map(|sh| build(&sh)).collect();
                let results = symbolic_results(&scheds, count);
                for (r, got) in results.iter().enumerate() {
                    assert_eq!(got, &results[0], "{name}: p={p} count={count}: rank {r}");
                }
                for e in &results[0] {
                    for r in 0..p {
                        assert_eq!(
                            e.matches(&format!("x{r}")).count(),
                            1,
                            "{name}: p={p}: {e} uses rank {r}'s input once"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn one_shot_folds_in_rank_order() {
    let scheds: Vec<Schedule> = shapes(4, 3, 64, 64)
        .map(|sh| one_shot(&sh, false, 1))
        .collect();
    for got in symbolic_results(&scheds, 3) {
        assert!(got.iter().all(|e| e == "(((x0∘x1)∘x2)∘x3)"), "{got:?}");
    }
}

#[test]
fn single_copy_reduces_every_shape() {
    for p in 1..=7 {
        for count in COUNTS {
            for chunk in [8, 24, 1 << 20] {
                for op in [Reduction::Sum, Reduction::Min, Reduction::Avg] {
                    check_allreduce(
                        "single-copy",
                        |sh, avg| vec![single_copy(sh, avg)],
                        p,
                        count,
                        chunk,
                        op,
                    );
                }
            }
        }
    }
}

#[test]
fn single_copy_stages_nothing_and_copies_each_byte_once() {
    let sh = Shape {
        me: 1,
        ranks: 4,
        count: 1 << 20,
        elem: 4,
        chunk_bytes: 256 << 10,
        notif_limit: 65536,
        ring_staging_bytes: RING_STAGING_BYTES,
    };
    let s = single_copy(&sh, false);
    assert_eq!(s.segment_bytes, 4 << 20, "no staging");
    let (mut reduced, mut copied, mut sent) = (0, 0, 0);
    for a in &s.actions {
        match a {
            Action::ReduceFrom { len, .. } => reduced += len,
            Action::CopyFrom { len, .. } => copied += len,
            Action::Send { len, .. } => sent += len,
            _ => {}
        }
    }
    // Our quarter from each of 3 peers, and the other 3 quarters once each.
    assert_eq!((reduced, copied, sent), (3 << 20, 3 << 20, 0));
}

/// The hierarchical allreduce folds every element along one expression on every rank, and
/// the same whether hosts run their phases staged, shared or mixed: the runtime may pick
/// either per host and the result keeps its bits.
#[test]
fn hierarchical_results_do_not_depend_on_how_hosts_run_their_phases() {
    for hosts in LAYOUTS.map(layout) {
        let p = hosts.iter().map(Vec::len).sum();
        for count in [1, 5, 64] {
            // The first (staged) result per piece count: pieces change how the ring between
            // hosts splits its blocks, and so the operand order, not the phases inside hosts.
            let mut seen: [Option<Vec<String>>; 2] = [None, None];
            for memories in [Memories::Staged, Memories::Shared, Memories::Mixed] {
                for (i, pieces) in [1, 3].into_iter().enumerate() {
                    let build = hier(&hosts, pieces, memories, INTERS[0].1);
                    let scheds: Vec<Schedule> = shapes(p, count, 16, 32)
                        .map(|sh| build(&sh, false).swap_remove(0))
                        .collect();
                    let results = symbolic_results(&scheds, count);
                    let name = format!("{hosts:?} {memories:?} {pieces} pieces count={count}");
                    for (r, got) in results.iter().enumerate() {
                        assert_eq!(got, &results[0], "{name}: rank {r}");
                    }
                    let first = seen[i].get_or_insert_with(|| results[0].clone());
                    assert_eq!(&results[0], first, "{name} against staged");
                }
            }
        }
    }
}
