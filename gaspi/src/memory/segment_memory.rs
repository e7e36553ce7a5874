//! Segment memory: the only place that touches raw segment pointers.
//!
//! A segment is one mapping laid out as
//! `[control page | notification slots (u32 each), page-rounded | data]`.
//! The control page holds the futex word that waiters sleep on. When ranks on one host share
//! the segment, the mapping is a file under `/dev/shm` that every local peer maps; otherwise it
//! is anonymous. Memory bound from the user (`segment_bind`) keeps its data outside the mapping.
//!
//! Every function here checks its bounds itself, so the rest of the crate is safe Rust.
//! Concurrent access to segment data from peers is the GASPI model (one-sided writes): data
//! is only ever moved with raw copies, never through Rust references to the data area.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use memmap2::{MmapOptions, MmapRaw};

use super::futex::{futex_wait, futex_wake};
use super::owned_files::OwnedFile;
use crate::error::{Error, Result};
use crate::types::AtomicOp;

const PAGE: usize = 4096;
const MAGIC: u64 = 0x544e_545f_5345_4731; // "TNT_SEG1"
const OFF_SEQ: usize = 0;
const OFF_WAITERS: usize = 4;
const OFF_MAGIC: usize = 8;
const OFF_DATA_LEN: usize = 16;
const OFF_NOTIF: usize = 24;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Bytes of the control page plus `notif_count` notification slots, page-rounded.
fn ctl_len(notif_count: u32) -> usize {
    PAGE + round_up(notif_count as usize * 4, PAGE)
}

/// Bytes of the whole mapping for `data_len` bytes of data; `None` when that overflows (no
/// rank creates such a segment: only a broken peer announces one).
fn mapping_len(data_len: usize, notif_count: u32) -> Option<usize> {
    ctl_len(notif_count).checked_add(data_len.max(1).checked_next_multiple_of(PAGE)?)
}

/// Where the data of a segment lives.
enum Data {
    /// Inside the mapping, right after the notification slots.
    InMapping,
    /// User memory bound with `segment_bind`; the user keeps it alive and owns it.
    User { ptr: *mut u8 },
}

/// One segment's memory (local, or a local peer's mapped through `/dev/shm`).
pub(crate) struct SegmentMemory {
    map: MmapRaw,
    data: Data,
    data_len: usize,
    notif_count: u32,
    /// The `/dev/shm` file, when the memory is shared with local peers.
    file: Option<SharedFile>,
    /// The segment was deleted: transfers stop using its data (see [`revoke`](Self::revoke)).
    revoked: AtomicBool,
}

/// The file behind a shared segment.
enum SharedFile {
    /// Created by this process, which unlinks it once, at delete or drop, whichever comes
    /// first (a handle that outlives `segment_delete` must not remove the file of a segment
    /// later created under the same id), or on SIGTERM/SIGHUP.
    Own(OwnedFile),
    /// A local peer's, mapped here.
    Peer(PathBuf),
}

// SAFETY: the mapping stays valid for the life of the value, every access goes through
// atomics or raw copies with bounds checks, and the user-bound pointer is documented to stay
// valid and shared until the segment is deleted (the `unsafe` contract of `segment_bind`).
unsafe impl Send for SegmentMemory {}
// SAFETY: as above; no method hands out a Rust reference to the data area.
unsafe impl Sync for SegmentMemory {}

impl SegmentMemory {
    /// Anonymous (process-private) segment memory, zeroed.
    pub fn anonymous(data_len: usize, notif_count: u32) -> Result<Self> {
        let total = mapping_len(data_len, notif_count).ok_or_else(|| too_large(data_len))?;
        let map = MmapOptions::new()
            .len(total)
            .map_anon()
            .map_err(|e| Error::NoMemory(format!("mapping {total} bytes: {e}")))?;
        let mem = SegmentMemory {
            map: MmapRaw::from(map),
            data: Data::InMapping,
            data_len,
            notif_count,
            file: None,
            revoked: AtomicBool::new(false),
        };
        mem.write_header();
        Ok(mem)
    }

    /// Segment memory in a new file at `path` (under `/dev/shm`) that local peers can map.
    pub fn create_shared(path: &Path, data_len: usize, notif_count: u32) -> Result<Self> {
        let total = mapping_len(data_len, notif_count).ok_or_else(|| too_large(data_len))?;
        check_free_space(path, total)?;
        // Tracked before the file exists, so that no signal finds it untracked.
        let owned = OwnedFile::track(path);
        let file = open_new(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                // Another segment's file (the name carries the job's nonce, so it is this
                // process's, e.g. a concurrent create of the same id): not ours to remove.
                owned.disown();
            }
            Error::NoMemory(format!("creating {}: {e}", path.display()))
        })?;
        // The pages are taken now: tmpfs hands them out only when first touched, and a
        // page it cannot give then is a SIGBUS in whichever process touches it (a peer
        // writing into this segment, too), long after the check above.
        nix::fcntl::posix_fallocate(&file, 0, total as libc::off_t).map_err(|e| match e {
            nix::errno::Errno::ENOSPC => no_space(path, total),
            e => Error::NoMemory(format!(
                "allocating {total} bytes for {}: {e}",
                path.display()
            )),
        })?;
        let map = MmapOptions::new()
            .len(total)
            .map_raw(&file)
            .map_err(|e| Error::NoMemory(format!("mapping {}: {e}", path.display())))?;
        let mem = SegmentMemory {
            map,
            data: Data::InMapping,
            data_len,
            notif_count,
            file: Some(SharedFile::Own(owned)),
            revoked: AtomicBool::new(false),
        };
        mem.write_header();
        Ok(mem)
    }

    /// Maps a local peer's segment file. The sizes must match what the peer announced.
    pub fn open_shared(path: &Path, data_len: usize, notif_count: u32) -> Result<Self> {
        let total = mapping_len(data_len, notif_count).ok_or_else(|| {
            Error::Device(format!(
                "peer segment {} announces {data_len} bytes: more than can be mapped",
                path.display()
            ))
        })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::Device(format!("opening peer segment {}: {e}", path.display())))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len != total as u64 {
            return Err(Error::Device(format!(
                "peer segment {} has {len} bytes, expected {total}",
                path.display()
            )));
        }
        let map = MmapOptions::new()
            .len(total)
            .map_raw(&file)
            .map_err(|e| Error::Device(format!("mapping peer segment {}: {e}", path.display())))?;
        let mem = SegmentMemory {
            map,
            data: Data::InMapping,
            data_len,
            notif_count,
            file: Some(SharedFile::Peer(path.to_path_buf())),
            revoked: AtomicBool::new(false),
        };
        let magic = mem.ctl_u64(OFF_MAGIC).load(Ordering::Acquire);
        let announced = mem.ctl_u64(OFF_DATA_LEN).load(Ordering::Acquire);
        if magic != MAGIC || announced != data_len as u64 {
            return Err(Error::Device(format!(
                "peer segment {} has a foreign layout",
                path.display()
            )));
        }
        Ok(mem)
    }

    /// Control page and notifications in `ctl`, data in user memory.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and stay so (and not be used through
    /// Rust references that assume exclusivity) until this value is [revoked](Self::revoke)
    /// and no transfer is using it, or until it is dropped.
    pub unsafe fn with_user_data(ctl: SegmentMemory, ptr: *mut u8, len: usize) -> Self {
        let mut mem = ctl;
        mem.data = Data::User { ptr };
        mem.data_len = len;
        mem.ctl_u64(OFF_DATA_LEN)
            .store(len as u64, Ordering::Release);
        mem
    }

    fn write_header(&self) {
        self.ctl_u64(OFF_DATA_LEN)
            .store(self.data_len as u64, Ordering::Relaxed);
        self.ctl_u32(OFF_NOTIF)
            .store(self.notif_count, Ordering::Relaxed);
        self.ctl_u64(OFF_MAGIC).store(MAGIC, Ordering::Release);
    }

    pub fn len(&self) -> usize {
        self.data_len
    }

    pub fn notif_count(&self) -> u32 {
        self.notif_count
    }

    /// Whether local peers can map this segment's data (false for user-bound memory).
    pub fn data_shareable(&self) -> bool {
        self.file.is_some() && matches!(self.data, Data::InMapping)
    }

    fn ctl_u32(&self, off: usize) -> &AtomicU32 {
        assert!(off + 4 <= PAGE && off.is_multiple_of(4));
        // SAFETY: in bounds of the control page (asserted), 4-aligned (the mapping is
        // page-aligned), and only ever accessed atomically, also by other processes.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU32) }
    }

    fn ctl_u64(&self, off: usize) -> &AtomicU64 {
        assert!(off + 8 <= PAGE && off.is_multiple_of(8));
        // SAFETY: as for `ctl_u32`, with 8-byte alignment.
        unsafe { &*(self.map.as_mut_ptr().add(off) as *const AtomicU64) }
    }

    /// The notification slot `id`. Panics if out of range: callers validate ids first.
    pub fn slot(&self, id: u32) -> &AtomicU32 {
        assert!(
            id < self.notif_count,
            "notification {id} out of range {}",
            self.notif_count
        );
        // SAFETY: slot `id` lies in the notification area (asserted), is 4-aligned, and
        // notification slots are only accessed atomically.
        unsafe { &*(self.map.as_mut_ptr().add(PAGE + id as usize * 4) as *const AtomicU32) }
    }

    fn data_ptr(&self) -> *mut u8 {
        match self.data {
            // SAFETY: the data area starts right after the control and notification pages,
            // inside the mapping (its length was computed from the same numbers).
            Data::InMapping => unsafe { self.map.as_mut_ptr().add(ctl_len(self.notif_count)) },
            Data::User { ptr } => ptr,
        }
    }

    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.data_len),
            "segment access [{off}, +{len}) past {}",
            self.data_len
        );
    }

    /// Copies `src` into the data area at `off`.
    pub fn copy_in(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        // SAFETY: destination range checked above; `src` is a distinct Rust slice, so the
        // ranges cannot overlap unless the caller derived it from segment memory through
        // `unsafe` views, which document that contract.
        unsafe { std::ptr::copy(src.as_ptr(), self.data_ptr().add(off), src.len()) }
    }

    /// Copies the data area at `off` into `dst`.
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        // SAFETY: source range checked above; see `copy_in` on overlap.
        unsafe { std::ptr::copy(self.data_ptr().add(off), dst.as_mut_ptr(), dst.len()) }
    }

    /// Copies between two segments' data areas (possibly the same one; overlap allowed).
    pub fn copy_between(
        src: &SegmentMemory,
        src_off: usize,
        dst: &SegmentMemory,
        dst_off: usize,
        len: usize,
    ) {
        src.check(src_off, len);
        dst.check(dst_off, len);
        // SAFETY: both ranges checked; `ptr::copy` has memmove semantics.
        unsafe {
            std::ptr::copy(
                src.data_ptr().add(src_off),
                dst.data_ptr().add(dst_off),
                len,
            )
        }
    }

    /// The 8-byte word at `off` as an atomic. `off` must be 8-aligned and in bounds.
    pub fn atomic_u64(&self, off: usize) -> Result<&AtomicU64> {
        if !off.is_multiple_of(8) || !(self.data_ptr() as usize).is_multiple_of(8) {
            return Err(Error::UnalignedOffset { offset: off as u64 });
        }
        if off.checked_add(8).is_none_or(|e| e > self.data_len) {
            return Err(Error::InvalidSize(format!(
                "atomic at {off} past segment size {}",
                self.data_len
            )));
        }
        // SAFETY: aligned and in bounds (checked above); GASPI atomics treat the word as
        // shared between processes, which is what `AtomicU64` on shared memory provides.
        Ok(unsafe { &*(self.data_ptr().add(off) as *const AtomicU64) })
    }

    /// An `iovec` over `[off, off+len)` of the data area, for vectored socket I/O.
    pub fn iovec(&self, off: usize, len: usize) -> libc::iovec {
        self.check(off, len);
        libc::iovec {
            // SAFETY: `off + len <= data_len` (checked above, panicking otherwise), so
            // `data_ptr() + off` stays inside the data area; the pointer is only handed to
            // the kernel, which accesses at most `len` bytes from it.
            iov_base: unsafe { self.data_ptr().add(off) } as *mut libc::c_void,
            iov_len: len,
        }
    }

    /// The mapping (control page, notification slots and, unless user-bound, the data):
    /// what an RDMA device registers.
    pub fn mapping(&self) -> (*mut u8, usize) {
        (self.map.as_mut_ptr(), self.map.len())
    }

    /// Byte offset of the data area in the mapping; `None` when the data is user memory.
    pub fn data_offset(&self) -> Option<usize> {
        match self.data {
            Data::InMapping => Some(ctl_len(self.notif_count)),
            Data::User { .. } => None,
        }
    }

    /// Byte offset of notification slot `id` in every segment's mapping.
    pub fn slot_offset(id: u32) -> usize {
        PAGE + id as usize * 4
    }

    /// The shared-memory file behind the mapping, if any.
    pub fn file_path(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| match f {
            SharedFile::Own(owned) => owned.path(),
            SharedFile::Peer(path) => path.as_path(),
        })
    }

    /// Raw address of the data area (for the C ABI's `gaspi_segment_ptr` and typed views).
    pub fn data_addr(&self) -> *mut u8 {
        self.data_ptr()
    }

    // ---- notification wake-ups (futex on the control page) ----

    /// Publishes a notification: the data written before is visible to whoever sees it.
    pub fn notify(&self, id: u32, value: u32) {
        self.slot(id).store(value, Ordering::Release);
        self.wake();
    }

    /// Wakes every waiter of this segment (after a notification or a peer failure).
    pub fn wake(&self) {
        self.ctl_u32(OFF_SEQ).fetch_add(1, Ordering::SeqCst);
        if self.ctl_u32(OFF_WAITERS).load(Ordering::SeqCst) > 0 {
            futex_wake(self.ctl_u32(OFF_SEQ));
        }
    }

    /// Sleeps until [`wake`](Self::wake) is called after `ready` was checked, or `max` passes.
    /// `ready` is re-checked after announcing the waiter, so no wake-up is lost.
    pub fn sleep_unless(&self, max: Duration, ready: impl Fn() -> bool) {
        let waiters = self.ctl_u32(OFF_WAITERS);
        waiters.fetch_add(1, Ordering::SeqCst);
        let seq = self.ctl_u32(OFF_SEQ).load(Ordering::SeqCst);
        if !ready() {
            futex_wait(self.ctl_u32(OFF_SEQ), seq, max);
        }
        waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SegmentMemory {
    /// The segment was deleted. User memory bound to it may be freed once the deletion
    /// returns, while the network may still be moving its bytes; so what peers still send
    /// into it (a frame under way, the response to a read) is received and dropped, and what
    /// is still queued from it (a write posted before the deletion, the answer to a peer's
    /// read) is sent as zeros. The deletion revokes the memory and then waits for every
    /// transfer in progress. Memory the runtime allocated is not revoked: it stays valid
    /// while any handle lives, so transfers under way finish as they would have (a
    /// collective's last send may still be queued when its group is deleted). Returns
    /// whether the memory was user memory, now revoked.
    pub fn revoke(&self) -> bool {
        let user = matches!(self.data, Data::User { .. });
        if user {
            self.revoked.store(true, Ordering::Release);
        }
        user
    }

    /// User memory of `len` zero bytes, for tests of what happens to bound memory. The bytes
    /// are leaked: they stay valid for the rest of the process.
    #[cfg(test)]
    pub(crate) fn leaked_user_memory(len: usize) -> Self {
        let data: &'static mut [u8] = Box::leak(vec![0u8; len].into_boxed_slice());
        // SAFETY: leaked, so valid for reads and writes for the rest of the process, and
        // reachable through nothing but this value.
        unsafe { Self::with_user_data(Self::anonymous(0, 1).unwrap(), data.as_mut_ptr(), len) }
    }

    /// Whether this is user memory whose segment was deleted ([`revoke`](Self::revoke)).
    pub fn is_revoked(&self) -> bool {
        self.revoked.load(Ordering::Acquire)
    }

    /// Removes the shared-memory file this process created (the mapping stays valid for
    /// every live handle); later calls and the drop do nothing. Local peers that mapped it
    /// keep their mapping; new ones can no longer open it.
    pub fn unlink(&self) {
        if let Some(SharedFile::Own(owned)) = &self.file {
            owned.unlink();
        }
    }
}

fn open_new(path: &Path) -> std::io::Result<std::fs::File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Fails early, with the numbers, when the file system of `path` lacks `need` bytes.
fn check_free_space(path: &Path, need: usize) -> Result<()> {
    match free_space(path) {
        Some(free) if free < need as u128 => Err(no_space(path, need)),
        _ => Ok(()),
    }
}

fn free_space(path: &Path) -> Option<u128> {
    let st = nix::sys::statvfs::statvfs(path.parent()?).ok()?;
    Some(st.blocks_available() as u128 * st.fragment_size() as u128)
}

fn no_space(path: &Path, need: usize) -> Error {
    let dir = path.parent().unwrap_or(Path::new("/dev/shm"));
    let free = free_space(path).map_or("too few".to_owned(), |f| f.to_string());
    Error::NoMemory(format!(
        "{} has {free} bytes free, the segment needs {need}; free space there or use \
         GASPI_TRANSPORT=tcp",
        dir.display()
    ))
}

fn too_large(data_len: usize) -> Error {
    Error::NoMemory(format!("a segment of {data_len} bytes cannot be mapped"))
}

/// Executes an atomic on a word with a real atomic instruction (the same on every path, so
/// atomics from shared-memory peers and TCP peers are atomic with respect to each other).
pub(crate) fn apply_atomic(word: &std::sync::atomic::AtomicU64, op: AtomicOp) -> u64 {
    match op {
        AtomicOp::FetchAdd { add } => word.fetch_add(add, Ordering::SeqCst),
        AtomicOp::CompareSwap { expected, new } => {
            match word.compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(v) | Err(v) => v,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_copies() {
        let m = SegmentMemory::anonymous(100, 8).unwrap();
        m.copy_in(10, b"hello");
        let mut out = [0u8; 5];
        m.copy_out(10, &mut out);
        assert_eq!(&out, b"hello");
        m.notify(7, 42);
        assert_eq!(m.slot(7).load(Ordering::Acquire), 42);
        assert!(m.atomic_u64(3).is_err());
        assert!(m.atomic_u64(96).is_err());
        m.atomic_u64(88).unwrap().fetch_add(5, Ordering::SeqCst);
    }

    #[test]
    #[should_panic]
    fn out_of_bounds_copy_panics_instead_of_writing() {
        let m = SegmentMemory::anonymous(16, 1).unwrap();
        m.copy_in(10, &[0u8; 7]);
    }

    #[test]
    fn shared_file_roundtrip() {
        let path = std::env::temp_dir().join(format!("tnt-memtest-{}", std::process::id()));
        let a = SegmentMemory::create_shared(&path, 64, 4).unwrap();
        let b = SegmentMemory::open_shared(&path, 64, 4).unwrap();
        a.copy_in(0, &[9; 8]);
        let mut out = [0u8; 8];
        b.copy_out(0, &mut out);
        assert_eq!(out, [9; 8]);
        b.notify(3, 1);
        assert_eq!(a.slot(3).load(Ordering::Acquire), 1);
        assert!(SegmentMemory::open_shared(&path, 65, 4).is_err());
        drop(a);
        assert!(!path.exists());
    }

    fn shm_path(name: &str) -> PathBuf {
        PathBuf::from(format!(
            "/dev/shm/tnt-memtest-{name}-{}",
            std::process::id()
        ))
    }

    #[test]
    fn a_shared_segment_takes_its_pages_at_creation() {
        use std::os::unix::fs::MetadataExt;
        let path = shm_path("pages");
        let m = SegmentMemory::create_shared(&path, 1 << 20, 4).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), (PAGE + PAGE + (1 << 20)) as u64);
        assert!(
            meta.blocks() * 512 >= meta.len(),
            "{} of {} bytes allocated: a sparse file",
            meta.blocks() * 512,
            meta.len()
        );
        drop(m);
    }

    #[test]
    fn creating_over_an_existing_file_fails_and_leaves_it() {
        let path = shm_path("exists");
        let first = SegmentMemory::create_shared(&path, 64, 1).unwrap();
        first.copy_in(0, &[7; 8]);
        assert!(SegmentMemory::create_shared(&path, 64, 1).is_err());
        assert!(path.exists(), "the first segment's file was removed");
        let peer = SegmentMemory::open_shared(&path, 64, 1).unwrap();
        let mut out = [0u8; 8];
        peer.copy_out(0, &mut out);
        assert_eq!(out, [7; 8]);
        drop(first);
        assert!(!path.exists());
    }

    #[test]
    fn a_size_that_overflows_the_mapping_is_refused() {
        // A file laid out like a segment whose header announces almost 2^64 bytes of data:
        // rounded up to pages that size wraps to a small mapping.
        let path = shm_path("wrap");
        let announced = usize::MAX - 100;
        let mut header = vec![0u8; ctl_len(1)];
        header[OFF_MAGIC..OFF_MAGIC + 8].copy_from_slice(&MAGIC.to_ne_bytes());
        header[OFF_DATA_LEN..OFF_DATA_LEN + 8].copy_from_slice(&(announced as u64).to_ne_bytes());
        std::fs::write(&path, &header).unwrap();
        let opened = SegmentMemory::open_shared(&path, announced, 1);
        std::fs::remove_file(&path).unwrap();
        let err = opened.err().expect("refused");
        assert!(err.to_string().contains("more than can be mapped"), "{err}");
        assert!(SegmentMemory::anonymous(announced, 1).is_err());
    }
}
