//! Start-up as a sequence of small steps, each tested on its own: the rendezvous through
//! rank 0 ([`rendezvous`]), the choice of a transport per peer as a pure function
//! ([`routes`]), and opening the verbs device ([`verbs`]). `Context::init` runs them in
//! order, then builds the TCP mesh and commits `GROUP_ALL`.

pub(crate) mod rendezvous;
pub(crate) mod routes;
pub(crate) mod verbs;
