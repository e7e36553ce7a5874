//! The progress thread: one per process, drives every connection with epoll. It receives
//! frames into segments, finishes queued sends, answers reads, atomics and control requests,
//! and turns connection errors into peer failures. Application threads never wait on it to
//! post; they wait for completions it signals, and while they spin in a wait they take in
//! arriving frames themselves (`TcpTransport::poll_inbound`), so that latency does not hang
//! on when this thread is scheduled.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::EventFd;

use crate::env::JobToken;
use crate::transport::tcp::handshake;
use crate::transport::tcp::pair::Pair;

pub(crate) const WAKE_TOKEN: u64 = u64::MAX;
pub(crate) const LISTEN_TOKEN: u64 = u64::MAX - 1;

pub(crate) struct Progress {
    pub pairs: Vec<Option<Arc<Pair>>>,
    pub epoll: Arc<Epoll>,
    pub wake: Arc<EventFd>,
    pub stop: Arc<AtomicBool>,
    pub listener: TcpListener,
    pub token: JobToken,
    pub nranks: u16,
}

impl Progress {
    pub fn run(self) {
        let mut events = vec![EpollEvent::empty(); 64];
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    tracing::error!("progress thread: epoll_wait failed: {e}");
                    return;
                }
            };
            for ev in &events[..n] {
                match ev.data() {
                    WAKE_TOKEN => {
                        let _ = self.wake.read();
                        if self.stop.load(Ordering::Acquire) {
                            return;
                        }
                    }
                    LISTEN_TOKEN => self.accept_late(),
                    rank => self.serve(rank as usize, ev.events()),
                }
            }
        }
    }

    fn serve(&self, rank: usize, flags: EpollFlags) {
        let Some(pair) = self.pairs.get(rank).and_then(|p| p.as_ref()) else {
            return;
        };
        if pair.is_closed() {
            return;
        }
        if flags.contains(EpollFlags::EPOLLOUT) {
            if let Err(e) = pair.flush() {
                pair.fail(&format!("send: {e}"));
                return;
            }
        }
        if flags.intersects(
            EpollFlags::EPOLLIN
                | EpollFlags::EPOLLHUP
                | EpollFlags::EPOLLERR
                | EpollFlags::EPOLLRDHUP,
        ) {
            if let Err(reason) = pair.on_readable() {
                pair.fail(&reason);
            }
        }
    }

    /// The mesh is complete after init: any later connection is checked and dropped, on a
    /// short-lived thread so a slow or hostile client cannot stall progress.
    fn accept_late(&self) {
        loop {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    let token = self.token;
                    let nranks = self.nranks;
                    let _ = std::thread::Builder::new().name("tnt-late-conn".into()).spawn(move || {
                        let verdict = handshake::read_hello(&stream, token, nranks, Duration::from_secs(2));
                        match verdict {
                            Ok(h) => tracing::warn!(
                                "dropped a connection from {from} claiming rank {}: the mesh is already complete",
                                h.rank
                            ),
                            Err(why) => tracing::warn!("dropped a connection from {from}: {why}"),
                        }
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    return;
                }
            }
        }
    }
}
