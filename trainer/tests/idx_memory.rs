//! Reading a gzip IDX file keeps no more than its header announces. In a test binary of its
//! own: the check reads this process's peak resident memory, which other tests running
//! beside it in one process would raise.

use std::io::Write;

/// The high-water mark of this process's resident memory, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_gzip_file_that_expands_past_its_header_is_refused_without_keeping_it() {
    let dir = std::env::temp_dir().join(format!("tnt-idx-bomb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bomb.gz");
    let file = std::fs::File::create(&path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    // An unsigned-byte IDX header for [1, 28, 28], its 784 bytes, then 96 MiB more.
    gz.write_all(&[0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28])
        .unwrap();
    gz.write_all(&[0; 784]).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..96 {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap();
    drop(zeros);
    let before = peak_rss();
    let err = trainer::idx::read_idx(&path).unwrap_err().to_string();
    let grew = peak_rss() - before;
    assert!(err.contains("bomb.gz") && err.contains("trailing"), "{err}");
    assert!(grew < 32 << 20, "resident memory grew by {grew} bytes");
    std::fs::remove_dir_all(&dir).unwrap();
}
