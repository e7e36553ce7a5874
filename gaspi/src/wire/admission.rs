//! Admission of connections that have not proved who they are yet: rendezvous requests at
//! rank 0 and the peers' hellos while the mesh is built.
//!
//! Anyone who can reach a listening port can connect, so the first message of every
//! connection is read here, for all of them at once (non-blocking, one `poll`), within a
//! deadline for the *whole* message rather than for each read, and with a cap on how many
//! may wait at a time (the oldest waiting one is dropped for a new one). A stranger who
//! connects and says nothing, or trickles a byte now and then, costs a slot for a few
//! seconds and never delays anyone else.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::error::{Error, ProtocolError, Result};
use crate::types::Deadline;

/// How a first message is delimited.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Framing {
    /// Exactly this many bytes.
    Fixed(usize),
    /// A little-endian `u32` length, then that many bytes (at most `max`).
    LengthPrefixed { max: usize },
}

/// A connection whose first message is complete.
pub(crate) struct Admitted {
    /// Blocking again, ready for the answer.
    pub stream: TcpStream,
    pub from: SocketAddr,
    /// The message (without its length prefix).
    pub message: Vec<u8>,
}

struct Waiting {
    stream: TcpStream,
    from: SocketAddr,
    buf: Vec<u8>,
    until: Instant,
}

/// The connections waiting to be admitted.
pub(crate) struct Admission {
    framing: Framing,
    cap: usize,
    per_connection: Duration,
    waiting: Vec<Waiting>,
}

/// What reading a waiting connection found.
enum Reading {
    Complete(Vec<u8>),
    Partial,
    Dropped(ProtocolError),
}

impl Admission {
    /// At most `cap` connections wait at once; each has `per_connection` for its message.
    pub fn new(framing: Framing, cap: usize, per_connection: Duration) -> Self {
        Admission {
            framing,
            cap: cap.max(1),
            per_connection,
            waiting: Vec::new(),
        }
    }

    /// Waits until `deadline` (or shortly before a waiting connection's own deadline) for
    /// new connections on `listener` and for bytes from the waiting ones, and returns the
    /// connections whose first message is complete (possibly none).
    pub fn poll(&mut self, listener: &TcpListener, deadline: Deadline) -> Result<Vec<Admitted>> {
        let now = Instant::now();
        let mut wait = deadline.remaining().unwrap_or(Duration::from_secs(1));
        wait = wait.min(Duration::from_secs(1));
        if let Some(first) = self.waiting.iter().map(|w| w.until).min() {
            wait = wait.min(first.saturating_duration_since(now));
        }
        let ready: Vec<bool> = {
            let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
            fds.extend(
                self.waiting
                    .iter()
                    .map(|w| PollFd::new(w.stream.as_fd(), PollFlags::POLLIN)),
            );
            let ms = wait.as_millis().min(i32::MAX as u128) as i32;
            match poll(
                &mut fds,
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(Error::Bootstrap(format!("poll: {e}"))),
            }
            fds.iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect()
        };
        let mut done = Vec::new();
        let mut keep = Vec::with_capacity(self.waiting.len());
        for (mut w, ready) in std::mem::take(&mut self.waiting)
            .into_iter()
            .zip(&ready[1..])
        {
            let outcome = if *ready {
                self.read(&mut w)
            } else {
                Reading::Partial
            };
            match outcome {
                Reading::Complete(message) => match w.stream.set_nonblocking(false) {
                    Ok(()) => done.push(Admitted {
                        stream: w.stream,
                        from: w.from,
                        message,
                    }),
                    Err(e) => tracing::warn!("dropped a connection from {}: {e}", w.from),
                },
                Reading::Dropped(why) => {
                    tracing::warn!("dropped a connection from {}: {why}", w.from)
                }
                Reading::Partial if Instant::now() >= w.until => tracing::warn!(
                    "dropped a connection from {}: no complete message within {:?}",
                    w.from,
                    self.per_connection
                ),
                Reading::Partial => keep.push(w),
            }
        }
        self.waiting = keep;
        if ready[0] {
            self.accept(listener)?;
        }
        Ok(done)
    }

    /// Takes every pending connection off the listener.
    fn accept(&mut self, listener: &TcpListener) -> Result<()> {
        loop {
            match listener.accept() {
                Ok((stream, from)) => {
                    stream.set_nonblocking(true)?;
                    if self.waiting.len() >= self.cap {
                        let oldest = self.waiting.remove(0);
                        tracing::warn!(
                            "dropped a connection from {}: {} connections are waiting to say who they are",
                            oldest.from,
                            self.cap
                        );
                    }
                    self.waiting.push(Waiting {
                        stream,
                        from,
                        buf: Vec::new(),
                        until: Instant::now() + self.per_connection,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A connection that died in the backlog (ECONNABORTED and the like) is not
                // the listener failing.
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) => return Err(Error::Bootstrap(format!("accept: {e}"))),
            }
        }
    }

    /// Reads what `w` has sent so far.
    fn read(&self, w: &mut Waiting) -> Reading {
        loop {
            let need = match wanted(self.framing, &w.buf) {
                Ok(0) => {
                    let skip = match self.framing {
                        Framing::Fixed(_) => 0,
                        Framing::LengthPrefixed { .. } => 4,
                    };
                    return Reading::Complete(w.buf.split_off(skip));
                }
                Ok(n) => n,
                Err(why) => return Reading::Dropped(why),
            };
            let start = w.buf.len();
            w.buf.resize(start + need, 0);
            match w.stream.read(&mut w.buf[start..]) {
                Ok(0) => return Reading::Dropped(ProtocolError::Closed),
                Ok(n) => w.buf.truncate(start + n),
                Err(e) => {
                    w.buf.truncate(start);
                    match e.kind() {
                        ErrorKind::WouldBlock => return Reading::Partial,
                        ErrorKind::Interrupted => {}
                        _ => return Reading::Dropped(ProtocolError::Receive(e.kind())),
                    }
                }
            }
        }
    }
}

/// How many more bytes the message in `buf` needs (0: complete), or why it is refused.
fn wanted(framing: Framing, buf: &[u8]) -> std::result::Result<usize, ProtocolError> {
    match framing {
        Framing::Fixed(n) => Ok(n - buf.len()),
        Framing::LengthPrefixed { max } => {
            if buf.len() < 4 {
                return Ok(4 - buf.len());
            }
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if len > max {
                return Err(ProtocolError::TooLong {
                    len: len as u64,
                    max: max as u64,
                });
            }
            Ok(4 + len - buf.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn framing_says_how_much_is_missing() {
        assert_eq!(wanted(Framing::Fixed(8), &[1, 2, 3]), Ok(5));
        assert_eq!(wanted(Framing::Fixed(3), &[1, 2, 3]), Ok(0));
        let max = Framing::LengthPrefixed { max: 16 };
        assert_eq!(wanted(max, &[2, 0]), Ok(2));
        assert_eq!(wanted(max, &[2, 0, 0, 0, 9]), Ok(1));
        assert_eq!(wanted(max, &[2, 0, 0, 0, 9, 9]), Ok(0));
        assert!(wanted(max, &[17, 0, 0, 0]).is_err());
    }

    /// Idle and trickling strangers do not delay a client that sends its message at once,
    /// and are dropped at their own deadline.
    #[test]
    fn strangers_do_not_delay_a_prompt_client() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut adm = Admission::new(
            Framing::LengthPrefixed { max: 64 },
            4,
            Duration::from_millis(300),
        );
        // Six idle strangers: over the cap of 4, the oldest are dropped for newer ones.
        let idle: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut trickle = TcpStream::connect(addr).unwrap();
        trickle.write_all(&[5, 0]).unwrap();
        let mut good = TcpStream::connect(addr).unwrap();
        good.write_all(&[3, 0, 0, 0, b'a', b'b', b'c']).unwrap();
        let started = Instant::now();
        let deadline = Deadline::after(Duration::from_secs(5));
        let mut got = Vec::new();
        while got.is_empty() && !deadline.expired() {
            got = adm.poll(&listener, deadline).unwrap();
        }
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].message, b"abc");
        assert!(
            started.elapsed() < Duration::from_millis(250),
            "{:?}",
            started.elapsed()
        );
        assert!(adm.waiting.len() <= 4);
        // The rest say nothing complete: all gone at their deadline, none admitted.
        while !adm.waiting.is_empty() && !deadline.expired() {
            assert!(adm.poll(&listener, deadline).unwrap().is_empty());
        }
        assert!(adm.waiting.is_empty());
        assert!(started.elapsed() < Duration::from_secs(2));
        drop((idle, trickle));
    }
}
