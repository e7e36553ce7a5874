//! What this rank's end of every TCP connection needs of the process: the tables that
//! incoming data operations act on, the requests waiting for answers, the limits frames
//! are checked against, and the control plane that control messages go up to. Narrow on
//! purpose: the transport sees nothing else of the process.

use std::sync::Arc;

use crate::memory::segment_table::SegmentTable;
use crate::state::StateVector;
use crate::transport::control_handler::ControlHandler;
use crate::transport::requests::RpcTable;
use crate::transport::tcp::heartbeat::Heartbeat;
use crate::types::Rank;

/// This rank's side of the TCP transport.
pub(crate) struct Endpoint {
    pub rank: Rank,
    pub nranks: u16,
    /// The largest write or read a peer may ask for (`transfer_size_max`).
    pub transfer_size_max: u64,
    /// The largest passive message a peer may send (`passive_transfer_size_max`).
    pub passive_size_max: u64,
    pub segments: Arc<SegmentTable>,
    pub state: Arc<StateVector>,
    pub requests: Arc<RpcTable>,
    pub control: Arc<dyn ControlHandler>,
    /// The liveness timeout and its clock; `None` (the default): no heartbeats.
    pub heartbeat: Option<Heartbeat>,
}
