//! Rendezvous: every rank learns every other rank's data address and host through rank 0.
//!
//! Rank 0 listens at `GASPI_RENDEZVOUS`; the others connect (retrying until the init
//! deadline, since rank 0 may start later), present the job token, their rank, their host
//! identity and the address of their data listener. Rank 0 answers a wrong token, a wrong job
//! size or a duplicate rank with a reason and drops the connection; once all ranks are in,
//! it sends everyone the table.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::admission::{Admission, Admitted, Framing};
use crate::env::{JobEnv, JobToken, RENDEZVOUS};
use crate::error::{Error, Result};
use crate::types::{Deadline, Rank};

const MAGIC_HELLO: &[u8; 4] = b"TNTB";
const MAGIC_TABLE: &[u8; 4] = b"TNTT";
const MAGIC_REJECT: &[u8; 4] = b"TNTR";

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

/// What this rank contributes to the verbs part of the rendezvous: one record for everyone
/// and one blob per peer (its queue pair numbers towards that peer). Empty without verbs.
#[derive(Clone, Debug, Default)]
pub(crate) struct VerbsHello {
    pub common: Vec<u8>,
    pub to_peer: Vec<Vec<u8>>,
}

impl VerbsHello {
    fn for_peer(&self, r: usize) -> &[u8] {
        self.to_peer.get(r).map_or(&[], |v| v.as_slice())
    }
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

struct Wire<'a>(&'a mut Vec<u8>);

impl Wire<'_> {
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u16(b.len() as u16);
        self.0.extend_from_slice(b);
    }
}

/// The largest rendezvous frame either side accepts.
const MAX_FRAME: usize = 1 << 20;
/// How long a connection to the rendezvous has for its whole request.
const HELLO_WITHIN: Duration = Duration::from_secs(5);

fn send_frame(stream: &TcpStream, body: &[u8]) -> Result<()> {
    let mut s = stream;
    s.write_all(&(body.len() as u32).to_le_bytes())?;
    s.write_all(body)?;
    Ok(())
}

fn recv_frame(stream: &TcpStream, deadline: Deadline) -> Result<Vec<u8>> {
    let limit = deadline
        .remaining()
        .unwrap_or(Duration::from_secs(3600))
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(limit))?;
    let mut s = stream;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .map_err(|e| Error::Bootstrap(format!("reading from the rendezvous: {e}")))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(Error::Bootstrap(format!("rendezvous frame of {len} bytes")));
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body)
        .map_err(|e| Error::Bootstrap(format!("reading from the rendezvous: {e}")))?;
    Ok(body)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or_else(|| Error::Bootstrap("truncated message".into()))?;
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn str(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| Error::Bootstrap("bad string".into()))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = usize::from(self.u16()?);
        Ok(self.take(n)?.to_vec())
    }
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
    let mut body = MAGIC_HELLO.to_vec();
    body.extend_from_slice(&env.token.0);
    let mut w = Wire(&mut body);
    w.u16(env.rank.0);
    w.u16(env.nranks);
    w.str(&host_identity());
    w.str(&listener.local_addr()?.to_string());
    w.bytes(&verbs.common);
    w.u16(env.nranks);
    for r in 0..usize::from(env.nranks) {
        w.bytes(verbs.for_peer(r));
    }
    send_frame(&stream, &body)?;
    let reply = recv_frame(&stream, deadline).map_err(|e| match e {
        Error::Bootstrap(m)
            if m.contains("timed out") || m.contains("would block") || m.contains("Resource") =>
        {
            timeout_error(env, "the job did not assemble")
        }
        other => other,
    })?;
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
    let mut r = Reader { b: &reply, at: 4 };
    let n = r.u16()?;
    if n != env.nranks {
        return Err(Error::Bootstrap(format!(
            "rendezvous table has {n} ranks, expected {}",
            env.nranks
        )));
    }
    let nonce = r.u64()?;
    let mut hosts = Vec::new();
    let mut addrs = Vec::new();
    for _ in 0..n {
        hosts.push(r.str()?);
        let a = r.str()?;
        addrs.push(
            a.parse()
                .map_err(|_| Error::Bootstrap(format!("bad address {a:?} in the table")))?,
        );
    }
    let mut table_verbs = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        table_verbs.push((r.bytes()?, r.bytes()?));
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
            return Err(timeout_error(
                env,
                &format!("ranks {missing:?} did not join"),
            ));
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
                    let mut m = MAGIC_REJECT.to_vec();
                    m.extend_from_slice(why.as_bytes());
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
    let mut body = MAGIC_TABLE.to_vec();
    let mut w = Wire(&mut body);
    w.u16(env.nranks);
    body.extend_from_slice(&nonce.to_le_bytes());
    let mut w = Wire(&mut body);
    for (h, a) in hosts.iter().zip(&addrs) {
        w.str(h);
        w.str(&a.to_string());
    }
    // Each rank gets every rank's verbs record plus the queue pairs meant for it.
    for (dest, c) in &conns {
        let mut personal = body.clone();
        let mut w = Wire(&mut personal);
        for h in &hellos {
            w.bytes(&h.common);
            w.bytes(h.for_peer(*dest));
        }
        send_frame(c, &personal)?;
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

fn check_hello(
    env: &JobEnv,
    body: &[u8],
    seen: &[Option<SocketAddr>],
) -> std::result::Result<(usize, String, SocketAddr, VerbsHello), String> {
    if !body.starts_with(MAGIC_HELLO) || body.len() < 4 + 16 + 4 {
        return Err("not a tarantella rendezvous request".into());
    }
    let mut token = [0u8; 16];
    token.copy_from_slice(&body[4..20]);
    if JobToken(token) != env.token {
        return Err("wrong job token (GASPI_JOB_TOKEN differs from rank 0's)".into());
    }
    let mut r = Reader { b: body, at: 20 };
    let rank = r.u16().map_err(|e| e.to_string())?;
    let nranks = r.u16().map_err(|e| e.to_string())?;
    if nranks != env.nranks {
        return Err(format!(
            "job size {nranks} differs from rank 0's {}",
            env.nranks
        ));
    }
    if rank == 0 || rank >= nranks {
        return Err(format!("rank {rank} is not valid here"));
    }
    if seen[usize::from(rank)].is_some() {
        return Err(format!("rank {rank} joined twice"));
    }
    let host = r.str().map_err(|e| e.to_string())?;
    let a = r.str().map_err(|e| e.to_string())?;
    let addr = a.parse().map_err(|_| format!("bad data address {a:?}"))?;
    let common = r.bytes().map_err(|e| e.to_string())?;
    let count = r.u16().map_err(|e| e.to_string())?;
    let to_peer = (0..count)
        .map(|_| r.bytes().map_err(|e| e.to_string()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok((
        usize::from(rank),
        host,
        addr,
        VerbsHello { common, to_peer },
    ))
}
