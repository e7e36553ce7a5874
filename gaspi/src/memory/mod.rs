//! Where remote operations land: segment memory (mapping, notification slots, futex,
//! bounds-checked copies), the table of local and peers' segments, and the passive inbox.
//! Nothing here knows how bytes travel.

pub(crate) mod passive_inbox;
pub(crate) mod segment_memory;
pub(crate) mod segment_table;
