//! TCP: the Ethernet fallback, and the control channel of every job.
//!
//! Each rank sends to a peer on one connection of its own, and receives from it on the one the
//! peer opened: every op to a peer travels one connection in posting order, so data always
//! arrives before a notification posted after it. The frame format is `crate::wire::frame`;
//! here, `handshake` sets the mesh up, `pair` is the link to one peer (`send` its outgoing
//! half, `receive` its incoming state machine, `execute` what incoming frames do),
//! `endpoint` what the links need of the process, and `threads` the two threads that drive
//! them all (one receives, one finishes queued sends; with a heartbeat timeout the latter
//! also sends heartbeats and fails silent peers, see `heartbeat`). A thread blocked in
//! a wait also receives, for as long as it polls ([`TcpTransport::poll_inbound`]), and
//! meanwhile frames need not wake the progress thread (`inbound`); a connection's receive
//! state is behind one lock, so whichever thread holds it takes the bytes in, in order.

pub(crate) mod endpoint;
mod execute;
pub(crate) mod handshake;
pub(crate) mod heartbeat;
pub(crate) mod inbound;
pub(crate) mod pair;
pub(crate) mod receive;
pub(crate) mod send;
pub(crate) mod socket;
pub(crate) mod threads;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use nix::sys::eventfd::{EfdFlags, EventFd};
use parking_lot::Mutex;

use crate::env::JobToken;
use crate::error::{Error, Result};
use crate::transport::completion::QueueState;
use crate::transport::requests::{AtomicCall, AtomicsInDoubt, RpcSlot};
use crate::transport::tcp::endpoint::Endpoint;
use crate::transport::tcp::inbound::{Inbound, InboundHold};
use crate::transport::tcp::pair::Pair;
use crate::transport::tcp::receive::PendingRead;
use crate::transport::tcp::send::Payload;
use crate::transport::tcp::socket::tune;
use crate::transport::tcp::threads::{ReceiveLoop, Sender, LISTEN_TOKEN, WAKE_TOKEN};
use crate::transport::{Dest, Transport, Xfer};
use crate::types::{AtomicOp, Deadline, Rank};
use crate::wire::control::ControlMessage;
use crate::wire::frame::{FrameKind, Header, FLAG_CAS, FLAG_NOTIFY};

/// The TCP transport: one [`Pair`] of connections per peer and the threads that drive them.
pub(crate) struct TcpTransport {
    endpoint: Arc<Endpoint>,
    pairs: Vec<Option<Arc<Pair>>>,
    /// The incoming connections, polled by the progress thread and by waiting threads.
    inbound: Arc<Inbound>,
    /// Wake-ups of the progress thread and of the sending thread, to stop them.
    wakes: [Arc<EventFd>; 2],
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_read: AtomicU64,
    /// Atomics whose call timed out, with their request and answer slot (see
    /// [`AtomicsInDoubt`]).
    atomics_in_doubt: AtomicsInDoubt<(u64, Arc<RpcSlot>)>,
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    listen_addr: SocketAddr,
}

fn new_epoll() -> Result<Arc<Epoll>> {
    Ok(Arc::new(Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?))
}

/// An eventfd that wakes whoever waits on `epoll` (to tell it to stop).
fn wake_fd(epoll: &Epoll) -> Result<Arc<EventFd>> {
    let fd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
    epoll.add(&fd, EpollEvent::new(EpollFlags::EPOLLIN, WAKE_TOKEN))?;
    Ok(Arc::new(fd))
}

impl TcpTransport {
    /// Connects to every peer and starts the progress and sending threads.
    pub fn establish(
        endpoint: Arc<Endpoint>,
        listener: TcpListener,
        addrs: &[SocketAddr],
        token: JobToken,
        deadline: Deadline,
    ) -> Result<TcpTransport> {
        let listen_addr = listener.local_addr()?;
        let links = handshake::connect_mesh(
            endpoint.rank,
            endpoint.nranks,
            &listener,
            addrs,
            token,
            deadline,
        )?;
        let epoll = new_epoll()?;
        let inbound = Arc::new(Inbound::new(epoll.clone())?);
        let tx_epoll = new_epoll()?;
        let wakes = [wake_fd(&epoll)?, wake_fd(&tx_epoll)?];
        listener.set_nonblocking(true)?;
        epoll.add(
            &listener,
            EpollEvent::new(EpollFlags::EPOLLIN, LISTEN_TOKEN),
        )?;

        let mut pairs: Vec<Option<Arc<Pair>>> = Vec::with_capacity(links.len());
        for (r, link) in links.into_iter().enumerate() {
            pairs.push(match link {
                Some(link) => {
                    tune(&link.tx)?;
                    tune(&link.rx)?;
                    let pair = Arc::new(Pair::new(
                        Rank(r as u16),
                        link,
                        endpoint.clone(),
                        inbound.sockets(),
                        tx_epoll.clone(),
                    ));
                    inbound.add(&pair)?;
                    tx_epoll.add(&pair.outbox.tx, pair.outbox.events(false))?;
                    Some(pair)
                }
                None => None,
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let progress = ReceiveLoop {
            pairs: pairs.clone(),
            epoll,
            inbound: inbound.clone(),
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
            endpoint: endpoint.clone(),
        };
        let spawn = |name: String, body: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name).spawn(body)
        };
        let threads = vec![
            spawn(
                format!("tnt-progress-{}", endpoint.rank),
                Box::new(move || progress.run()),
            )?,
            spawn(
                format!("tnt-send-{}", endpoint.rank),
                Box::new(move || sender.run()),
            )?,
        ];
        Ok(TcpTransport {
            endpoint,
            pairs,
            inbound,
            wakes,
            stop,
            threads: Mutex::new(threads),
            next_read: AtomicU64::new(1),
            atomics_in_doubt: AtomicsInDoubt::default(),
            listen_addr,
        })
    }

    /// Receives whatever has arrived, on the calling thread: a thread that waits for a
    /// notification calls this so that a message is taken in by the thread that needs it,
    /// without waiting for the progress thread to be scheduled (on a host with fewer cores
    /// than busy threads that hop dominated small-message latency). Never blocks: a peer
    /// that another thread is receiving from is skipped. True when something arrived (the
    /// caller's condition may hold now).
    pub fn poll_inbound(&self) -> bool {
        self.inbound.poll(&self.pairs, true) > 0
    }

    /// Says that the calling thread polls with [`poll_inbound`](Self::poll_inbound) until
    /// the guard is dropped, so that arriving frames need not wake the progress thread (see
    /// `inbound`).
    pub fn hold_inbound(&self) -> InboundHold<'_> {
        self.inbound.hold()
    }

    /// Hands incoming frames back to the progress thread now: the caller is about to sleep,
    /// or to wait for what only the progress thread delivers while it sleeps.
    pub fn hand_back_inbound(&self) {
        self.inbound.hand_back();
    }

    #[cfg(feature = "testing")]
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// Returns once no receive or send that may have seen segment memory unrevoked is still
    /// copying into it or sending from it: those that start later see the revocation (see
    /// `SegmentMemory::revoke`).
    pub(crate) fn wait_for_transfers(&self) {
        for pair in self.pairs.iter().flatten() {
            pair.wait_for_receive();
            pair.outbox.wait_for_send();
        }
    }

    fn pair(&self, rank: Rank) -> Result<&Arc<Pair>> {
        match self.pairs.get(rank.index()) {
            Some(Some(p)) if !p.is_closed() => Ok(p),
            Some(Some(_)) => Err(Error::PeerFailed { rank }),
            _ => Err(Error::NotConnected {
                rank,
                transport: "TCP",
            }),
        }
    }

    /// Sends a control message that nobody waits for (a notice: deletion, kill).
    pub fn post_control(&self, rank: Rank, msg: &ControlMessage) -> Result<()> {
        self.pair(rank)?.post(msg.header(), Payload::None, None)
    }

    /// Sends a control request (registration, ping) and waits for its acknowledgement.
    pub fn call_control(&self, rank: Rank, msg: &ControlMessage, deadline: Deadline) -> Result<()> {
        self.call(rank, msg.header(), deadline).map(|_| ())
    }

    /// Sends a request and waits for the peer's answer (`Ack`, `AtomicResp`).
    pub fn call(&self, rank: Rank, h: Header, deadline: Deadline) -> Result<u64> {
        let (req, slot) = self.start_call(rank, h, Payload::None)?;
        self.endpoint.requests.wait(req, &slot, deadline)
    }

    /// Sends a request and returns its id and the slot its answer will land in.
    pub fn start_call(
        &self,
        rank: Rank,
        mut h: Header,
        payload: Payload,
    ) -> Result<(u64, Arc<RpcSlot>)> {
        let pair = self.pair(rank)?;
        // The answer comes through the progress thread while the caller sleeps.
        self.inbound.hand_back();
        let (req, slot) = self.endpoint.requests.begin(rank);
        h.req = req;
        if let Err(e) = pair.post(h, payload, None) {
            // The request's own rank: never refused.
            let _ = self
                .endpoint
                .requests
                .complete(req, rank, Err(Error::PeerFailed { rank }));
            return Err(e);
        }
        Ok((req, slot))
    }

    /// Test hook: writes raw bytes on the connection to `rank`, as a faulty peer would.
    #[cfg(feature = "testing")]
    pub fn send_raw(&self, rank: Rank, bytes: Vec<u8>) -> Result<()> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::io::{ErrorKind, Write};
        use std::os::fd::AsFd;
        let pair = self.pair(rank)?;
        let mut rest = &bytes[..];
        // The connection is non-blocking: more than its buffer takes waits for room.
        while !rest.is_empty() {
            match (&pair.outbox.tx).write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(pair.outbox.tx.as_fd(), PollFlags::POLLOUT)];
                    poll(&mut fds, PollTimeout::NONE)?;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Test hook: this rank takes nothing in from `rank` any more (see
    /// `Pair::stop_receiving`).
    #[cfg(feature = "testing")]
    pub fn stop_receiving_from(&self, rank: Rank) -> Result<()> {
        self.pair(rank)?.stop_receiving()
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
                let _ = p.post(ControlMessage::Goodbye.header(), Payload::None, None);
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
            let _ = p.outbox.tx.shutdown(std::net::Shutdown::Write);
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
            let _ = p.outbox.tx.shutdown(std::net::Shutdown::Both);
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

impl Transport for TcpTransport {
    fn write(
        &self,
        x: &Xfer<'_>,
        notify: Option<(u32, u32)>,
        q: Option<&Arc<QueueState>>,
    ) -> Result<()> {
        let mut h = Header::new(FrameKind::Write);
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
        let mut h = Header::new(FrameKind::Notify);
        h.seg = dst.key;
        h.notif_id = id;
        h.notif_val = value;
        self.pair(dst.rank)?.post(h, Payload::None, q)
    }

    fn read(&self, x: &Xfer<'_>, notify: Option<u32>, q: Option<&Arc<QueueState>>) -> Result<()> {
        let pair = self.pair(x.remote.rank)?;
        // The data comes through the progress thread while `wait` sleeps.
        self.inbound.hand_back();
        let req = self.next_read.fetch_add(1, Ordering::Relaxed);
        if let Some(q) = q {
            q.begin_async();
        }
        pair.reads.add(
            req,
            PendingRead {
                mem: x.local.clone(),
                off: x.local_off,
                len: x.len,
                notify,
                done: q.cloned(),
            },
        );
        let mut h = Header::new(FrameKind::ReadReq);
        h.seg = x.remote.key;
        h.offset = x.remote_off as u64;
        h.len = x.len as u64;
        h.req = req;
        if let Err(e) = pair.post(h, Payload::None, None) {
            // Undo unless the failure path already completed it.
            if let Some(r) = pair.reads.cancel(req) {
                if let Some(q) = r.done {
                    q.complete(None);
                }
            }
            return Err(e);
        }
        Ok(())
    }

    /// Once the request is out the target applies it, so a `Timeout` here leaves it in
    /// doubt, and the caller's retry with the same arguments waits for its answer (see
    /// [`AtomicsInDoubt`]) rather than applying the operation again.
    fn atomic(&self, dst: &Dest, off: usize, op: AtomicOp, deadline: Deadline) -> Result<u64> {
        let call = AtomicCall::on(dst, off, op);
        let (req, slot) = match self.atomics_in_doubt.take(&call) {
            Some(sent) => {
                // As `start_call` does: the answer may come through this thread's receive.
                self.inbound.hand_back();
                sent
            }
            None => {
                let mut h = Header::new(FrameKind::AtomicReq);
                h.seg = dst.key;
                h.offset = off as u64;
                match op {
                    AtomicOp::FetchAdd { add } => h.word = add,
                    AtomicOp::CompareSwap { expected, new } => {
                        h.flags |= FLAG_CAS;
                        h.word = expected;
                        h.swap_new = new;
                    }
                }
                self.start_call(dst.rank, h, Payload::None)?
            }
        };
        match self.endpoint.requests.wait_resumable(&slot, deadline) {
            Err(Error::Timeout) => {
                if let Some((given_up, _)) = self.atomics_in_doubt.keep(call, (req, slot)) {
                    self.endpoint.requests.forget(given_up);
                }
                Err(Error::Timeout)
            }
            answer => answer,
        }
    }
}
