//! What this host has that the plan depends on: NVIDIA GPUs, for the warning when
//! `--devices-per-node` asks for GPUs on a host without any, and NUMA nodes, the sockets
//! that `--pin-to-socket` deals the ranks over. Read from `/proc`, `/dev` and `/sys`, so
//! that no driver or library is needed to ask.

use std::path::Path;

/// NVIDIA GPUs on this host: the driver's list of them, else the `/dev/nvidiaN` device
/// files; 0 when there are neither (no GPU, or no driver).
pub fn count_gpus() -> usize {
    if let Ok(rd) = std::fs::read_dir("/proc/driver/nvidia/gpus") {
        return rd.count();
    }
    numbered_entries(Path::new("/dev"), "nvidia").unwrap_or(0)
}

/// NUMA nodes on this host (`/sys/devices/system/node/nodeN`); at least 1, which is what a
/// host without NUMA information has in effect.
pub fn count_numa_nodes() -> usize {
    numbered_entries(Path::new("/sys/devices/system/node"), "node")
        .unwrap_or(1)
        .max(1)
}

/// How many entries of `dir` are named `prefix` followed by a number (`nvidia0`, `node1`);
/// `None` when `dir` cannot be read.
fn numbered_entries(dir: &Path, prefix: &str) -> Option<usize> {
    let entries = std::fs::read_dir(dir).ok()?;
    let count = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix(prefix)
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    Some(count)
}
