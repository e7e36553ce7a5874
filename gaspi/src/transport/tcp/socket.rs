//! System calls on the data connections that Rust's std does not offer: a vectored send
//! that never raises `SIGPIPE`, a read straight into segment memory, and whether bytes wait
//! to be read.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use crate::error::Result;
use crate::memory::segment_memory::SegmentMemory;

/// Sets a data connection up for the transport: no Nagle delay, non-blocking.
pub(crate) fn tune(stream: &TcpStream) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(None)?;
    stream.set_nonblocking(true)?;
    Ok(())
}

/// Whether bytes (or the end of the stream) wait to be read on `stream` right now.
pub(crate) fn readable_now(stream: &TcpStream) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
}

/// Vectored non-blocking send of `iov` on a socket: bytes sent, or the I/O error
/// (`WouldBlock` when the socket buffer is full). A peer that has gone gives `EPIPE`, never
/// `SIGPIPE`: a C program linking libgaspi keeps the default action, which would kill it.
pub(crate) fn send_vectored(fd: &impl AsRawFd, iov: &[libc::iovec]) -> std::io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: every iovec points to live memory (segment data checked by `iovec`, or Rust
    // buffers owned by the caller for the duration of the call); the kernel only reads it.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Non-blocking read from a socket straight into segment data `[off, off+len)`.
pub(crate) fn read_into(
    fd: &impl AsRawFd,
    mem: &SegmentMemory,
    off: usize,
    len: usize,
) -> std::io::Result<usize> {
    let iov = mem.iovec(off, len);
    // SAFETY: `iov` covers checked segment memory; the kernel writes at most `len` bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), iov.iov_base, iov.iov_len) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}
