//! The control plane: what ranks tell each other about the job rather than move data —
//! segment registration and deletion, passive messages, ping, kill and goodbye. Messages are
//! typed ([`crate::wire::control::ControlMessage`]) and arrive through the transports'
//! [`ControlHandler`](crate::transport::control_handler::ControlHandler) upcall;
//! [`handlers::ControlPlane`] acts on them against the tables of the memory layer.

pub(crate) mod handlers;
