//! Where remote operations land: segment memory (mapping, notification slots, futex,
//! bounds-checked copies), the table of local and peers' segments, the passive inbox, and
//! the shared-memory files this process owns (unlinked on SIGTERM and SIGHUP too).
//! Nothing here knows how bytes travel.

mod futex;
pub(crate) mod owned_files;
pub(crate) mod passive_inbox;
pub(crate) mod segment_memory;
pub(crate) mod segment_table;
