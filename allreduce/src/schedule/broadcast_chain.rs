//! Pipelined chain broadcast: chunks forwarded along `root -> root+1 -> ...` (large
//! messages).

use super::action::{Action, Schedule};
use super::shape::{chunks, local_only, relative, Shape};

/// Pipelined chain broadcast `root -> root+1 -> ...`, in chunks: each rank forwards chunk
/// `c` as soon as it arrives, so the time is about one message time plus `p-2` chunk
/// times. Notification 0 is the child's "ready", `1 + c` carries chunk `c`.
pub(crate) fn broadcast_chain(sh: &Shape, root: usize) -> Schedule {
    let p = sh.ranks;
    let bytes = sh.data_bytes();
    if p == 1 || bytes == 0 {
        return local_only(sh, false);
    }
    let v = relative(sh.me, root, p);
    let limit = (sh.notif_limit as usize).saturating_sub(1).max(1);
    let chunk = sh
        .chunk_bytes
        .max(bytes.div_ceil(limit))
        .max(sh.elem)
        .next_multiple_of(sh.elem);
    let mut a = Vec::new();
    if v > 0 {
        a.push(Action::notify((sh.me + p - 1) % p, 0));
    }
    let child = (v + 1 < p).then_some((sh.me + 1) % p);
    if let Some(from) = child {
        a.push(Action::Recv { notif: 0, from });
    }
    for (c, off, n) in chunks(0, bytes, chunk) {
        if v > 0 {
            a.push(Action::Recv {
                notif: 1 + c as u32,
                from: (sh.me + p - 1) % p,
            });
        }
        if let Some(to) = child {
            a.push(Action::Send {
                to,
                src: off,
                dst: off,
                len: n,
                notif: 1 + c as u32,
            });
        }
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: bytes,
        notifications: 1 + bytes.div_ceil(chunk) as u32,
    }
}
