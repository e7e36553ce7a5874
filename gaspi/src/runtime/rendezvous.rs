//! Rendezvous: every rank learns every other rank's data address and host through rank 0.
//!
//! Rank 0 listens at `GASPI_RENDEZVOUS`; the others connect (retrying until the init
//! deadline, since rank 0 may start later), present the job token, their rank, their host
//! identity and the address of their data listener. Rank 0 answers a wrong token, a wrong job
//! size or a duplicate rank with a reason and drops the connection; once all ranks are in,
//! it sends everyone the table.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::env::{JobEnv, JobToken, RENDEZVOUS};
use crate::error::{Error, ProtocolError, Result};
use crate::transport::verbs::address::VerbsHello;
use crate::types::{Deadline, Rank};
use crate::wire::admission::{Admission, Admitted, Framing};
use crate::wire::codec::{read_message, write_message, Decoder, Encoder, ReadMessageError};

const MAGIC_HELLO: &[u8; 4] = b"TNTB";
const MAGIC_TABLE: &[u8; 4] = b"TNTT";
const MAGIC_REJECT: &[u8; 4] = b"TNTR";
/// Rank 0 gave the job up (some ranks never joined); the text says which.
const MAGIC_ABANDON: &[u8; 4] = b"TNTA";

/// What every rank learns at init.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    pub hosts: Vec<String>,
    pub addrs: Vec<SocketAddr>,
    /// Chosen by rank 0; makes shared-memory file names unique per run.
    pub nonce: u64,
    /// Per rank: its verbs endpoint record and its queue pair numbers meant for this rank
    /// (both empty when that rank has no verbs device). Opaque here; see `transport::verbs`.
    pub verbs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Identity of "this host" for shared memory: same kernel boot and same network namespace.
/// Ranks in different network namespaces count as different hosts (as containers do).
pub(crate) fn host_identity() -> String {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let netns = std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{host}|{}|{netns}", boot.trim())
}

/// The largest rendezvous frame either side accepts.
const MAX_FRAME: usize = 1 << 20;
/// How long a connection to the rendezvous has for its whole request.
const HELLO_WITHIN: Duration = Duration::from_secs(5);

fn send_frame(stream: &TcpStream, body: &[u8]) -> Result<()> {
    Ok(write_message(stream, body)?)
}

fn recv_frame(stream: &TcpStream, deadline: Deadline) -> Result<Vec<u8>> {
    read_message(stream, deadline, MAX_FRAME).map_err(|e| match e {
        ReadMessageError::Io(e)
            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
        {
            Error::Timeout
        }
        e => Error::Bootstrap(format!("reading from the rendezvous: {e}")),
    })
}

fn truncated(e: ProtocolError) -> Error {
    Error::Bootstrap(format!("rendezvous table: {e}"))
}

fn resolve(rendezvous: &str) -> Result<SocketAddr> {
    rendezvous
        .to_socket_addrs()
        .map_err(|e| {
            Error::Env(format!(
                "{RENDEZVOUS}={rendezvous:?} cannot be resolved: {e}"
            ))
        })?
        .next()
        .ok_or_else(|| {
            Error::Env(format!(
                "{RENDEZVOUS}={rendezvous:?} resolves to no address"
            ))
        })
}

/// A data listener on `ip` (port chosen by the kernel).
fn data_listener(env: &JobEnv, ip: IpAddr) -> Result<TcpListener> {
    let ip = match &env.addr {
        Some(a) => a
            .parse()
            .map_err(|_| Error::Env(format!("GASPI_ADDR={a:?} is not an IP address")))?,
        None => ip,
    };
    TcpListener::bind((ip, 0)).map_err(|e| Error::Bootstrap(format!("cannot listen on {ip}: {e}")))
}

/// Runs the rendezvous; returns the table and this rank's data listener.
pub(crate) fn rendezvous(
    env: &JobEnv,
    verbs: &VerbsHello,
    deadline: Deadline,
) -> Result<(Table, TcpListener)> {
    let rv = env
        .rendezvous
        .as_deref()
        .ok_or_else(|| Error::Env(format!("{RENDEZVOUS} is not set")))?;
    let addr = resolve(rv)?;
    if env.rank == Rank(0) {
        serve(env, verbs, addr, deadline)
    } else {
        join(env, verbs, addr, deadline)
    }
}

fn timeout_error(env: &JobEnv, what: &str) -> Error {
    Error::Bootstrap(format!(
        "{what} within {} ms (GASPI_INIT_TIMEOUT_MS); is rank 0 running and {RENDEZVOUS}={} right?",
        env.init_timeout_ms,
        env.rendezvous.as_deref().unwrap_or("?")
    ))
}

/// How long a rank that has joined waits for rank 0's verdict (the table, or why the job was
/// given up): its own deadline, plus a quarter of the init timeout (at most 1 s).
///
/// Rank 0 was listening when this rank connected, so it started first, and with the same
/// timeout its deadline passes first, but only by the time between the two starts: a few
/// milliseconds under a launcher. Without the grace, a busy host let the joined rank's own
/// timeout win that race, and it reported a bare timeout instead of which ranks never came.
fn verdict_deadline(own: Deadline, init_timeout: Duration) -> Deadline {
    let grace = (init_timeout / 4).min(Duration::from_secs(1));
    match own.remaining() {
        Some(left) => Deadline::after(left + grace),
        None => Deadline::NEVER,
    }
}

fn join(
    env: &JobEnv,
    verbs: &VerbsHello,
    addr: SocketAddr,
    deadline: Deadline,
) -> Result<(Table, TcpListener)> {
    let stream = loop {
        let limit = deadline
            .remaining()
            .unwrap_or(Duration::from_secs(5))
            .min(Duration::from_secs(5));
        if limit.is_zero() {
            return Err(timeout_error(env, "could not reach the rendezvous"));
        }
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(s) => break s,
            Err(e) if deadline.expired() => {
                return Err(Error::Bootstrap(format!(
                    "could not reach the rendezvous at {addr}: {e}"
                )))
            }
            // Rank 0 may not be listening yet: retry with a short pause.
            Err(_) => std::thread::sleep(Duration::from_millis(20).min(limit)),
        }
    };
    let local_ip = stream.local_addr()?.ip();
    let listener = data_listener(env, local_ip)?;
    let mut w = Encoder::new();
    w.raw(MAGIC_HELLO)
        .raw(&env.token.0)
        .u16(env.rank.0)
        .u16(env.nranks)
        .str(&host_identity())
        .str(&listener.local_addr()?.to_string())
        .bytes(&verbs.common)
        .u16(env.nranks);
    for r in 0..usize::from(env.nranks) {
        w.bytes(verbs.for_peer(r));
    }
    send_frame(&stream, &w.finish())?;
    let init_timeout = Duration::from_millis(env.init_timeout_ms);
    let reply =
        recv_frame(&stream, verdict_deadline(deadline, init_timeout)).map_err(|e| match e {
            Error::Timeout => timeout_error(env, "the job did not assemble"),
            other => other,
        })?;
    if reply.starts_with(MAGIC_ABANDON) {
        // Say what rank 0 saw (which ranks never came), so that whoever reads this rank's
        // failure, the launcher's blame included, learns the cause, not a closed socket.
        let why = String::from_utf8_lossy(&reply[4..]).into_owned();
        return Err(Error::Bootstrap(format!("rank 0 gave the job up: {why}")));
    }
    if reply.starts_with(MAGIC_REJECT) {
        let why = String::from_utf8_lossy(&reply[4..]).into_owned();
        return Err(Error::Bootstrap(format!(
            "rank 0 rejected this rank: {why}"
        )));
    }
    if !reply.starts_with(MAGIC_TABLE) {
        return Err(Error::Bootstrap(
            "unexpected reply from the rendezvous".into(),
        ));
    }
    let mut r = Decoder::new(&reply[4..]);
    let n = r.u16().map_err(truncated)?;
    if n != env.nranks {
        return Err(Error::Bootstrap(format!(
            "rendezvous table has {n} ranks, expected {}",
            env.nranks
        )));
    }
    let nonce = r.u64().map_err(truncated)?;
    let mut hosts = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..n {
        hosts.push(r.str().map_err(truncated)?);
        let a = r.str().map_err(truncated)?;
        addrs.push(
            a.parse()
                .map_err(|_| Error::Bootstrap(format!("bad address {a:?} in the table")))?,
        );
    }
    let mut table_verbs = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        table_verbs.push((r.bytes().map_err(truncated)?, r.bytes().map_err(truncated)?));
    }
    Ok((
        Table {
            hosts,
            addrs,
            nonce,
            verbs: table_verbs,
        },
        listener,
    ))
}

fn serve(
    env: &JobEnv,
    verbs: &VerbsHello,
    addr: SocketAddr,
    deadline: Deadline,
) -> Result<(Table, TcpListener)> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into()).map_err(|e| {
        Error::Bootstrap(format!("rank 0 cannot listen at {RENDEZVOUS}={addr}: {e}"))
    })?;
    socket.listen(128)?;
    let rv: TcpListener = socket.into();
    rv.set_nonblocking(true)?;

    let n = usize::from(env.nranks);
    let mut hosts = vec![String::new(); n];
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; n];
    let mut conns: Vec<(usize, TcpStream)> = Vec::new();
    let mut hellos: Vec<VerbsHello> = vec![VerbsHello::default(); n];
    hellos[0] = verbs.clone();
    let mut my_listener: Option<TcpListener> = None;
    hosts[0] = host_identity();
    // Strangers may connect too: each request must be complete within a few seconds of its
    // connection, all are read at once, and at most this many wait at a time.
    let mut admission = Admission::new(
        Framing::LengthPrefixed { max: MAX_FRAME },
        2 * n + 64,
        HELLO_WITHIN.min(deadline.remaining().unwrap_or(HELLO_WITHIN)),
    );
    while conns.len() < n - 1 {
        if deadline.expired() {
            let missing: Vec<usize> = (1..n).filter(|r| addrs[*r].is_none()).collect();
            let why = format!("ranks {missing:?} did not join");
            // The ranks that did join wait for the table: tell them why none comes.
            let m = Encoder::new()
                .raw(MAGIC_ABANDON)
                .raw(format!("{why} within {} ms", env.init_timeout_ms).as_bytes())
                .finish();
            for (_, c) in &conns {
                let _ = c.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = send_frame(c, &m);
            }
            return Err(timeout_error(env, &why));
        }
        for Admitted {
            stream,
            from,
            message,
        } in admission.poll(&rv, deadline)?
        {
            match check_hello(env, &message, &addrs) {
                Ok((rank, host, data, v)) => {
                    if my_listener.is_none() {
                        my_listener = Some(data_listener(env, stream.local_addr()?.ip())?);
                    }
                    hosts[rank] = host;
                    addrs[rank] = Some(data);
                    hellos[rank] = v;
                    conns.push((rank, stream));
                }
                Err(why) => {
                    tracing::warn!("rendezvous: rejected {from}: {why}");
                    let m = Encoder::new()
                        .raw(MAGIC_REJECT)
                        .raw(why.to_string().as_bytes())
                        .finish();
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = send_frame(&stream, &m);
                }
            }
        }
    }
    let listener = my_listener.expect("at least one peer joined");
    addrs[0] = Some(listener.local_addr()?);
    let nonce = u64::from(std::process::id()) << 32
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    let addrs: Vec<SocketAddr> = addrs.into_iter().map(|a| a.expect("all joined")).collect();
    let mut w = Encoder::new();
    w.raw(MAGIC_TABLE).u16(env.nranks).u64(nonce);
    for (h, a) in hosts.iter().zip(&addrs) {
        w.str(h).str(&a.to_string());
    }
    let body = w.finish();
    // Each rank gets every rank's verbs record plus the queue pairs meant for it.
    for (dest, c) in &conns {
        let mut w = Encoder::new();
        w.raw(&body);
        for h in &hellos {
            w.bytes(&h.common).bytes(h.for_peer(*dest));
        }
        send_frame(c, &w.finish())?;
    }
    let verbs = hellos
        .iter()
        .map(|h| (h.common.clone(), h.for_peer(0).to_vec()))
        .collect();
    Ok((
        Table {
            hosts,
            addrs,
            nonce,
            verbs,
        },
        listener,
    ))
}

/// Why rank 0 turned a join request away (sent back to the requester as text).
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("not a tarantella rendezvous request")]
    NotOurs,
    #[error("wrong job token (GASPI_JOB_TOKEN differs from rank 0's)")]
    WrongToken,
    #[error("job size {got} differs from rank 0's {expected}")]
    JobSize { got: u16, expected: u16 },
    #[error("rank {0} is not valid here")]
    InvalidRank(u16),
    #[error("rank {0} joined twice")]
    Twice(u16),
    #[error("bad data address {0:?}")]
    BadAddress(String),
    #[error("malformed request: {0}")]
    Malformed(#[from] ProtocolError),
}

/// A join request: the rank, its host identity, its data address and its verbs hello.
type Join = (usize, String, SocketAddr, VerbsHello);

fn check_hello(
    env: &JobEnv,
    body: &[u8],
    seen: &[Option<SocketAddr>],
) -> std::result::Result<Join, Refusal> {
    let mut r = Decoder::new(body);
    if r.array::<4>().ok().as_ref() != Some(MAGIC_HELLO) {
        return Err(Refusal::NotOurs);
    }
    if JobToken(r.array()?) != env.token {
        return Err(Refusal::WrongToken);
    }
    let rank = r.u16()?;
    let nranks = r.u16()?;
    if nranks != env.nranks {
        return Err(Refusal::JobSize {
            got: nranks,
            expected: env.nranks,
        });
    }
    if rank == 0 || rank >= nranks {
        return Err(Refusal::InvalidRank(rank));
    }
    if seen[usize::from(rank)].is_some() {
        return Err(Refusal::Twice(rank));
    }
    let host = r.str()?;
    let a = r.str()?;
    let addr = a.parse().map_err(|_| Refusal::BadAddress(a))?;
    let common = r.bytes()?;
    let count = r.u16()?;
    let to_peer = (0..count)
        .map(|_| r.bytes())
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((
        usize::from(rank),
        host,
        addr,
        VerbsHello { common, to_peer },
    ))
}
