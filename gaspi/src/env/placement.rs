//! Where a rank sits in its job as a foreign launcher (Slurm, torchrun) describes it, and the
//! number parsing their variables share.

use crate::error::{Error, Result};

/// Where a rank sits in its job, as a foreign launcher's variables describe it.
pub(super) struct Placement {
    pub rank: u16,
    pub nranks: u16,
    pub local_rank: u16,
    pub local_nranks: u16,
    pub rendezvous: Option<String>,
    pub job_id: String,
}

/// Parses `v` (the value of `name`) as a `u16`, naming the variable when it is not one.
pub(super) fn parse_u16(name: &str, v: String) -> Result<u16> {
    v.trim()
        .parse::<u16>()
        .map_err(|_| Error::Env(format!("{name}={v:?} is not an integer in 0..=65535")))
}
