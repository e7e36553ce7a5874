//! Criterion benches of allreduce (f32 SUM, auto algorithm) and broadcast at 2 and 4 ranks
//! over shared memory, across a size sweep: `cargo bench -p tarantella-benches`.
//!
//! The bench process is not a rank: for each rank count it starts the ranks once (this
//! same executable with [`ROLE`] set), drives rank 0 through its stdin/stdout, and rank 0
//! hands each command to its peers with a small gaspi allreduce. Every `iter_custom`
//! sample runs the collective `iters` times on all ranks and returns the maximum over
//! ranks. The ranks are killed when the bench ends, also on panic.

use std::collections::hash_map::{Entry, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use allreduce::{Allreduce, Broadcast, Options, Reduction};
use criterion::{BenchmarkId, Criterion, Throughput};
use gaspi::env::{JobToken, TransportChoice};
use gaspi::testing::{free_port, Job};
use gaspi::{Context, Group, Rank, ReduceOp, Timeout};
use tarantella_benches::{max_over_ranks, ROLE};

const SIZES: [usize; 4] = [4 << 10, 64 << 10, 1 << 20, 16 << 20];
const T: Timeout = Timeout(120_000);

#[derive(Clone, Copy)]
enum Kind {
    Quit = 0,
    Allreduce = 1,
    Broadcast = 2,
}

/// A running job whose rank 0 takes commands on stdin.
struct Ranks {
    children: Vec<Child>,
    to_master: ChildStdin,
    from_master: BufReader<ChildStdout>,
}

impl Ranks {
    fn start(n: u16) -> Ranks {
        let mut job = Job::new(n, std::env::current_exe().expect("own path"));
        job.transport = TransportChoice::Shm;
        job.timeout = Duration::from_secs(3600);
        let token = JobToken::random().expect("randomness");
        let port = free_port(job.rendezvous_ip);
        let vars = job.rank_vars(port, token, &format!("crit{}", std::process::id()));
        let mut children = Vec::new();
        let mut pipes = None;
        for (r, v) in vars.into_iter().enumerate() {
            let mut cmd = Command::new(&job.program);
            cmd.envs(v)
                .env(ROLE, "criterion-rank")
                .stderr(Stdio::inherit());
            if r == 0 {
                cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
            } else {
                cmd.stdin(Stdio::null()).stdout(Stdio::null());
            }
            let mut child = cmd.spawn().expect("start a rank");
            if r == 0 {
                pipes = Some((
                    child.stdin.take().expect("stdin"),
                    BufReader::new(child.stdout.take().expect("stdout")),
                ));
            }
            children.push(child);
        }
        let (to_master, from_master) = pipes.expect("rank 0");
        Ranks {
            children,
            to_master,
            from_master,
        }
    }

    /// Runs `iters` collectives on every rank; the slowest rank's time.
    fn run(&mut self, kind: Kind, count: usize, iters: u64) -> Duration {
        writeln!(self.to_master, "{} {count} {iters}", kind as u64).expect("command rank 0");
        let mut line = String::new();
        self.from_master
            .read_line(&mut line)
            .expect("rank 0 answers");
        let secs: f64 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("rank 0 said {line:?}"));
        Duration::from_secs_f64(secs)
    }
}

impl Drop for Ranks {
    fn drop(&mut self) {
        let _ = writeln!(self.to_master, "{} 0 0", Kind::Quit as u64);
        let _ = self.to_master.flush();
        let deadline = Instant::now() + Duration::from_secs(5);
        for c in &mut self.children {
            while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn rank_main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Arc::new(Context::init()?);
    let master = ctx.rank().0 == 0;
    let stdin = std::io::stdin();
    let mut reduces: HashMap<usize, Allreduce<f32>> = HashMap::new();
    let mut bcasts: HashMap<usize, Broadcast<f32>> = HashMap::new();
    loop {
        let mut cmd = [0u64; 3];
        if master {
            let mut line = String::new();
            stdin.lock().read_line(&mut line)?;
            for (slot, word) in cmd.iter_mut().zip(line.split_whitespace()) {
                *slot = word.parse()?;
            }
        }
        let mut agreed = [0u64; 3];
        ctx.allreduce(&cmd, &mut agreed, ReduceOp::Max, Group::ALL, T)?;
        let [kind, count, iters] = agreed;
        let count = count as usize;
        match kind {
            k if k == Kind::Allreduce as u64 => {
                if let Entry::Vacant(slot) = reduces.entry(count) {
                    slot.insert(Allreduce::new(
                        &ctx,
                        Group::ALL,
                        count,
                        Reduction::Sum,
                        Options::default(),
                    )?);
                }
                let ar = reduces.get_mut(&count).expect("set up above");
                ar.input_mut()?.fill(1.0);
                timed(&ctx, master, iters, || {
                    ar.start()?;
                    ar.wait(T).map(|_| ())
                })?;
            }
            k if k == Kind::Broadcast as u64 => {
                if let Entry::Vacant(slot) = bcasts.entry(count) {
                    slot.insert(Broadcast::new(
                        &ctx,
                        Group::ALL,
                        count,
                        Rank(0),
                        Options::default(),
                    )?);
                }
                let b = bcasts.get_mut(&count).expect("set up above");
                timed(&ctx, master, iters, || {
                    b.start()?;
                    b.wait(T).map(|_| ())
                })?;
            }
            _ => break,
        }
    }
    drop(reduces);
    drop(bcasts);
    ctx.barrier(Group::ALL, T)?;
    Ok(())
}

/// Runs `op` `iters` times after a barrier; rank 0 prints the slowest rank's seconds.
fn timed(
    ctx: &Context,
    master: bool,
    iters: u64,
    mut op: impl FnMut() -> allreduce::Result<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    ctx.barrier(Group::ALL, T)?;
    let t = Instant::now();
    for _ in 0..iters {
        op()?;
    }
    let secs = max_over_ranks(ctx, t.elapsed().as_secs_f64())?;
    if master {
        println!("{secs:e}");
        std::io::stdout().flush()?;
    }
    Ok(())
}

fn bench(c: &mut Criterion) {
    for n in [2u16, 4] {
        let mut ranks = Ranks::start(n);
        for (kind, name) in [
            (Kind::Allreduce, "allreduce"),
            (Kind::Broadcast, "broadcast"),
        ] {
            let mut group = c.benchmark_group(format!("{name}/shm/{n}ranks"));
            group
                .sample_size(10)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
            for bytes in SIZES {
                group.throughput(Throughput::Bytes(bytes as u64));
                group.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |b, &bytes| {
                    b.iter_custom(|iters| ranks.run(kind, bytes / 4, iters))
                });
            }
            group.finish();
        }
    }
}

fn main() {
    if std::env::var(ROLE).is_ok() {
        if let Err(e) = rank_main() {
            eprintln!("rank failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
