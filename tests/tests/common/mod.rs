//! Helpers shared by the GASPI tests (`gaspi_rules_*.rs`, the fault and multi-host tests).

#![allow(dead_code, unused_macros, unused_imports)]

pub use std::collections::BTreeSet;
pub use std::time::{Duration, Instant};

pub use gaspi::*;

pub const T: Timeout = Timeout::ms(20_000);
pub const S: SegmentId = SegmentId(0);
pub const Q: QueueId = QueueId(0);
pub const MIB: u64 = 1 << 20;
pub const TEST: Timeout = Timeout::TEST;
pub const MS20: Timeout = Timeout::ms(20);

/// Like `spmd_cases!`, with an explicit [`Config`].
#[macro_export]
macro_rules! cases_with {
    ($name:ident, $config:expr, $body:expr, $($case:ident = ($n:expr, $t:ident)),+ $(,)?) => {
        mod $name {
            use super::*;
            $(
                #[test]
                fn $case() {
                    tarantella_tests::run_case(
                        concat!(stringify!($name), "::", stringify!($case)),
                        $n,
                        tarantella_tests::Net::$t,
                        $config,
                        Duration::from_secs(60),
                        $body,
                    );
                }
            )+
        }
    };
}

/// Asserts that `res` matches `pat`, printing the call and what it returned otherwise.
#[macro_export]
macro_rules! must {
    ($res:expr, $pat:pat $(if $guard:expr)?) => {{
        let res = $res;
        assert!(matches!(res, $pat $(if $guard)?), "{}: {res:?}", stringify!($res));
    }};
}

#[track_caller]
pub fn timed_out<V: std::fmt::Debug>(res: Result<V>) {
    assert!(
        matches!(res, Err(Error::Timeout)),
        "expected a timeout: {res:?}"
    );
}

pub fn right(ctx: &Context) -> Rank {
    Rank((ctx.rank().0 + 1) % ctx.num_ranks())
}

pub fn left(ctx: &Context) -> Rank {
    Rank((ctx.rank().0 + ctx.num_ranks() - 1) % ctx.num_ranks())
}

pub fn nid(id: u32) -> NotificationId {
    NotificationId(id)
}

/// Byte `off` of local segment 0.
pub fn lo(off: u64) -> Local {
    Local::new(S, off)
}

/// Byte `off` of `rank`'s segment 0.
pub fn at(rank: Rank, off: u64) -> Remote {
    Remote::new(rank, S, off)
}

/// Creates segment `seg` of `size` bytes on every rank and returns the local handle.
pub fn create(ctx: &Context, seg: SegmentId, size: u64) -> Segment {
    let init = Alloc::Initialized;
    ctx.segment_create(seg, size, Group::ALL, T, init).unwrap();
    ctx.segment(seg).unwrap()
}

/// Creates segment [`S`] of 1 MiB on every rank, as the fault tests use it, and returns its id.
pub fn setup(ctx: &Context) -> SegmentId {
    create(ctx, S, MIB);
    S
}

pub fn finish(ctx: Context) {
    ctx.barrier(Group::ALL, T).unwrap();
    ctx.term(T).unwrap();
}

/// Waits for notification `id` of `seg`, resets it and returns its (non-zero) value.
pub fn take(ctx: &Context, seg: SegmentId, id: u32) -> u32 {
    assert_eq!(ctx.notify_waitsome(seg, nid(id), 1, T).unwrap(), nid(id));
    let v = ctx.notify_reset(seg, nid(id)).unwrap();
    assert_ne!(v, 0, "notification {id} was seen set but reset returned 0");
    v
}

/// `words` u64s that differ per tag (iteration), rank and position.
pub fn pattern(tag: u64, rank: Rank, words: usize) -> Vec<u64> {
    let base = (tag << 48) | (u64::from(rank.0) << 32);
    (0..words as u64).map(|i| base | i).collect()
}

pub fn check_words(seg: &Segment, off: u64, expect: &[u64], what: &str) {
    let mut got = vec![0u64; expect.len()];
    seg.read(off, &mut got).unwrap();
    if let Some(i) = got.iter().zip(expect).position(|(a, b)| a != b) {
        let (g, e) = (got[i], expect[i]);
        panic!(
            "{what}: word {i} of {} is {g:#x}, expected {e:#x}",
            expect.len()
        );
    }
}

pub fn check_bytes(seg: &Segment, len: usize, byte: u8, what: &str) {
    let mut got = vec![0u8; len];
    seg.read(0, &mut got).unwrap();
    if let Some(i) = got.iter().position(|b| *b != byte) {
        panic!("{what}: byte {i} is {:#x}, expected {byte:#x}", got[i]);
    }
}

pub fn list(offsets: &[(u64, u64)], size: u64) -> Vec<ListElem> {
    let elem = |&(local, remote)| ListElem {
        local: lo(local),
        remote_segment: S,
        remote_offset: remote,
        size,
    };
    offsets.iter().map(elem).collect()
}
