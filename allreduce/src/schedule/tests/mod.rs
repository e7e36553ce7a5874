//! All ranks of a schedule in one process, against a model of asynchronous transports: a
//! send is delivered at a random later point, reading its source *at delivery time* (like
//! TCP reading the segment when the socket has room), and a `Flush` delivers the rank's
//! pending sends. Ranks run several collectives back to back and refill their input as
//! soon as they finish, as applications do. Wrong data, a notification overwritten before
//! it was consumed, or a deadlock fail the test. `happens_before.rs` checks the same
//! schedules for races and early notifications whatever the order ranks run in.

mod broadcast;
mod flat;
mod happens_before;
mod hierarchical;
mod model;
mod symbolic;
