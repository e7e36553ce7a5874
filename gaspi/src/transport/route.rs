//! How this rank reaches each peer: chosen at init (`runtime::routes`), and only ever moved
//! to TCP afterwards (a peer registered memory its route cannot reach).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use crate::types::Rank;

/// How this rank reaches a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Route {
    /// The rank itself: a local copy.
    Local = 0,
    Shm = 1,
    Tcp = 2,
    Verbs = 3,
}

pub(crate) struct Routes {
    routes: Vec<AtomicU8>,
    /// Peers reached over TCP (routes only ever move to TCP, so this only grows), for
    /// [`Routes::any_tcp`] on every blocking wait without a scan.
    tcp_peers: AtomicUsize,
}

impl Routes {
    pub fn new(routes: &[Route]) -> Self {
        Routes {
            routes: routes.iter().map(|r| AtomicU8::new(*r as u8)).collect(),
            tcp_peers: AtomicUsize::new(routes.iter().filter(|r| **r == Route::Tcp).count()),
        }
    }

    pub fn get(&self, rank: Rank) -> Route {
        match self.routes[rank.index()].load(Ordering::Acquire) {
            0 => Route::Local,
            1 => Route::Shm,
            3 => Route::Verbs,
            _ => Route::Tcp,
        }
    }

    /// Moves a shared-memory peer to TCP for good (it registered memory we cannot map).
    /// Safe for ordering: every shared-memory op is complete when its post returns.
    pub fn demote_to_tcp(&self, rank: Rank) {
        self.demote(rank, Route::Shm);
    }

    /// Moves a peer from `from` to TCP for good (it registered memory that its route cannot
    /// reach). For verbs this happens only when a device refused to register a segment;
    /// ops already posted over verbs on a queue complete before later ones on it go over
    /// TCP (`Context::transport_on`).
    pub fn demote(&self, rank: Rank, from: Route) {
        let moved = self.routes[rank.index()]
            .compare_exchange(
                from as u8,
                Route::Tcp as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if moved {
            self.tcp_peers.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether any peer's data goes over TCP.
    pub fn any_tcp(&self) -> bool {
        self.tcp_peers.load(Ordering::Acquire) > 0
    }

    pub fn any_shm(&self) -> bool {
        self.any(Route::Shm)
    }

    pub fn any(&self, route: Route) -> bool {
        self.routes
            .iter()
            .any(|r| r.load(Ordering::Acquire) == route as u8)
    }

    pub fn ranks_with(&self, route: Route) -> Vec<u16> {
        (0..self.routes.len() as u16)
            .filter(|r| self.get(Rank(*r)) == route)
            .collect()
    }
}
