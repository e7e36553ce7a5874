//! The choice of a transport per peer, from what the rendezvous told us: a pure function of
//! `GASPI_TRANSPORT`, which ranks share this host and which have a verbs device.

use crate::env::TransportChoice;
use crate::error::{Error, Result};
use crate::transport::route::Route;
use crate::types::Rank;

/// What start-up knows about one peer when it picks its route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerFacts {
    /// Same kernel boot and network namespace as this rank.
    pub same_host: bool,
    /// Both this rank and the peer have an active verbs port.
    pub verbs: bool,
}

/// The route to each rank: `Local` for `me`, else by `choice` — `tcp` always TCP; `verbs`
/// verbs where both ends have a device (TCP with a warning elsewhere); `shm` shared memory,
/// which every peer must then share the host for; `auto` shared memory on this host, verbs
/// to other hosts where possible, else TCP.
pub(crate) fn choose_routes(
    me: Rank,
    choice: TransportChoice,
    peers: &[PeerFacts],
) -> Result<Vec<Route>> {
    peers
        .iter()
        .enumerate()
        .map(|(r, p)| {
            if r == me.index() {
                return Ok(Route::Local);
            }
            Ok(match (choice, p.same_host) {
                (TransportChoice::Tcp, _) => Route::Tcp,
                (TransportChoice::Verbs, _) | (TransportChoice::Auto, false) if p.verbs => {
                    Route::Verbs
                }
                (TransportChoice::Verbs, _) => {
                    tracing::warn!(
                        "GASPI_TRANSPORT=verbs: rank {r} has no verbs device; using TCP to it"
                    );
                    Route::Tcp
                }
                (TransportChoice::Auto, false) => Route::Tcp,
                (_, true) => Route::Shm,
                (TransportChoice::Shm, false) => {
                    return Err(Error::Env(format!(
                        "GASPI_TRANSPORT=shm but rank {r} is on another host; use auto or tcp"
                    )))
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: PeerFacts = PeerFacts {
        same_host: true,
        verbs: false,
    };
    const REMOTE_IB: PeerFacts = PeerFacts {
        same_host: false,
        verbs: true,
    };
    const REMOTE_ETH: PeerFacts = PeerFacts {
        same_host: false,
        verbs: false,
    };
    const LOCAL_IB: PeerFacts = PeerFacts {
        same_host: true,
        verbs: true,
    };

    fn routes(choice: TransportChoice, peers: &[PeerFacts]) -> Result<Vec<Route>> {
        choose_routes(Rank(0), choice, peers)
    }

    #[test]
    fn auto_takes_shared_memory_on_the_host_and_verbs_or_tcp_beyond() {
        let got = routes(
            TransportChoice::Auto,
            &[LOCAL, LOCAL_IB, REMOTE_IB, REMOTE_ETH],
        )
        .unwrap();
        assert_eq!(got, [Route::Local, Route::Shm, Route::Verbs, Route::Tcp]);
    }

    #[test]
    fn tcp_is_tcp_to_everyone_but_oneself() {
        let got = routes(TransportChoice::Tcp, &[LOCAL, LOCAL_IB, REMOTE_IB]).unwrap();
        assert_eq!(got, [Route::Local, Route::Tcp, Route::Tcp]);
    }

    #[test]
    fn verbs_is_verbs_even_on_the_host_and_tcp_without_a_device() {
        let got = routes(TransportChoice::Verbs, &[LOCAL, LOCAL_IB, REMOTE_ETH]).unwrap();
        assert_eq!(got, [Route::Local, Route::Verbs, Route::Tcp]);
    }

    #[test]
    fn shm_refuses_a_peer_on_another_host_and_names_it() {
        assert_eq!(
            routes(TransportChoice::Shm, &[LOCAL, LOCAL_IB]).unwrap(),
            [Route::Local, Route::Shm]
        );
        let err = routes(TransportChoice::Shm, &[LOCAL, LOCAL, REMOTE_ETH]).unwrap_err();
        assert!(
            matches!(&err, Error::Env(m) if m.contains("rank 2") && m.contains("another host")),
            "{err}"
        );
    }

    #[test]
    fn the_rank_itself_is_local_wherever_it_is() {
        let got = choose_routes(Rank(1), TransportChoice::Tcp, &[REMOTE_ETH, REMOTE_ETH]).unwrap();
        assert_eq!(got, [Route::Tcp, Route::Local]);
    }
}
