//! The control plane's handlers: one function per [`ControlMessage`], acting on the memory
//! layer's tables, the routes and the state vector. Nothing here touches a socket, so every
//! handler is unit-tested in one process.

use std::sync::{Arc, OnceLock};

use crate::env::shm_file;
use crate::error::{Error, Result};
use crate::memory::passive_inbox::PassiveInbox;
use crate::memory::segment_memory::SegmentMemory;
use crate::memory::segment_table::{RemoteSegment, SegmentTable};
use crate::state::StateVector;
use crate::transport::control_handler::ControlHandler;
use crate::transport::route::{Route, Routes};
use crate::types::{Rank, SegKey};
use crate::wire::control::{ControlMessage, SegmentAnnouncement};

/// What the control messages act on: the tables of this process that peers may change.
pub(crate) struct ControlPlane {
    pub segments: Arc<SegmentTable>,
    pub routes: Arc<Routes>,
    /// `/dev/shm/tnt-<job>-<nonce>` when segments are shared with local peers.
    pub shm_prefix: Option<String>,
    pub inbox: Arc<PassiveInbox>,
    pub state: Arc<StateVector>,
}

impl ControlPlane {
    /// A peer announced a segment: maps it when the peer shares memory with us, and records
    /// it so that accesses to it can be checked and routed.
    fn register_segment(&self, from: Rank, a: SegmentAnnouncement) -> Result<()> {
        let mut mem = None;
        if self.routes.get(from) == Route::Shm {
            if a.shm_data {
                let prefix = self
                    .shm_prefix
                    .as_deref()
                    .ok_or_else(|| Error::Device("no shared-memory prefix".into()))?;
                let path = shm_file(prefix, from.0, a.key);
                mem = Some(Arc::new(SegmentMemory::open_shared(
                    &path,
                    a.size as usize,
                    a.notif_count,
                )?));
            } else {
                tracing::info!(
                    rank = from.0,
                    segment = a.key,
                    "peer registered user memory: using TCP to it from now on"
                );
                self.routes.demote_to_tcp(from);
            }
        }
        self.segments.insert_remote(
            from,
            a.key,
            RemoteSegment {
                size: a.size,
                tag: a.tag,
                notif_count: a.notif_count,
                mem,
                verbs: OnceLock::new(),
            },
        );
        Ok(())
    }

    fn delete_segment(&self, from: Rank, key: SegKey) {
        self.segments.remove_remote(from, key);
    }

    /// The peer left in order: it is marked gone, and every wait that needs it (over
    /// shared memory too, where no connection would tell) ends now.
    fn goodbye(&self, from: Rank) {
        self.state.mark_gone(from);
        self.segments.wake_all();
    }

    fn kill(&self, from: Rank) {
        tracing::error!("rank {from} asked this rank to terminate (gaspi_proc_kill)");
        // SIGKILL runs neither destructors nor the signal and exit handlers: the shared-memory
        // files go first, or they would stay in `/dev/shm` where no launcher cleans up.
        crate::memory::owned_files::unlink_published();
        let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
    }
}

impl ControlHandler for ControlPlane {
    fn handle(&self, from: Rank, msg: ControlMessage) -> Option<Result<()>> {
        match msg {
            ControlMessage::RegisterSegment(a) => {
                let res = self.register_segment(from, a);
                if let Err(e) = &res {
                    tracing::warn!(peer = from.0, "cannot register peer segment {}: {e}", a.key);
                }
                Some(res)
            }
            ControlMessage::DeleteSegment { key } => {
                self.delete_segment(from, key);
                None
            }
            ControlMessage::Passive(data) => Some(self.inbox.push(from, data)),
            ControlMessage::Ping => Some(Ok(())),
            ControlMessage::Kill => {
                self.kill(from);
                None
            }
            ControlMessage::Goodbye => {
                self.goodbye(from);
                None
            }
            // Its arrival is what counts, and the transport has noted it (see
            // `transport::tcp::heartbeat`); a rank without a timeout of its own ignores it.
            ControlMessage::Heartbeat => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Deadline, PeerState};

    fn plane(routes: &[Route], inbox_max: u32) -> ControlPlane {
        ControlPlane {
            segments: Arc::default(),
            routes: Arc::new(Routes::new(routes)),
            shm_prefix: None,
            inbox: Arc::new(PassiveInbox::new(inbox_max)),
            state: Arc::new(StateVector::new(routes.len() as u16)),
        }
    }

    fn announcement(key: SegKey, shm_data: bool) -> SegmentAnnouncement {
        SegmentAnnouncement {
            key,
            size: 4096,
            notif_count: 8,
            shm_data,
            tag: 42,
        }
    }

    #[test]
    fn a_registration_over_tcp_is_recorded_and_wakes_its_waiter() {
        let p = plane(&[Route::Local, Route::Tcp], 4);
        assert!(p.segments.remote(Rank(1), 3).is_none());
        let answer = p.handle(
            Rank(1),
            ControlMessage::RegisterSegment(announcement(3, true)),
        );
        assert!(matches!(answer, Some(Ok(()))));
        let seg = p.segments.remote(Rank(1), 3).expect("recorded");
        assert_eq!((seg.size, seg.notif_count, seg.tag), (4096, 8, 42));
        assert!(seg.mem.is_none(), "a TCP peer's segment is not mapped");
        p.segments
            .wait_registered(
                Deadline::after(std::time::Duration::ZERO),
                || p.segments.remote(Rank(1), 3).is_some_and(|s| s.tag == 42),
                || Ok(()),
            )
            .expect("registered");
        assert_eq!(p.segments.remote(Rank(1), 3).map(|s| s.size), Some(4096));
        p.handle(Rank(1), ControlMessage::DeleteSegment { key: 3 });
        assert!(p.segments.remote(Rank(1), 3).is_none());
    }

    /// A registration whose tag carries `TAG_LATCHED` is remembered past the peer's deletion
    /// of the segment and past its next registration (a group commit's mark that the peer
    /// saw ours, which its deletion right after its commit must not undo).
    #[test]
    fn a_latched_registration_outlives_deletion_and_the_next_registration() {
        use crate::memory::segment_table::TAG_LATCHED;
        let p = plane(&[Route::Local, Route::Tcp], 4);
        let with_tag = |tag| {
            ControlMessage::RegisterSegment(SegmentAnnouncement {
                tag,
                ..announcement(3, true)
            })
        };
        p.handle(Rank(1), with_tag(5));
        assert_eq!(p.segments.latched(Rank(1), 3), None);
        p.handle(Rank(1), with_tag(5 | TAG_LATCHED));
        p.handle(Rank(1), ControlMessage::DeleteSegment { key: 3 });
        assert!(p.segments.remote(Rank(1), 3).is_none());
        assert_eq!(p.segments.latched(Rank(1), 3), Some(5 | TAG_LATCHED));
        p.handle(Rank(1), with_tag(6));
        assert_eq!(p.segments.latched(Rank(1), 3), Some(5 | TAG_LATCHED));
        assert_eq!(p.segments.latched(Rank(0), 3), None, "per peer");
    }

    #[test]
    fn user_memory_from_a_shared_memory_peer_moves_it_to_tcp() {
        let p = plane(&[Route::Local, Route::Shm], 4);
        let answer = p.handle(
            Rank(1),
            ControlMessage::RegisterSegment(announcement(0, false)),
        );
        assert!(matches!(answer, Some(Ok(()))));
        assert_eq!(p.routes.get(Rank(1)), Route::Tcp);
        assert!(p.routes.any_tcp());
    }

    #[test]
    fn a_shared_memory_registration_without_a_prefix_is_refused_with_a_device_error() {
        let p = plane(&[Route::Local, Route::Shm], 4);
        let answer = p.handle(
            Rank(1),
            ControlMessage::RegisterSegment(announcement(0, true)),
        );
        assert!(matches!(answer, Some(Err(Error::Device(_)))));
        assert!(p.segments.remote(Rank(1), 0).is_none());
    }

    #[test]
    fn passive_messages_are_acknowledged_until_the_inbox_is_full() {
        let p = plane(&[Route::Local, Route::Tcp], 1);
        assert!(matches!(
            p.handle(Rank(1), ControlMessage::Passive(vec![1, 2])),
            Some(Ok(()))
        ));
        assert!(matches!(
            p.handle(Rank(1), ControlMessage::Passive(vec![3])),
            Some(Err(Error::PassiveInboxFull { max: 1 }))
        ));
        assert_eq!(p.inbox.try_pop(), Some((Rank(1), vec![1, 2])));
    }

    #[test]
    fn ping_is_answered_a_heartbeat_is_not_and_goodbye_marks_the_peer_gone_without_an_answer() {
        let p = plane(&[Route::Local, Route::Tcp, Route::Tcp], 1);
        assert!(matches!(
            p.handle(Rank(2), ControlMessage::Ping),
            Some(Ok(()))
        ));
        assert!(p.handle(Rank(2), ControlMessage::Heartbeat).is_none());
        assert!(!p.state.is_unreachable(Rank(2)));
        assert!(p.handle(Rank(2), ControlMessage::Goodbye).is_none());
        assert!(p.state.is_unreachable(Rank(2)));
        assert!(!p.state.is_unreachable(Rank(1)));
        assert_eq!(p.state.snapshot()[1], PeerState::Healthy);
    }
}
