//! Looking a program up on `PATH`, as a shell does before it runs one: the ranks' program
//! and `numactl` are looked for before any rank starts, so that a missing one is reported
//! once, by `tarantella`, instead of by every rank.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The first executable file named `name` in the directories of `PATH`, in order; `None`
/// when there is none (or `PATH` is unset).
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}
