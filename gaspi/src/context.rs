//! `Context`: one per process, from `init` to `term`. Everything else hangs off it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{limits, Config};
use crate::control::handlers::ControlPlane;
use crate::counters::Stats;
use crate::env::JobEnv;
use crate::error::{Error, Result};
use crate::group::state::GroupTable;
use crate::memory::passive_inbox::PassiveInbox;
use crate::memory::segment_table::SegmentTable;
use crate::runtime::rendezvous::{host_identity, rendezvous};
use crate::runtime::routes::{choose_routes, PeerFacts};
use crate::runtime::verbs::open_verbs;
use crate::state::StateVector;
use crate::topology::Topology;
use crate::transport::completion::QueueTable;
use crate::transport::requests::{RpcTable, UnackedSends};
use crate::transport::route::{Route, Routes};
use crate::transport::tcp::endpoint::Endpoint;
use crate::transport::tcp::heartbeat::Heartbeat;
use crate::transport::tcp::TcpTransport;
use crate::transport::verbs::device::DeviceChoice;
use crate::transport::verbs::VerbsTransport;
use crate::types::{Deadline, Group, NetworkType, PeerState, Rank, Timeout};
use crate::wire::control::ControlMessage;

/// The longest `term` waits for its goodbyes to leave and the peers' connections to close.
pub(crate) const TERM_DRAIN_LIMIT: Duration = Duration::from_secs(2);

static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// State shared between application threads and the progress thread.
pub(crate) struct Shared {
    pub rank: Rank,
    pub nranks: u16,
    pub local_rank: u16,
    pub local_nranks: u16,
    pub config: Config,
    pub job: JobEnv,
    /// `/dev/shm/tnt-<job>-<nonce>` when segments are shared with local peers.
    pub shm_prefix: Option<String>,
    pub segments: Arc<SegmentTable>,
    pub state: Arc<StateVector>,
    pub routes: Arc<Routes>,
    /// Which ranks share a host.
    pub topology: Topology,
    /// How long waits spin before they yield (`backoff::spin_for`).
    pub wait_spin: Duration,
    /// Queue pairs to the peers reached over verbs.
    pub verbs: Option<VerbsTransport>,
    pub passive: Arc<PassiveInbox>,
    /// Passive sends over TCP whose call timed out, per target (for their retries).
    pub unacked_passive: UnackedSends,
    /// Requests waiting for a peer's answer (shared with the TCP transport).
    pub rpc: Arc<RpcTable>,
    pub stats: Stats,
    /// Set by `term`: blocked calls on other threads end with [`Error::Terminated`].
    pub closing: AtomicBool,
}

impl Shared {
    /// Fails with [`Error::Terminated`] once the process has begun to terminate.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closing.load(Ordering::Acquire) {
            return Err(Error::Terminated);
        }
        Ok(())
    }
}

/// A running GASPI process: created by [`Context::init`], ended by [`Context::term`] (or drop).
///
/// `Context` is `Send + Sync`: share it between threads by reference or in an `Arc`.
pub struct Context {
    pub(crate) sh: Arc<Shared>,
    pub(crate) tcp: Option<TcpTransport>,
    pub(crate) queues: QueueTable,
    pub(crate) groups: GroupTable,
    terminated: AtomicBool,
}

impl Context {
    /// Initializes from the environment (see [`crate::env`]) with the default [`Config`].
    pub fn init() -> Result<Context> {
        Self::init_with(Config::default())
    }

    /// Initializes with `config` (`gaspi_proc_init` after `gaspi_config_set`). Fails with
    /// [`Error::AlreadyInitialized`] while another `Context` exists in this process, and with
    /// a bootstrap error, not a hang, when the job does not assemble within
    /// `GASPI_INIT_TIMEOUT_MS`.
    pub fn init_with(config: Config) -> Result<Context> {
        let config = config.resolve()?;
        let env = JobEnv::from_env()?;
        Self::init_job(config, env)
    }

    /// Initializes for an explicit job description (what `init_with` reads from the env).
    pub fn init_job(config: Config, env: JobEnv) -> Result<Context> {
        let config = config.resolve()?;
        if INITIALIZED.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyInitialized);
        }
        crate::clock::start();
        Self::start(config, env).inspect_err(|_| INITIALIZED.store(false, Ordering::SeqCst))
    }

    /// Whether a `Context` exists in this process (`gaspi_initialized`).
    pub fn initialized() -> bool {
        INITIALIZED.load(Ordering::SeqCst)
    }

    /// Start-up: the steps of [`crate::runtime`] in order, then the TCP mesh (which carries
    /// the control plane whatever the routes), `GROUP_ALL` and the init barrier.
    fn start(config: Config, env: JobEnv) -> Result<Context> {
        let deadline = Deadline::after(Duration::from_millis(env.init_timeout_ms));
        let me = env.rank;
        let n = env.nranks;
        let choice = DeviceChoice::from_env()?;
        let verbs_setup = open_verbs(&config, &env, &choice)?;
        let (table, listener) = if n > 1 {
            let hello = verbs_setup.as_ref().map(|v| v.hello()).unwrap_or_default();
            let (t, l) = rendezvous(&env, &hello, deadline)?;
            (Some(t), Some(l))
        } else {
            (None, None)
        };
        let routes = match &table {
            Some(t) => {
                let my_host = host_identity();
                let facts: Vec<PeerFacts> = (0..usize::from(n))
                    .map(|r| PeerFacts {
                        same_host: t.hosts[r] == my_host,
                        verbs: verbs_setup.is_some() && !t.verbs[r].0.is_empty(),
                    })
                    .collect();
                choose_routes(me, env.transport, &facts)?
            }
            None => vec![Route::Local; usize::from(n)],
        };
        let routes = Arc::new(Routes::new(&routes));
        let topology = match &table {
            Some(t) => Topology::from_names(&t.hosts),
            None => Topology::blocked(1, n),
        };
        // The fake device reaches peers' memory through their segment files.
        let shm_prefix = match &table {
            Some(t) if routes.any_shm() || (choice.is_fake() && routes.any(Route::Verbs)) => {
                Some(crate::env::shm_prefix(&env.job_id, t.nonce))
            }
            _ => None,
        };
        let state = Arc::new(StateVector::new(n));
        let verbs = match (verbs_setup, &table) {
            (Some(setup), Some(t)) if routes.any(Route::Verbs) => Some(
                setup.connect(
                    &t.verbs,
                    &routes
                        .ranks_with(Route::Verbs)
                        .into_iter()
                        .map(Rank)
                        .collect::<Vec<_>>(),
                    state.clone(),
                    shm_prefix.as_deref(),
                )?,
            ),
            _ => None,
        };
        if me.0 == 0 || n == 1 {
            tracing::info!(
                "gaspi: {n} ranks, transport {}: shm to {:?}, verbs to {:?}{}, tcp to {:?}",
                env.transport,
                routes.ranks_with(Route::Shm),
                routes.ranks_with(Route::Verbs),
                verbs
                    .as_ref()
                    .map(|v| format!(" ({})", v.describe()))
                    .unwrap_or_default(),
                routes.ranks_with(Route::Tcp)
            );
        }
        let segments = Arc::new(SegmentTable::default());
        let passive = Arc::new(PassiveInbox::new(config.passive_queue_size_max));
        let rpc = Arc::new(RpcTable::default());
        let tcp = match (table, listener) {
            (Some(t), Some(l)) => {
                let control = Arc::new(ControlPlane {
                    segments: segments.clone(),
                    routes: routes.clone(),
                    shm_prefix: shm_prefix.clone(),
                    inbox: passive.clone(),
                    state: state.clone(),
                });
                let endpoint = Arc::new(Endpoint {
                    rank: me,
                    nranks: n,
                    transfer_size_max: config.transfer_size_max,
                    passive_size_max: u64::from(config.passive_transfer_size_max),
                    segments: segments.clone(),
                    state: state.clone(),
                    requests: rpc.clone(),
                    control,
                    heartbeat: env.heartbeat_timeout_ms.map(Heartbeat::new),
                });
                Some(TcpTransport::establish(
                    endpoint, l, &t.addrs, env.token, deadline,
                )?)
            }
            _ => None,
        };
        let sh = Arc::new(Shared {
            rank: me,
            nranks: n,
            local_rank: env.local_rank,
            local_nranks: env.local_nranks,
            passive,
            unacked_passive: UnackedSends::default(),
            config: config.clone(),
            job: env,
            shm_prefix,
            segments,
            state,
            routes,
            wait_spin: crate::backoff::spin_for(topology.ranks_on_host_of(me)),
            topology,
            verbs,
            rpc,
            stats: Default::default(),
            closing: AtomicBool::new(false),
        });
        let ctx = Context {
            sh,
            tcp,
            queues: QueueTable::new(config.queue_num, config.queue_size_max),
            groups: GroupTable::new(config.group_max),
            terminated: AtomicBool::new(false),
        };
        ctx.commit_group_all(deadline)?;
        ctx.barrier_deadline(Group::ALL, deadline)
            .map_err(|e| match e {
                Error::Timeout => Error::Bootstrap("timed out in the init barrier".into()),
                other => other,
            })?;
        Ok(ctx)
    }

    /// Ends this process's participation (`gaspi_proc_term`): tells peers goodbye, stops the
    /// progress thread, and removes this rank's shared-memory files. Call a barrier first if
    /// peers may still access this rank's segments.
    ///
    /// `timeout` bounds how long term waits for the peers' connections to close after its
    /// goodbyes have left ([`Timeout::TEST`]: not at all); never more than
    /// `TERM_DRAIN_LIMIT` (2 s), so that
    /// `GASPI_BLOCK` does not turn term into a barrier with peers that have not left yet (as
    /// in GPI-2, term does not wait for them).
    pub fn term(self, timeout: Timeout) -> Result<()> {
        self.terminate(timeout)
    }

    /// [`term`](Self::term) for a context shared between threads (in an `Arc`): calls
    /// blocked in other threads (waits, receives, collectives, requests to peers) return
    /// [`Error::Terminated`] at once. The memory stays valid until the last reference goes,
    /// so they never touch freed segments; calls that start afterwards fail.
    pub fn terminate(&self, timeout: Timeout) -> Result<()> {
        let limit = match timeout {
            Timeout::BLOCK => TERM_DRAIN_LIMIT,
            Timeout(ms) => Duration::from_millis(ms).min(TERM_DRAIN_LIMIT),
        };
        self.shutdown(limit);
        Ok(())
    }

    fn shutdown(&self, drain_limit: Duration) {
        if self.terminated.swap(true, Ordering::SeqCst) {
            return;
        }
        self.sh.closing.store(true, Ordering::Release);
        self.sh.passive.close();
        self.queues.close_all();
        self.sh.rpc.fail_all(|| Error::Terminated);
        self.sh.wake_all();
        if let Some(tcp) = &self.tcp {
            // Our goodbyes always get the full limit (a peer must not take a lost goodbye for
            // a failure); the caller's timeout bounds the wait for the peers' side.
            tcp.shutdown(TERM_DRAIN_LIMIT, drain_limit);
        }
        INITIALIZED.store(false, Ordering::SeqCst);
    }

    pub(crate) fn tcp(&self) -> Result<&TcpTransport> {
        self.tcp.as_ref().ok_or(Error::NoPeers)
    }

    pub(crate) fn check_rank(&self, rank: Rank) -> Result<()> {
        if rank.0 >= self.sh.nranks {
            return Err(Error::InvalidRank {
                rank,
                nranks: self.sh.nranks,
            });
        }
        Ok(())
    }

    /// This process's rank (`gaspi_proc_rank`).
    pub fn rank(&self) -> Rank {
        self.sh.rank
    }

    /// Number of ranks in the job (`gaspi_proc_num`).
    pub fn num_ranks(&self) -> u16 {
        self.sh.nranks
    }

    /// Rank among the ranks on this host (`gaspi_proc_local_rank`).
    pub fn local_rank(&self) -> u16 {
        self.sh.local_rank
    }

    /// Number of ranks on this host (`gaspi_proc_local_num`).
    pub fn local_num(&self) -> u16 {
        self.sh.local_nranks
    }

    /// The configuration in force (`gaspi_config_get`).
    pub fn config(&self) -> &Config {
        &self.sh.config
    }

    /// The job id shared by all ranks.
    pub fn job_id(&self) -> &str {
        &self.sh.job.job_id
    }

    /// Which ranks share a host (see [`Topology`]); the same on every rank.
    pub fn topology(&self) -> &Topology {
        &self.sh.topology
    }

    /// Whether `rank` is reached through shared memory.
    pub fn uses_shm_to(&self, rank: Rank) -> bool {
        self.sh.routes.get(rank) == Route::Shm
    }

    /// Whether `rank` is reached through InfiniBand verbs.
    pub fn uses_verbs_to(&self, rank: Rank) -> bool {
        self.sh.routes.get(rank) == Route::Verbs
    }

    /// `gaspi_network_type`: InfiniBand when verbs carry traffic to some peer, else
    /// Ethernet (TCP and shared memory).
    pub fn network_type(&self) -> NetworkType {
        if self.sh.routes.any(Route::Verbs) {
            NetworkType::Ib
        } else {
            NetworkType::Ethernet
        }
    }

    /// Health of every rank as seen from here (`gaspi_state_vec_get`).
    pub fn state_vec(&self) -> Vec<PeerState> {
        self.sh.state.snapshot()
    }

    /// Checks that `rank` answers within `timeout` (`gaspi_proc_ping`).
    pub fn proc_ping(&self, rank: Rank, timeout: Timeout) -> Result<()> {
        self.check_rank(rank)?;
        if rank == self.sh.rank {
            return Ok(());
        }
        self.tcp()?
            .call_control(rank, &ControlMessage::Ping, timeout.deadline())
    }

    /// Asks `rank` to terminate at once (`gaspi_proc_kill`); not for this rank itself.
    pub fn proc_kill(&self, rank: Rank, _timeout: Timeout) -> Result<()> {
        self.check_rank(rank)?;
        if rank == self.sh.rank {
            return Err(Error::InvalidRank {
                rank,
                nranks: self.sh.nranks,
            });
        }
        self.tcp()?.post_control(rank, &ControlMessage::Kill)
    }

    /// Connection set-up is done at init for every peer; kept for compatibility
    /// (`gaspi_connect`). Fails if the peer failed. A peer that has already left with
    /// `proc_term` was connected, so this succeeds, as GPI-2's `gaspi_connect` does for an
    /// endpoint that is connected (a fast rank may finish before a slow one connects).
    pub fn connect(&self, rank: Rank, _timeout: Timeout) -> Result<()> {
        self.check_rank(rank)?;
        if self.sh.state.is_corrupt(rank) {
            return Err(Error::PeerFailed { rank });
        }
        Ok(())
    }

    /// Kept for compatibility (`gaspi_disconnect`): connections live until `term`.
    pub fn disconnect(&self, rank: Rank, _timeout: Timeout) -> Result<()> {
        self.check_rank(rank)
    }

    /// Milliseconds of the process clock (`gaspi_time_get`; see [`crate::clock`]).
    pub fn time_ms(&self) -> f64 {
        crate::clock::time_ms()
    }

    /// The process clock in ticks (`gaspi_time_ticks`), [`crate::clock::ticks_per_us`] per
    /// microsecond.
    pub fn time_ticks(&self) -> u64 {
        crate::clock::time_ticks()
    }

    /// The smallest transfer in bytes (`gaspi_transfer_size_min`): 0, as in GPI-2 since
    /// 1.5. A zero-byte write or read completes and moves nothing; a zero-byte
    /// `write_notify` is a notification, a zero-byte `read_notify` sets its notification.
    pub fn transfer_size_min(&self) -> u64 {
        0
    }

    /// The largest transfer in bytes (`gaspi_transfer_size_max`): the configured
    /// `transfer_size_max`, at most 1 GiB. Larger transfers are [`Error::InvalidCommSize`];
    /// split them.
    pub fn transfer_size_max(&self) -> u64 {
        self.sh.config.transfer_size_max
    }

    /// Notification slots per segment (`gaspi_notification_num`).
    pub fn notification_num(&self) -> u32 {
        self.sh.config.notification_num
    }

    /// `gaspi_rw_list_elem_max`.
    pub fn rw_list_elem_max(&self) -> u32 {
        self.sh
            .config
            .rw_list_elem_max
            .min(limits::RW_LIST_ELEM_MAX)
    }

    /// The data-listener address (for tests that play a hostile client).
    #[cfg(feature = "testing")]
    pub fn data_listen_addr(&self) -> Option<std::net::SocketAddr> {
        self.tcp.as_ref().map(|t| t.listen_addr())
    }

    /// Test hook: the next verbs work request this rank posts completes with an error (fake
    /// verbs device only; false otherwise).
    #[cfg(feature = "testing")]
    pub fn fail_next_verbs_request(&self) -> bool {
        self.sh.verbs.as_ref().is_some_and(|v| v.inject_fault())
    }

    /// Test hook: sends raw bytes to `rank` on the data connection, like a faulty peer.
    #[cfg(feature = "testing")]
    pub fn send_raw_frame(&self, rank: Rank, bytes: Vec<u8>) -> Result<()> {
        self.tcp()?.send_raw(rank, bytes)
    }

    /// Test hook: this rank stops taking in what `rank` sends on the data connection, as a
    /// hung or hostile peer that keeps sending would.
    #[cfg(feature = "testing")]
    pub fn stop_receiving_from(&self, rank: Rank) -> Result<()> {
        self.tcp()?.stop_receiving_from(rank)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        self.shutdown(TERM_DRAIN_LIMIT);
    }
}

/// The implementation's version (`gaspi_version`).
pub fn version() -> f32 {
    1.5
}
