//! The names of a job's shared-memory files on this host, and their cleanup.

use std::path::PathBuf;

use crate::types::SegKey;

/// The path prefix of a job's shared-memory files on this host: `/dev/shm/tnt-<job>-<nonce>`,
/// followed by `-r<rank>-…` per file. The nonce (16 hex digits, drawn at the rendezvous)
/// keeps a rerun under the same job id clear of an earlier run's files.
pub(crate) fn shm_prefix(job_id: &str, nonce: u64) -> String {
    format!("/dev/shm/tnt-{job_id}-{nonce:016x}")
}

/// The shared-memory file of `rank`'s segment `key` under a job's `prefix`.
pub(crate) fn shm_file(prefix: &str, rank: u16, key: SegKey) -> PathBuf {
    PathBuf::from(format!("{prefix}-r{rank}-s{key}"))
}

/// Removes this host's shared-memory files of job `job_id`: what ranks leave behind when
/// they die without `term` (the launcher and the test harness call this after a job).
/// Matches `tnt-<job>-<16 hex digits>-*` and the fake verbs device's `tnt-<job>-verbs-r<rank>`
/// exactly, so job `a` never touches job `a-b`'s files. Returns how many were removed.
pub fn remove_job_shm_files(job_id: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let prefix = format!("tnt-{job_id}-");
    let ours = |name: &str| {
        name.strip_prefix(&prefix).is_some_and(|rest| {
            let segment_file = rest.len() > 17
                && rest.as_bytes()[16] == b'-'
                && rest[..16].bytes().all(|b| b.is_ascii_hexdigit());
            let verbs_directory = rest
                .strip_prefix("verbs-r")
                .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit()));
            segment_file || verbs_directory
        })
    };
    dir.flatten()
        .filter(|e| ours(&e.file_name().to_string_lossy()))
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_only_the_jobs_shared_memory_files() {
        let job = format!("unit{}", std::process::id());
        let ours = [
            format!("{}-r0-s0", shm_prefix(&job, 0x1234)),
            format!("{}-r1-s256", shm_prefix(&job, u64::MAX)),
            format!("/dev/shm/tnt-{job}-verbs-r12"),
        ];
        let theirs = [
            format!("{}-r0-s0", shm_prefix(&format!("{job}-b"), 7)),
            format!("/dev/shm/tnt-{job}-notanonce-r0-s0"),
            format!("/dev/shm/tnt-{job}x-0000000000000000-r0"),
            format!("/dev/shm/tnt-{job}-verbs-rx"),
        ];
        for f in ours.iter().chain(&theirs) {
            std::fs::write(f, b"x").unwrap();
        }
        assert_eq!(remove_job_shm_files(&job), 3);
        assert!(ours.iter().all(|f| !std::path::Path::new(f).exists()));
        for f in &theirs {
            assert!(std::path::Path::new(f).exists(), "{f} was removed");
            std::fs::remove_file(f).unwrap();
        }
    }
}
