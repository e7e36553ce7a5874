//! Binomial-tree broadcast: few rounds, the whole message per edge (small messages).

use super::action::{Action, Schedule};
use super::shape::{local_only, relative, Shape};

/// Binomial-tree broadcast: `log2(p)` rounds, the whole message per edge. Each child first
/// notifies its parent that its buffer may be overwritten (notification `1 + child`).
pub(crate) fn broadcast_tree(sh: &Shape, root: usize) -> Schedule {
    let p = sh.ranks;
    let bytes = sh.data_bytes();
    if p == 1 || bytes == 0 {
        return local_only(sh, false);
    }
    let v = relative(sh.me, root, p);
    let real = |u: usize| (u + root) % p;
    let mut a = Vec::new();
    // The lowest set bit of v is the edge from the parent; children hang off lower bits.
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            a.push(Action::notify(real(v - mask), 1 + v as u32));
            a.push(Action::Recv {
                notif: 0,
                from: real(v - mask),
            });
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        let child = v + mask;
        if child < p {
            a.push(Action::Recv {
                notif: 1 + child as u32,
                from: real(child),
            });
            a.push(Action::Send {
                to: real(child),
                src: 0,
                dst: 0,
                len: bytes,
                notif: 0,
            });
        }
        mask >>= 1;
    }
    a.push(Action::Flush);
    Schedule {
        actions: a,
        segment_bytes: bytes,
        notifications: 1 + p as u32,
    }
}
