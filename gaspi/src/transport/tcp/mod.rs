//! TCP: the Ethernet fallback, and the control channel of every job.
//!
//! Each rank sends to a peer on one connection of its own, and receives from it on the one the
//! peer opened: every op to a peer travels one connection in posting order, so data always
//! arrives before a notification posted after it. See `wire` for the frame format,
//! `handshake` for the mesh set-up, `pair` for the link to one peer and `progress` for the two
//! threads that drive them all (one receives, one finishes queued sends). A thread blocked in
//! a wait also receives, for as long as it spins
//! ([`TcpTransport::poll_inbound`]); a connection's receive state is behind one lock, so
//! whichever thread holds it takes the bytes in, in order.

pub(crate) mod handshake;
pub(crate) mod pair;
pub(crate) mod progress;
pub(crate) mod wire;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use parking_lot::Mutex;

use crate::context::Shared;
use crate::env::JobToken;
use crate::error::{Error, Result};
use crate::queue::QueueState;
use crate::rpc::RpcSlot;
use crate::transport::{Dest, Transport, Xfer};
use crate::types::{AtomicOp, Deadline, Rank};
use pair::{Pair, Payload, PendingRead};
use progress::{Progress, Sender, LISTEN_TOKEN, WAKE_TOKEN};
use wire::{Header, Op, FLAG_CAS, FLAG_NOTIFY};

pub(crate) struct TcpTransport {
    sh: Arc<Shared>,
    pairs: Vec<Option<Arc<Pair>>>,
    /// The progress thread's epoll (incoming connections), also polled (never waited on) by
    /// waiting threads.
    epoll: Arc<Epoll>,
    /// Wake-ups of the progress thread and of the sending thread, to stop them.
    wakes: [Arc<EventFd>; 2],
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_read: AtomicU64,
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    listen_addr: SocketAddr,
}

fn epoll_err(e: nix::errno::Errno) -> Error {
    Error::Other(format!("epoll: {e}"))
}

fn new_epoll() -> Result<Arc<Epoll>> {
    Ok(Arc::new(
        Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(epoll_err)?,
    ))
}

/// An eventfd that wakes whoever waits on `epoll` (to tell it to stop).
fn wake_fd(epoll: &Epoll) -> Result<Arc<EventFd>> {
    let fd =
        EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).map_err(epoll_err)?;
    epoll
        .add(&fd, EpollEvent::new(EpollFlags::EPOLLIN, WAKE_TOKEN))
        .map_err(epoll_err)?;
    Ok(Arc::new(fd))
}

impl TcpTransport {
    /// Connects to every peer and starts the progress and sending threads.
    pub fn establish(
        sh: Arc<Shared>,
        listener: TcpListener,
        addrs: &[SocketAddr],
        token: JobToken,
        deadline: Deadline,
    ) -> Result<TcpTransport> {
        let listen_addr = listener.local_addr()?;
        let links = handshake::connect_mesh(sh.rank, sh.nranks, &listener, addrs, token, deadline)?;
        let epoll = new_epoll()?;
        let tx_epoll = new_epoll()?;
        let wakes = [wake_fd(&epoll)?, wake_fd(&tx_epoll)?];
        listener.set_nonblocking(true)?;
        epoll
            .add(
                &listener,
                EpollEvent::new(EpollFlags::EPOLLIN, LISTEN_TOKEN),
            )
            .map_err(epoll_err)?;

        let mut pairs: Vec<Option<Arc<Pair>>> = Vec::with_capacity(links.len());
        for (r, link) in links.into_iter().enumerate() {
            pairs.push(match link {
                Some(link) => {
                    tune(&link.tx)?;
                    tune(&link.rx)?;
                    let pair = Arc::new(Pair::new(
                        Rank(r as u16),
                        link,
                        sh.clone(),
                        epoll.clone(),
                        tx_epoll.clone(),
                    ));
                    epoll.add(&pair.rx, pair.rx_events()).map_err(epoll_err)?;
                    tx_epoll
                        .add(&pair.tx, pair.tx_events(false))
                        .map_err(epoll_err)?;
                    Some(pair)
                }
                None => None,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Progress {
            pairs: pairs.clone(),
            epoll: epoll.clone(),
            wake: wakes[0].clone(),
            stop: stop.clone(),
            listener,
            late: AtomicU64::new(0),
        };
        let sender = Sender {
            pairs: pairs.clone(),
            epoll: tx_epoll,
            wake: wakes[1].clone(),
            stop: stop.clone(),
        };
        let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(body)
                .map_err(|e| Error::Other(format!("cannot start a TCP thread: {e}")))
        };
        let threads = vec![
            spawn(
                format!("tnt-progress-{}", sh.rank),
                Box::new(move || progress.run()),
            )?,
            spawn(
                format!("tnt-send-{}", sh.rank),
                Box::new(move || sender.run()),
            )?,
        ];
        Ok(TcpTransport {
            sh,
            pairs,
            epoll,
            wakes,
            stop,
            threads: Mutex::new(threads),
            next_read: AtomicU64::new(1),
            listen_addr,
        })
    }

    /// Receives whatever has arrived, on the calling thread: a thread that waits for a
    /// notification calls this so that a message is taken in by the thread that needs it,
    /// without waiting for the progress thread to be scheduled (on a host with fewer cores
    /// than busy threads that hop dominated small-message latency). Never blocks: a peer
    /// that another thread is receiving from is skipped.
    pub fn poll_inbound(&self) {
        let mut events = [EpollEvent::empty(); 8];
        let n = match self.epoll.wait(&mut events, EpollTimeout::ZERO) {
            Ok(n) => n,
            Err(_) => return,
        };
        for ev in &events[..n] {
            let inbound = EpollFlags::EPOLLIN
                | EpollFlags::EPOLLHUP
                | EpollFlags::EPOLLERR
                | EpollFlags::EPOLLRDHUP;
            if !ev.events().intersects(inbound) {
                continue;
            }
            let Some(Some(pair)) = self.pairs.get(ev.data() as usize) else {
                continue; // the wake-up and listening tokens are the progress thread's
            };
            if pair.is_closed() {
                continue;
            }
            if let Some(Err(reason)) = pair.try_on_readable() {
                pair.fail(&reason);
            }
        }
    }

    #[cfg(feature = "testing")]
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    fn pair(&self, rank: Rank) -> Result<&Arc<Pair>> {
        match self.pairs.get(rank.index()) {
            Some(Some(p)) if !p.is_closed() => Ok(p),
            Some(Some(_)) => Err(Error::PeerFailed { rank }),
            _ => Err(Error::Other(format!("no connection to rank {rank}"))),
        }
    }

    /// Sends a control frame that nobody waits for.
    pub fn post_control(&self, rank: Rank, h: Header) -> Result<()> {
        self.pair(rank)?.post(h, Payload::None, None)
    }

    /// Sends a request and waits for the peer's answer (`Ack`, `AtomicResp`).
    pub fn call(&self, rank: Rank, h: Header, deadline: Deadline) -> Result<u64> {
        self.call_with(rank, h, Payload::None, deadline)
    }

    pub fn call_with(
        &self,
        rank: Rank,
        h: Header,
        payload: Payload,
        deadline: Deadline,
    ) -> Result<u64> {
        let (req, slot) = self.start_call(rank, h, payload)?;
        self.sh.rpc.wait(req, &slot, deadline)
    }

    /// Sends a request and returns its id and the slot its answer will land in.
    pub fn start_call(
        &self,
        rank: Rank,
        mut h: Header,
        payload: Payload,
    ) -> Result<(u64, Arc<RpcSlot>)> {
        let pair = self.pair(rank)?;
        let (req, slot) = self.sh.rpc.begin(rank);
        h.req = req;
        if let Err(e) = pair.post(h, payload, None) {
            self.sh.rpc.complete(req, Err(Error::PeerFailed { rank }));
            return Err(e);
        }
        Ok((req, slot))
    }

    /// Test hook: writes raw bytes on the connection to `rank`, as a faulty peer would.
    #[cfg(feature = "testing")]
    pub fn send_raw(&self, rank: Rank, bytes: Vec<u8>) -> Result<()> {
        use std::io::Write;
        let pair = self.pair(rank)?;
        (&pair.tx).write_all(&bytes).map_err(Error::from)
    }

    /// Orderly shutdown: say goodbye to every peer, let queued frames drain, wait (bounded)
    /// for the peers' goodbyes, then stop the progress thread.
    /// Says goodbye to every peer and stops the threads: waits up to `send_limit` for the
    /// goodbyes to leave, then up to `close_limit` (measured from the start too) for the
    /// peers to close their side.
    pub fn shutdown(&self, send_limit: Duration, close_limit: Duration) {
        let start = Instant::now();
        let until = start + send_limit;
        for p in self.pairs.iter().flatten() {
            p.leave();
            if !p.is_closed() {
                let _ = p.post(Header::new(Op::Bye), Payload::None, None);
            }
        }
        // Bounded drain: goodbyes are tiny, so this normally ends at once.
        while Instant::now() < until
            && !self
                .pairs
                .iter()
                .flatten()
                .all(|p| p.is_closed() || p.send_idle())
        {
            std::thread::yield_now();
        }
        for p in self.pairs.iter().flatten() {
            let _ = p.tx.shutdown(std::net::Shutdown::Write);
        }
        let until = start + close_limit;
        while Instant::now() < until && !self.pairs.iter().flatten().all(|p| p.is_closed()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.stop.store(true, Ordering::Release);
        for w in &self.wakes {
            let _ = w.write(1);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        for p in self.pairs.iter().flatten() {
            let _ = p.tx.shutdown(std::net::Shutdown::Both);
            let _ = p.rx.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        if !self.threads.lock().is_empty() {
            self.shutdown(Duration::from_millis(200), Duration::from_millis(200));
        }
    }
}

fn tune(stream: &TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(None)?;
    stream.set_nonblocking(true)?;
    Ok(())
}

impl Transport for TcpTransport {
    fn write(
        &self,
        x: &Xfer<'_>,
        notify: Option<(u32, u32)>,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        let mut h = Header::new(Op::Write);
        h.seg = x.remote.key;
        h.offset = x.remote_off as u64;
        h.len = x.len as u64;
        if let Some((id, value)) = notify {
            h.flags |= FLAG_NOTIFY;
            h.notif_id = id;
            h.notif_val = value;
        }
        let payload = Payload::Segment {
            mem: x.local.clone(),
            off: x.local_off,
            len: x.len,
        };
        self.pair(x.remote.rank)?.post(h, payload, q)
    }

    fn notify(&self, dst: &Dest, id: u32, value: u32, q: Option<&Arc<QueueState>>) -> Result<()> {
        let mut h = Header::new(Op::Notify);
        h.seg = dst.key;
        h.notif_id = id;
        h.notif_val = value;
        self.pair(dst.rank)?.post(h, Payload::None, q)
    }

    fn read(&self, x: &Xfer<'_>, notify: Option<u32>, q: Option<&Arc<QueueState>>) -> Result<()> {
        let pair = self.pair(x.remote.rank)?;
        let req = self.next_read.fetch_add(1, Ordering::Relaxed);
        if let Some(q) = q {
            q.begin_async();
        }
        pair.add_read(
            req,
            PendingRead {
                mem: x.local.clone(),
                off: x.local_off,
                len: x.len,
                notify,
                done: q.cloned(),
            },
        );
        let mut h = Header::new(Op::ReadReq);
        h.seg = x.remote.key;
        h.offset = x.remote_off as u64;
        h.len = x.len as u64;
        h.req = req;
        if let Err(e) = pair.post(h, Payload::None, None) {
            // Undo unless the failure path already completed it.
            if let Some(r) = pair.take_read(req) {
                if let Some(q) = r.done {
                    q.complete(None);
                }
            }
            return Err(e);
        }
        Ok(())
    }

    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, deadline: Deadline) -> Result<u64> {
        let mut h = Header::new(Op::AtomicReq);
        h.seg = dst.key;
        h.offset = off as u64;
        match op {
            AtomicOp::FetchAdd { add } => h.a = add,
            AtomicOp::CompareSwap { expected, new } => {
                h.flags |= FLAG_CAS;
                h.a = expected;
                h.b = new;
            }
        }
        self.call(dst.rank, h, deadline)
    }
}
