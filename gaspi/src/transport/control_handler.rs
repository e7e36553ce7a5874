//! The one way up from the transports: control messages that a data connection carries are
//! handed to the control plane through this trait, which `crate::control` implements. The
//! transports thereby never reach into the process's tables themselves.

use crate::error::Result;
use crate::types::Rank;
use crate::wire::control::ControlMessage;

/// Handles the control messages received from peers.
pub(crate) trait ControlHandler: Send + Sync {
    /// Acts on `msg` from `from`. For a request, returns its outcome, which the transport
    /// sends back as the acknowledgement (`Ok` = success, else the error's GASPI code); for
    /// a notice, `None`.
    fn handle(&self, from: Rank, msg: ControlMessage) -> Option<Result<()>>;
}
