//! Creating a collective's segment: the members agree on a segment id free on all of them
//! and check that they all asked for the same collective.

use std::sync::Arc;

use gaspi::{Alloc, Context, Group, SegmentId, Timeout};
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::region::OwnedSegment;

/// Serializes this process's collective constructors, so two threads creating collectives
/// at once cannot both pick the same free id.
static CREATE: Mutex<()> = Mutex::new(());

/// Words of the bitmap of segment ids in use (256 ids).
const WORDS: usize = 4;
/// Words describing the collective (count, kind/type/reduction/algorithm, chunk size).
pub(crate) const SIGNATURE: usize = 3;
/// Words the setup allreduce ORs: the id bitmap, the signature and its complement.
const PAYLOAD: usize = WORDS + 2 * SIGNATURE;

/// Collectively creates a segment of `bytes` on every member of `group`, with the highest
/// id that no member uses (applications usually number their own segments from 0).
///
/// The same bitwise-OR allreduce also compares `signature` across members: the OR of all
/// signatures equals ours and the OR of all complements equals our complement only if
/// every member passed the same words, and every member sees the same two ORs, so a
/// mismatch is reported on all of them rather than leaving some waiting.
pub(crate) fn create_segment(
    ctx: &Arc<Context>,
    group: Group,
    bytes: usize,
    signature: [u64; SIGNATURE],
    timeout: Timeout,
) -> Result<OwnedSegment> {
    let _one_at_a_time = CREATE.lock();
    let max = ctx.segment_max().min(WORDS as u32 * 64);
    let mut used = [0u64; PAYLOAD];
    for s in ctx.segment_list() {
        used[usize::from(s.0) / 64] |= 1 << (s.0 % 64);
    }
    for (i, w) in signature.iter().enumerate() {
        used[WORDS + i] = *w;
        used[WORDS + SIGNATURE + i] = !*w;
    }
    let mut anywhere = [0u64; PAYLOAD];
    ctx.allreduce_user(
        bytemuck::cast_slice(&used),
        bytemuck::cast_slice_mut(&mut anywhere),
        8,
        &mut |a, b, out| {
            for ((o, x), y) in out.chunks_mut(8).zip(a.chunks(8)).zip(b.chunks(8)) {
                let v = u64::from_ne_bytes(x.try_into().expect("8-byte element"))
                    | u64::from_ne_bytes(y.try_into().expect("8-byte element"));
                o.copy_from_slice(&v.to_ne_bytes());
            }
            Ok(())
        },
        group,
        timeout,
    )?;
    let agree = (0..SIGNATURE).all(|i| {
        anywhere[WORDS + i] == signature[i] && anywhere[WORDS + SIGNATURE + i] == !signature[i]
    });
    if !agree {
        return Err(Error::SetupMismatch);
    }
    let free = (0..max)
        .rev()
        .find(|&id| anywhere[id as usize / 64] & (1 << (id % 64)) == 0)
        .ok_or(Error::NoFreeSegment { max })?;
    let id = SegmentId(free as _);
    ctx.segment_create(
        id,
        bytes.max(8) as u64,
        group,
        timeout,
        Alloc::Uninitialized,
    )?;
    let seg = OwnedSegment::new(Arc::clone(ctx), id)?;
    // A member that finishes early (a collective with nothing to send) could otherwise
    // delete the segment while a peer still waits for its registration.
    ctx.barrier(group, timeout)?;
    Ok(seg)
}
