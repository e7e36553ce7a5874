//! The reference implementation's (GPI-2's) per-rank variables: the NUMA socket and the
//! machine file.

use super::vars::{MFILE, SOCKET};
use crate::error::{Error, Result};

/// This rank's NUMA socket from `GASPI_SOCKET` (`None` when unset), as the reference
/// implementation's launcher sets it (`gaspi_numa_socket`).
pub fn numa_socket() -> Result<Option<u8>> {
    parse_socket(std::env::var(SOCKET).ok())
}

pub(super) fn parse_socket(v: Option<String>) -> Result<Option<u8>> {
    match v.filter(|s| !s.trim().is_empty()) {
        None => Ok(None),
        Some(s) => {
            s.trim().parse::<u8>().map(Some).map_err(|_| {
                Error::Env(format!("{SOCKET}={s:?} is not a socket number in 0..=255"))
            })
        }
    }
}

/// The hosts of a machine file: the first word of every line that is not blank or a
/// `#` comment, in order.
pub(super) fn machine_file(path: &str) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Env(format!("{MFILE}={path:?} cannot be read: {e}")))?;
    let hosts: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    if hosts.is_empty() {
        return Err(Error::Env(format!("{MFILE}={path:?} lists no hosts")));
    }
    Ok(hosts)
}
