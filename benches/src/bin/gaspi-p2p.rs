//! Point-to-point benchmark of the gaspi runtime, 2 ranks on this host, with its peers
//! measured in the same run:
//! - `write_notify` + `notify_waitsome` ping-pong half round trip (8 B, 4 KiB) vs a raw TCP
//!   ping-pong (`TCP_NODELAY`, blocking reads) between two processes;
//! - one-way `write_notify` bandwidth (1 MiB, 64 MiB) vs one raw TCP stream and `memcpy`
//!   (timed in rank 0 between the write batches, on buffers of the same size). Raw TCP is
//!   also streamed both ways at once, over two one-way connections as the TCP transport
//!   does: the ceiling of a 2-rank allreduce over TCP, which moves its whole vector each way.
//!
//! `cargo run --release -p tarantella-benches --bin gaspi-p2p [-- --quick]`
//! Every figure is the median over several batches.
//!
//! The rank processes and the raw TCP peer are this program re-executed with [`ROLE`] set;
//! they take their settings from the environment, not from the command line.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::Parser;
use gaspi::env::TransportChoice;
use gaspi::testing::Job;
use gaspi::{
    Alloc, Context, Group, Local, NotificationId, QueueId, Rank, Remote, SegmentId, Timeout,
};
use tarantella_benches::median;

const ROLE: &str = "TNT_P2P_ROLE";
/// Set in the rank processes of a `--quick` run (also honoured in the parent).
const QUICK_ENV: &str = "TNT_P2P_QUICK";
const PINGPONG: [usize; 2] = [8, 4096];
const BANDWIDTH: [usize; 2] = [1 << 20, 64 << 20];
const T: Timeout = Timeout(60_000);

#[derive(Parser, Debug)]
#[command(
    name = "gaspi-p2p",
    about = "Point-to-point latency and bandwidth of the gaspi runtime (2 ranks on this \
             host, over TCP and shared memory), measured beside raw TCP and memcpy"
)]
struct Args {
    /// Fewer iterations and shorter streams: rough figures in seconds (also TNT_P2P_QUICK=1)
    #[arg(long)]
    quick: bool,
}

/// Whether this run is a `--quick` one; decided once in `main` (command line in the
/// parent, [`QUICK_ENV`] in the rank processes).
static QUICK: OnceLock<bool> = OnceLock::new();

fn quick() -> bool {
    QUICK.get().copied().unwrap_or(false)
}

fn iters(size: usize) -> usize {
    let base = if size <= 4096 { 20_000 } else { 1 };
    if quick() {
        base / 10
    } else {
        base
    }
}

/// Rank body: prints `pingpong <size> <half_rtt_us>` and `bw <size> <GB/s>` lines on rank 0.
fn gaspi_rank() -> gaspi::Result<()> {
    let ctx = Context::init()?;
    let me = ctx.rank();
    let peer = Rank(1 - me.0);
    let seg = SegmentId(0);
    let max = *BANDWIDTH.iter().max().expect("sizes");
    ctx.segment_create(seg, 2 * max as u64, Group::ALL, T, Alloc::Initialized)?;
    let q = QueueId(0);
    let (ping, pong, data, ack) = (
        NotificationId(0),
        NotificationId(1),
        NotificationId(2),
        NotificationId(3),
    );
    for size in PINGPONG {
        let n = iters(size);
        let batches = 10;
        let mut halves = Vec::new();
        for b in 0..=batches {
            ctx.barrier(Group::ALL, T)?;
            let t = Instant::now();
            for i in 0..n / batches {
                let v = (i + 1) as u32;
                if me.0 == 0 {
                    ctx.write_notify(
                        Local::new(seg, 0),
                        Remote::new(peer, seg, max as u64),
                        size as u64,
                        ping,
                        v,
                        q,
                    )?;
                    ctx.notify_waitsome(seg, pong, 1, T)?;
                    ctx.notify_reset(seg, pong)?;
                } else {
                    ctx.notify_waitsome(seg, ping, 1, T)?;
                    ctx.notify_reset(seg, ping)?;
                    ctx.write_notify(
                        Local::new(seg, 0),
                        Remote::new(peer, seg, max as u64),
                        size as u64,
                        pong,
                        v,
                        q,
                    )?;
                }
                ctx.wait(q, T)?;
            }
            if b > 0 {
                // Batch 0 is the warm-up.
                halves.push(t.elapsed().as_secs_f64() * 1e6 / (2 * (n / batches)) as f64);
            }
        }
        if me.0 == 0 {
            println!("pingpong {size} {:.3}", median(halves));
        }
    }
    // The memcpy baseline runs in this rank process, interleaved with the timed writes,
    // between two private buffers of the same size: this host's memory bandwidth drifts by
    // 2x over seconds, so a baseline taken elsewhere or earlier is not comparable.
    let mut copy_src = vec![1u8; max];
    let mut copy_dst = vec![2u8; max];
    for size in BANDWIDTH {
        let total: usize = if quick() { 64 << 20 } else { 512 << 20 };
        let window = (total / size).max(4);
        let mut rates = Vec::new();
        let mut copy_rates = Vec::new();
        for rep in 0..=5 {
            if me.0 == 0 {
                let t = Instant::now();
                for _ in 0..window {
                    copy_dst[..size].copy_from_slice(&copy_src[..size]);
                    std::hint::black_box(&mut copy_dst);
                }
                if rep > 0 {
                    copy_rates.push((window * size) as f64 / t.elapsed().as_secs_f64() / 1e9);
                }
                std::hint::black_box(&mut copy_src);
            }
            ctx.barrier(Group::ALL, T)?;
            let t = Instant::now();
            if me.0 == 0 {
                for k in 0..window {
                    // Same source and target every time, like the memcpy baseline.
                    ctx.write_notify(
                        Local::new(seg, 0),
                        Remote::new(peer, seg, 0),
                        size as u64,
                        data,
                        (k + 1) as u32,
                        q,
                    )?;
                    if (k + 1) % 256 == 0 {
                        ctx.wait(q, T)?;
                    }
                }
                ctx.wait(q, T)?;
                ctx.notify_waitsome(seg, ack, 1, T)?;
                ctx.notify_reset(seg, ack)?;
                if rep > 0 {
                    rates.push((window * size) as f64 / t.elapsed().as_secs_f64() / 1e9);
                }
            } else {
                loop {
                    ctx.notify_waitsome(seg, data, 1, T)?;
                    if ctx.notify_reset(seg, data)? as usize == window {
                        break;
                    }
                }
                ctx.notify(seg, peer, ack, 1, q)?;
                ctx.wait(q, T)?;
            }
        }
        if me.0 == 0 {
            println!("bw {size} {:.3}", median(rates));
            println!("memcpy {size} {:.3}", median(copy_rates));
        }
    }
    ctx.barrier(Group::ALL, T)?;
    ctx.term(T)
}

/// Raw TCP peer process: echoes ping-pong messages, then drains a stream.
fn raw_server(port: u16) {
    let l = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    let (mut s, _) = l.accept().expect("accept");
    s.set_nodelay(true).expect("nodelay");
    // The client's second connection: what this side sends while both directions stream.
    let (back, _) = l.accept().expect("accept");
    let mut hdr = [0u8; 9];
    loop {
        if s.read_exact(&mut hdr).is_err() {
            return;
        }
        let size = u64::from_le_bytes(hdr[1..9].try_into().expect("8")) as usize;
        let mut buf = vec![0u8; size.min(1 << 20)];
        match hdr[0] {
            b'p' => {
                let n: u64 = {
                    let mut c = [0u8; 8];
                    s.read_exact(&mut c).expect("count");
                    u64::from_le_bytes(c)
                };
                for _ in 0..n {
                    s.read_exact(&mut buf[..size]).expect("ping");
                    s.write_all(&buf[..size]).expect("pong");
                }
            }
            b's' => {
                let mut left = size;
                while left > 0 {
                    let k = s.read(&mut buf).expect("stream");
                    left -= k;
                }
                s.write_all(&[1]).expect("ack");
            }
            b'b' => exchange(&back, &s, size),
            _ => return,
        }
    }
}

/// Sends `total` bytes on `send` from a second thread while this one receives `total` bytes
/// on `recv`: both directions at once over two one-way connections, as the TCP transport
/// runs a 2-rank allreduce.
fn exchange(send: &TcpStream, recv: &TcpStream, total: usize) {
    let mut out = send.try_clone().expect("clone");
    let sender = std::thread::spawn(move || {
        let chunk = vec![5u8; 1 << 20];
        let mut left = total;
        while left > 0 {
            let k = left.min(chunk.len());
            out.write_all(&chunk[..k]).expect("send");
            left -= k;
        }
    });
    let mut buf = vec![0u8; 1 << 20];
    let mut left = total;
    let mut inp = recv;
    while left > 0 {
        let k = inp.read(&mut buf[..left.min(1 << 20)]).expect("receive");
        assert!(k > 0, "peer closed");
        left -= k;
    }
    sender.join().expect("sender");
}

struct Raw {
    s: TcpStream,
    /// Carries what the server sends in the bidirectional test.
    back: TcpStream,
    child: std::process::Child,
}

impl Raw {
    fn start() -> Raw {
        let port = gaspi::testing::free_port("127.0.0.1".parse().expect("ip"));
        let child = Command::new(std::env::current_exe().expect("exe"))
            .env(ROLE, format!("raw:{port}"))
            .spawn()
            .expect("raw server");
        let deadline = Instant::now() + Duration::from_secs(10);
        let s = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if Instant::now() > deadline => panic!("raw server: {e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        s.set_nodelay(true).expect("nodelay");
        let back = TcpStream::connect(("127.0.0.1", port)).expect("second connection");
        Raw { s, back, child }
    }

    fn pingpong(&mut self, size: usize) -> f64 {
        let n = iters(size);
        let batches = 10;
        let mut buf = vec![7u8; size];
        let mut halves = Vec::new();
        for b in 0..=batches {
            let mut hdr = vec![b'p'];
            hdr.extend_from_slice(&(size as u64).to_le_bytes());
            hdr.extend_from_slice(&((n / batches) as u64).to_le_bytes());
            self.s.write_all(&hdr).expect("hdr");
            let t = Instant::now();
            for _ in 0..n / batches {
                self.s.write_all(&buf).expect("ping");
                self.s.read_exact(&mut buf).expect("pong");
            }
            if b > 0 {
                halves.push(t.elapsed().as_secs_f64() * 1e6 / (2 * (n / batches)) as f64);
            }
        }
        median(halves)
    }

    /// GB/s per direction with both directions streaming at once.
    fn bidirectional(&mut self, total: usize) -> f64 {
        let mut rates = Vec::new();
        for rep in 0..=5 {
            let mut hdr = vec![b'b'];
            hdr.extend_from_slice(&(total as u64).to_le_bytes());
            self.s.write_all(&hdr).expect("hdr");
            let t = Instant::now();
            exchange(&self.s, &self.back, total);
            if rep > 0 {
                rates.push(total as f64 / t.elapsed().as_secs_f64() / 1e9);
            }
        }
        median(rates)
    }

    fn stream(&mut self, total: usize) -> f64 {
        let chunk = vec![3u8; 1 << 20];
        let mut rates = Vec::new();
        for rep in 0..=5 {
            let mut hdr = vec![b's'];
            hdr.extend_from_slice(&(total as u64).to_le_bytes());
            self.s.write_all(&hdr).expect("hdr");
            let t = Instant::now();
            let mut left = total;
            while left > 0 {
                let k = left.min(chunk.len());
                self.s.write_all(&chunk[..k]).expect("stream");
                left -= k;
            }
            let mut ack = [0u8];
            self.s.read_exact(&mut ack).expect("ack");
            if rep > 0 {
                rates.push(total as f64 / t.elapsed().as_secs_f64() / 1e9);
            }
        }
        median(rates)
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.s.write_all(&[b'q'; 9]);
        let _ = self.child.wait();
    }
}

fn run_gaspi(transport: TransportChoice) -> Vec<(String, usize, f64)> {
    let mut job = Job::new(2, std::env::current_exe().expect("exe"));
    job.transport = transport;
    job.env.push((ROLE.into(), "rank".into()));
    if quick() {
        job.env.push((QUICK_ENV.into(), "1".into()));
    }
    job.timeout = Duration::from_secs(600);
    let out = job.run();
    out.assert_success();
    out.ranks[0]
        .stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 3 {
                return None;
            }
            Some((f[0].to_string(), f[1].parse().ok()?, f[2].parse().ok()?))
        })
        .collect()
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

fn main() {
    let quick_from_env = std::env::var_os(QUICK_ENV).is_some();
    match std::env::var(ROLE).ok().as_deref() {
        Some("rank") => {
            QUICK.get_or_init(|| quick_from_env);
            if let Err(e) = gaspi_rank() {
                eprintln!("rank failed: {e}");
                std::process::exit(1);
            }
            return;
        }
        Some(r) if r.starts_with("raw:") => {
            raw_server(r[4..].parse().expect("port"));
            return;
        }
        _ => {}
    }
    let args = Args::parse();
    QUICK.get_or_init(|| args.quick || quick_from_env);
    let mut raw = Raw::start();
    let raw_pp: Vec<f64> = PINGPONG.iter().map(|s| raw.pingpong(*s)).collect();
    let raw_bw = raw.stream(if quick() { 64 << 20 } else { 512 << 20 });
    let raw_bidir = raw.bidirectional(if quick() { 64 << 20 } else { 512 << 20 });
    drop(raw);
    println!("peers (same run): raw TCP half RTT 8 B {:.2} us, 4 KiB {:.2} us; raw TCP stream {raw_bw:.2} GB/s (both directions at once: {raw_bidir:.2} GB/s each); memcpy: in rank 0, interleaved with the writes", raw_pp[0], raw_pp[1]);
    println!(
        "{:<6} {:<22} {:>8} {:>12} {:>20}",
        "xport", "test", "size", "median", "vs peer"
    );
    for t in [TransportChoice::Tcp, TransportChoice::Shm] {
        let results = run_gaspi(t);
        let memcpy_at = |size: usize| {
            results
                .iter()
                .find(|(k, s, _)| k == "memcpy" && *s == size)
                .map(|r| r.2)
                .expect("memcpy baseline")
        };
        for (kind, size, v) in results.iter().cloned() {
            if kind == "memcpy" {
                continue;
            }
            if kind == "pingpong" {
                let i = PINGPONG.iter().position(|s| *s == size).expect("size");
                println!(
                    "{:<6} {:<22} {:>8} {:>9.2} us {:>13.2}x raw",
                    t.as_str(),
                    "write_notify half-RTT",
                    human(size),
                    v,
                    v / raw_pp[i]
                );
            } else {
                let (peer, name) = if t == TransportChoice::Tcp {
                    (raw_bw, "raw TCP".to_string())
                } else {
                    let mc = memcpy_at(size);
                    (mc, format!("memcpy ({mc:.1} GB/s)"))
                };
                println!(
                    "{:<6} {:<22} {:>8} {:>7.2} GB/s {:>9.0}% of {name}",
                    t.as_str(),
                    "write_notify bandwidth",
                    human(size),
                    v,
                    100.0 * v / peer
                );
            }
        }
    }
}
