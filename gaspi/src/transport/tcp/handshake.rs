//! Building the connection mesh at init: every rank connects to every other rank, and accepts a
//! connection from every other rank. A connection carries frames one way only, from the rank
//! that opened it (the peer sends nothing back but TCP acknowledgements): sending and
//! receiving then never contend for one socket's lock, and the kernel never has to queue one
//! direction's segments behind the other's (on loopback, two one-way connections stream
//! about 25% more per direction than one duplex connection; see `docs/gaspi.md`).
//!
//! The connecting side presents the job token first; a connection with a wrong token, an
//! impossible rank or a duplicate is dropped before it reaches anything.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::env::JobToken;
use crate::error::{Error, ProtocolError, Result};
use crate::types::{Deadline, Rank};
use crate::wire::admission::{Admission, Admitted, Framing};
use crate::wire::hello::{Hello, HELLO_LEN};

const ACCEPTED: u8 = b'K';

/// How long a connection to the data listener has for its whole hello.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

/// Checks a peer's hello. `Err` says why the connection must be dropped.
pub(crate) fn check_hello(
    bytes: &[u8],
    token: JobToken,
    nranks: u16,
) -> std::result::Result<Hello, ProtocolError> {
    let bytes: &[u8; HELLO_LEN] = bytes
        .try_into()
        .map_err(|_| ProtocolError::HelloLength(bytes.len()))?;
    let hello = Hello::decode(bytes)?;
    if hello.token != token {
        return Err(ProtocolError::WrongToken);
    }
    if hello.nranks != nranks || hello.rank >= nranks {
        return Err(ProtocolError::ForeignRank {
            rank: hello.rank,
            nranks: hello.nranks,
            expected: nranks,
        });
    }
    Ok(hello)
}

/// The two connections between this rank and one peer.
pub(crate) struct Link {
    /// Opened by this rank: carries what this rank sends.
    pub tx: TcpStream,
    /// Opened by the peer: carries what the peer sends.
    pub rx: TcpStream,
}

/// Raises the soft limit on open files when the mesh needs more than it allows (see
/// [`nofile_soft_limit_for`]).
fn make_room_for_sockets(nranks: u16) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if let Some(raised) = nofile_soft_limit_for(nranks, soft, hard) {
        match setrlimit(Resource::RLIMIT_NOFILE, raised, hard) {
            Ok(()) => tracing::debug!("open-file limit raised from {soft} to {raised}"),
            Err(e) => tracing::warn!("cannot raise the open-file limit from {soft}: {e}"),
        }
    }
}

/// The soft open-file limit a mesh of `nranks` needs, when `soft` is too low: two sockets per
/// peer, plus room for the segments, epolls and the application's own files. The default
/// soft limit (1024) would otherwise stop jobs of about 500 ranks. The hard limit stays as
/// the administrator set it; a mesh that does not fit under it fails with `EMFILE`.
fn nofile_soft_limit_for(nranks: u16, soft: u64, hard: u64) -> Option<u64> {
    let needed = 2 * u64::from(nranks) + 256;
    (soft < needed && soft < hard).then(|| needed.min(hard))
}

/// Connects the mesh; returns one link per peer (None for self).
pub(crate) fn connect_mesh(
    me: Rank,
    nranks: u16,
    listener: &TcpListener,
    addrs: &[SocketAddr],
    token: JobToken,
    deadline: Deadline,
) -> Result<Vec<Option<Link>>> {
    make_room_for_sockets(nranks);
    let (accepted, connected) = std::thread::scope(|s| {
        let acceptor = s.spawn(|| accept_all(me, nranks, listener, token, deadline));
        let connected = connect_all(me, nranks, addrs, token, deadline);
        (
            acceptor
                .join()
                .unwrap_or_else(|_| Err(Error::Bootstrap("acceptor panicked".into()))),
            connected,
        )
    });
    let mut rx: Vec<Option<TcpStream>> = (0..nranks).map(|_| None).collect();
    for (r, s) in accepted? {
        rx[r.index()] = Some(s);
    }
    let mut links: Vec<Option<Link>> = (0..nranks).map(|_| None).collect();
    for (r, tx) in connected? {
        let rx = rx[r.index()]
            .take()
            .ok_or_else(|| Error::Bootstrap(format!("rank {r} did not connect")))?;
        links[r.index()] = Some(Link { tx, rx });
    }
    Ok(links)
}

/// Accepts one connection from every other rank.
fn accept_all(
    me: Rank,
    nranks: u16,
    listener: &TcpListener,
    token: JobToken,
    deadline: Deadline,
) -> Result<Vec<(Rank, TcpStream)>> {
    let expected = usize::from(nranks - 1);
    let mut got: Vec<(Rank, TcpStream)> = Vec::new();
    listener.set_nonblocking(true)?;
    // Strangers may connect too: see `admission`.
    let mut admission = Admission::new(
        Framing::Fixed(HELLO_LEN),
        2 * usize::from(nranks) + 64,
        HELLO_WITHIN,
    );
    while got.len() < expected {
        if deadline.expired() {
            let missing: Vec<u16> = (0..nranks)
                .filter(|r| *r != me.0 && !got.iter().any(|(g, _)| g.0 == *r))
                .collect();
            return Err(Error::Bootstrap(format!(
                "timed out waiting for ranks {missing:?} to connect (GASPI_INIT_TIMEOUT_MS)"
            )));
        }
        for Admitted {
            stream,
            from,
            message,
        } in admission.poll(listener, deadline)?
        {
            match check_hello(&message, token, nranks) {
                Ok(h) if h.rank != me.0 && !got.iter().any(|(r, _)| r.0 == h.rank) => {
                    (&stream).write_all(&[ACCEPTED])?;
                    got.push((Rank(h.rank), stream));
                }
                Ok(h) => tracing::warn!(
                    "dropped a connection from {from}: rank {} is this rank or connected already",
                    h.rank
                ),
                Err(why) => tracing::warn!("dropped a connection from {from}: {why}"),
            }
        }
    }
    Ok(got)
}

/// Opens this rank's connection to every other rank, starting with the next rank up so that
/// the ranks do not all queue at rank 0's listener first.
fn connect_all(
    me: Rank,
    nranks: u16,
    addrs: &[SocketAddr],
    token: JobToken,
    deadline: Deadline,
) -> Result<Vec<(Rank, TcpStream)>> {
    let mut out = Vec::new();
    for peer in (1..nranks).map(|k| (me.0 + k) % nranks) {
        let addr = addrs[usize::from(peer)];
        let limit = deadline
            .remaining()
            .unwrap_or(Duration::from_secs(30))
            .max(Duration::from_millis(1));
        let stream = TcpStream::connect_timeout(&addr, limit)
            .map_err(|e| Error::Bootstrap(format!("connecting to rank {peer} at {addr}: {e}")))?;
        stream.set_nodelay(true)?;
        let hello = Hello {
            token,
            rank: me.0,
            nranks,
        };
        (&stream).write_all(&hello.encode())?;
        stream.set_read_timeout(Some(limit))?;
        let mut ack = [0u8; 1];
        (&stream).read_exact(&mut ack).map_err(|e| {
            Error::Bootstrap(format!("rank {peer} did not accept our connection: {e}"))
        })?;
        if ack[0] != ACCEPTED {
            return Err(Error::Bootstrap(format!(
                "rank {peer} rejected our connection"
            )));
        }
        out.push((Rank(peer), stream));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_mesh_raises_the_soft_open_file_limit_up_to_the_hard_one() {
        assert_eq!(nofile_soft_limit_for(4, 1024, 4096), None);
        assert_eq!(nofile_soft_limit_for(1000, 1024, 1 << 20), Some(2256));
        assert_eq!(nofile_soft_limit_for(1000, 1024, 2000), Some(2000));
        assert_eq!(nofile_soft_limit_for(1000, 2000, 2000), None);
        assert_eq!(nofile_soft_limit_for(1000, 4096, 4096), None);
    }
}
