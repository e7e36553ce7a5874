//! Identifier newtypes and small enums of the GASPI interface.

use std::fmt;
use std::time::{Duration, Instant};

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident($inner:ty)) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<$inner> for $name {
            fn from(v: $inner) -> Self {
                $name(v)
            }
        }
    };
}

id_type!(
    /// A process in the job, `0..nranks`.
    Rank(u16)
);
id_type!(
    /// A segment id, `0..segment_max`.
    SegmentId(u8)
);
id_type!(
    /// A communication queue, `0..queue_num`.
    QueueId(u8)
);
id_type!(
    /// A notification slot of a segment, `0..notification_num`.
    NotificationId(u32)
);
id_type!(
    /// A group of ranks. [`Group::ALL`] holds every rank and exists from init.
    Group(u8)
);

impl Group {
    /// `GASPI_GROUP_ALL`.
    pub const ALL: Group = Group(0);
}

impl Rank {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

/// How long a blocking call may wait: [`Timeout::TEST`] checks once, [`Timeout::BLOCK`] waits
/// for ever, anything else is milliseconds (the GASPI convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timeout(pub u64);

impl Timeout {
    /// `GASPI_TEST`: do not wait.
    pub const TEST: Timeout = Timeout(0);
    /// `GASPI_BLOCK`: wait for ever.
    pub const BLOCK: Timeout = Timeout(u64::MAX);

    pub const fn ms(ms: u64) -> Timeout {
        Timeout(ms)
    }

    /// The instant at which a call started now must give up; never for [`Timeout::BLOCK`].
    pub fn deadline(self) -> Deadline {
        if self == Timeout::BLOCK {
            Deadline(None)
        } else {
            Deadline(Instant::now().checked_add(Duration::from_millis(self.0)))
        }
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Self {
        Timeout(
            u64::try_from(d.as_millis())
                .unwrap_or(u64::MAX - 1)
                .min(u64::MAX - 1),
        )
    }
}

/// An absolute deadline (`None` inside means never): what a [`Timeout`] becomes when a call
/// starts, so that a call made of several waits gives up at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline(pub(crate) Option<Instant>);

impl Deadline {
    /// A deadline that never passes ([`Timeout::BLOCK`]).
    pub const NEVER: Deadline = Deadline(None);

    /// `d` from now.
    pub fn after(d: Duration) -> Self {
        Deadline(Instant::now().checked_add(d))
    }

    /// At `instant`.
    pub fn at(instant: Instant) -> Self {
        Deadline(Some(instant))
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        matches!(self.0, Some(t) if Instant::now() >= t)
    }

    /// Time left, `None` = unbounded.
    pub fn remaining(&self) -> Option<Duration> {
        self.0.map(|t| t.saturating_duration_since(Instant::now()))
    }

    /// The time left as a [`Timeout`] for a blocking call, rounded up to whole milliseconds
    /// (so a deadline not yet passed never becomes [`Timeout::TEST`] early).
    pub fn timeout(&self) -> Timeout {
        match self.remaining() {
            None => Timeout::BLOCK,
            Some(left) => Timeout(
                u64::try_from(left.as_micros().div_ceil(1000))
                    .unwrap_or(u64::MAX - 1)
                    .min(u64::MAX - 1),
            ),
        }
    }
}

/// Reduction operation of the small group allreduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Min = 0,
    Max = 1,
    Sum = 2,
}

/// Element type of the small group allreduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElementType {
    I32 = 0,
    U32 = 1,
    F32 = 2,
    F64 = 3,
    I64 = 4,
    U64 = 5,
}

impl ElementType {
    pub fn size(self) -> usize {
        match self {
            ElementType::I32 | ElementType::U32 | ElementType::F32 => 4,
            ElementType::F64 | ElementType::I64 | ElementType::U64 => 8,
        }
    }
}

/// Health of a peer as seen by this rank (`gaspi_state_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    Healthy = 0,
    Corrupt = 1,
}

/// `gaspi_network_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetworkType {
    Ib = 0,
    Roce = 1,
    Ethernet = 2,
    Gemini = 3,
    Aries = 4,
    Ofi = 5,
}

/// Whether new segment memory is zeroed (`gaspi_alloc_t`). Our memory always comes from
/// fresh mappings, so it is zeroed either way; the flag is kept for source compatibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Alloc {
    #[default]
    Uninitialized = 0,
    Initialized = 1,
}

/// A remote atomic operation on a `u64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    FetchAdd { add: u64 },
    CompareSwap { expected: u64, new: u64 },
}

/// Segment key inside the runtime: user segments `0..=254` (their [`SegmentId`]), internal
/// ones (group collectives) from [`INTERNAL_BASE`]. Also the segment field of a frame.
pub(crate) type SegKey = u16;

/// The first key of the runtime's internal segments.
pub(crate) const INTERNAL_BASE: SegKey = 256;
