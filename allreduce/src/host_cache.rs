//! This host's last-level cache as Linux describes it in sysfs, read once: whether the
//! single-copy gather streams past the cache depends on whether the ranks' vectors fit in
//! it (`stream_copy.rs`).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::OnceLock;

use crate::options::parse_bytes;

/// The last-level cache of a host: the highest-level data (or unified) cache of its CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastLevelCache {
    /// Bytes of one instance (the smallest, should they differ).
    pub bytes_each: usize,
    /// Instances on the host, each shared by its own CPUs (one per socket, or per core
    /// complex on CPUs built of several).
    pub instances: usize,
}

/// Where sysfs says nothing (a container that hides it, another kernel): the L3 of one
/// socket or core complex of current server CPUs, shared by all ranks of the host. Guessing
/// small errs towards streaming, which costs at most the 1.2–1.8× measured in
/// `stream_copy.rs` for a vector that would have fit.
const FALLBACK: LastLevelCache = LastLevelCache {
    bytes_each: 32 << 20,
    instances: 1,
};

impl LastLevelCache {
    /// Bytes `ranks` ranks of the host hold in it between them: each instance at most once,
    /// and at most one instance per rank, however the ranks are spread.
    ///
    /// Why every instance sysfs lists, not those this process may run on: under a cpuset
    /// that confines the whole job to fewer instances this overestimates (single-copy then
    /// pushes vectors past the real cache, up to 1.25× slower), but a rank bound to one core
    /// would see a single instance and underestimate its group's cache (single-copy then
    /// pulls vectors that fit, up to 3× slower). `Options::cache_bytes` sets it where
    /// either guess is wrong.
    pub fn bytes_for(&self, ranks: usize) -> usize {
        self.bytes_each
            .saturating_mul(ranks.max(1).min(self.instances))
    }

    /// This host's (read from `/sys/devices/system/cpu` on first use).
    pub fn of_this_host() -> LastLevelCache {
        static HOST: OnceLock<LastLevelCache> = OnceLock::new();
        *HOST.get_or_init(|| read(Path::new("/sys/devices/system/cpu")).unwrap_or(FALLBACK))
    }
}

/// The last-level cache described under `cpus` (`cpuN/cache/indexM/{type,level,size,
/// shared_cpu_list}`), or `None` where nothing describes one. Instances are told apart by
/// the CPUs that share them.
fn read(cpus: &Path) -> Option<LastLevelCache> {
    // (level, smallest size, the CPU lists of its instances) of the highest level so far.
    let mut top: Option<(u32, usize, BTreeSet<String>)> = None;
    for cpu in fs::read_dir(cpus).ok()?.flatten() {
        let name = cpu.file_name();
        let name = name.to_string_lossy();
        if !name
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let Ok(indices) = fs::read_dir(cpu.path().join("cache")) else {
            continue;
        };
        for index in indices.flatten() {
            let Some((level, bytes, shared)) = describe(&index.path()) else {
                continue;
            };
            match &mut top {
                Some((l, _, _)) if *l > level => {}
                Some((l, b, set)) if *l == level => {
                    *b = (*b).min(bytes);
                    set.insert(shared);
                }
                _ => top = Some((level, bytes, BTreeSet::from([shared]))),
            }
        }
    }
    let (_, bytes_each, shared) = top?;
    Some(LastLevelCache {
        bytes_each,
        instances: shared.len(),
    })
}

/// Level, bytes and sharing CPUs of the data or unified cache described in `index`.
fn describe(index: &Path) -> Option<(u32, usize, String)> {
    let field = |f: &str| fs::read_to_string(index.join(f)).ok();
    if field("type")?.trim() == "Instruction" {
        return None;
    }
    let level = field("level")?.trim().parse().ok()?;
    // `32768K`, as `TNT_ALLREDUCE_*` byte counts are written.
    let bytes = parse_bytes(&field("size")?)?;
    let shared = field("shared_cpu_list")?.trim().to_owned();
    (bytes > 0).then_some((level, bytes, shared))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a cache description like Linux's under `root`: CPU `cpu`'s cache `index`, of
    /// `kind` (`Data`, `Instruction`, `Unified`), `level`, `size` and sharing CPUs.
    fn describe_cache(root: &Path, cpu: usize, index: usize, cache: [&str; 4]) {
        let dir = root.join(format!("cpu{cpu}/cache/index{index}"));
        fs::create_dir_all(&dir).unwrap();
        for (name, value) in ["type", "level", "size", "shared_cpu_list"]
            .iter()
            .zip(cache)
        {
            fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tnt-llc-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Two core complexes of two CPUs, each with its own L3, and private L1/L2 caches:
    /// the L3 is the last level, found twice, at its size.
    #[test]
    fn the_highest_level_counted_once_per_sharing_set() {
        let root = scratch("ccx");
        for cpu in 0..4 {
            let own = cpu.to_string();
            let complex = if cpu < 2 { "0-1" } else { "2-3" };
            describe_cache(&root, cpu, 0, ["Instruction", "1", "32K", &own]);
            describe_cache(&root, cpu, 1, ["Data", "1", "32K", &own]);
            describe_cache(&root, cpu, 2, ["Unified", "2", "1024K", &own]);
            describe_cache(&root, cpu, 3, ["Unified", "3", "32768K", complex]);
        }
        // Not a CPU: ignored.
        fs::create_dir_all(root.join("cpufreq")).unwrap();
        let llc = read(&root).unwrap();
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            llc,
            LastLevelCache {
                bytes_each: 32 << 20,
                instances: 2
            }
        );
        assert_eq!(llc.bytes_for(1), 32 << 20);
        assert_eq!(llc.bytes_for(4), 64 << 20);
    }

    /// Nothing described (an empty or missing tree) gives no answer, so the caller falls
    /// back; an instruction cache alone is not a last-level cache.
    #[test]
    fn no_answer_without_a_data_cache() {
        let root = scratch("none");
        assert_eq!(read(&root), None);
        describe_cache(&root, 0, 0, ["Instruction", "1", "32K", "0"]);
        assert_eq!(read(&root), None);
        fs::remove_dir_all(&root).unwrap();
        assert_eq!(read(&root), None);
    }
}
