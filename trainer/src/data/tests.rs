use super::*;
use crate::idx::{write_idx, write_idx_gz};
use crate::testdata::write_dataset;

/// A fresh directory of this test process, removed when dropped, also when its test fails.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("tnt-data-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn load_err(dir: &Path) -> String {
    load(DatasetKind::Mnist, Some(dir), 0, 0)
        .unwrap_err()
        .to_string()
}

#[test]
fn gz_and_plain_datasets_decode_the_same() {
    let (gz, plain) = (scratch("gz"), scratch("plain"));
    write_dataset(&gz, 30, 7, true, 3).unwrap();
    write_dataset(&plain, 30, 7, false, 3).unwrap();
    let (a, b) = (
        load(DatasetKind::FashionMnist, Some(&gz), 0, 0).unwrap(),
        load(DatasetKind::FashionMnist, Some(&plain), 0, 0).unwrap(),
    );
    assert_eq!(a.train.len(), 30);
    assert_eq!(a.test.as_ref().unwrap().len(), 7);
    let (xa, ya) = a.train.batch(&[29, 0, 5]).unwrap();
    let (xb, yb) = b.train.batch(&[29, 0, 5]).unwrap();
    assert!(xa.equal(&xb) && ya.equal(&yb));
    assert_eq!(xa.size(), [3, 1, 28, 28]);
    assert!(a.train.batch(&[30]).is_err());
}

#[test]
fn pixels_are_normalized_with_the_datasets_statistics() {
    let dir = scratch("norm");
    let mut images = vec![0u8; 2 * 28 * 28];
    images[28 * 28 + 1] = 255;
    for split in [Split::Train, Split::Test] {
        let (i, l) = split.file_names();
        write_idx(&dir.join(i), &[2, 28, 28], &images).unwrap();
        write_idx(&dir.join(l), &[2], &[7, 9]).unwrap();
    }
    let s = load(DatasetKind::FashionMnist, Some(&dir), 0, 0).unwrap();
    let (x, y) = s.train.batch(&[1]).unwrap();
    assert_eq!(Vec::<i64>::try_from(&y).unwrap(), [9]);
    let x = x.flatten(0, -1);
    assert!((x.double_value(&[0]) - f64::from(-0.2860f32 / 0.3530)).abs() < 1e-5);
    assert!((x.double_value(&[1]) - f64::from((1.0 - 0.2860f32) / 0.3530)).abs() < 1e-5);
    let m = load(DatasetKind::Mnist, Some(&dir), 0, 0).unwrap();
    let x = m.train.batch(&[1]).unwrap().0.flatten(0, -1);
    assert!((x.double_value(&[1]) - f64::from((1.0 - 0.1307f32) / 0.3081)).abs() < 1e-5);
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    let dir = scratch("bad");
    write_dataset(&dir, 5, 3, false, 1).unwrap();
    let (ti, tl) = Split::Train.file_names();
    let (ei, el) = Split::Test.file_names();
    // Wrong magic.
    std::fs::write(dir.join(&tl), b"not idx at all").unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&tl) && e.contains("magic"), "{e}");
    // Labels out of range.
    write_idx(&dir.join(&tl), &[5], &[1, 2, 10, 3, 4]).unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&tl) && e.contains("label 10 of sample 2"), "{e}");
    // Label count differs from the image count.
    write_idx(&dir.join(&tl), &[4], &[1, 2, 3, 4]).unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&tl) && e.contains("expected 5 labels"), "{e}");
    write_idx(&dir.join(&tl), &[5], &[1, 2, 3, 4, 5]).unwrap();
    // Wrong image dimensions.
    write_idx(&dir.join(&ti), &[5, 28, 27], &vec![0; 5 * 28 * 27]).unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&ti) && e.contains("28 x 28"), "{e}");
    // Truncated file (compressed and not).
    let full = crate::idx::IdxArray {
        dims: vec![5, 28, 28],
        data: vec![1; 5 * 28 * 28],
    };
    write_idx(&dir.join(&ti), &full.dims, &full.data[..100]).unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&ti) && e.contains("truncated"), "{e}");
    std::fs::remove_file(dir.join(&ti)).unwrap();
    write_idx_gz(&dir.join(format!("{ti}.gz")), &full.dims, &full.data).unwrap();
    let bytes = std::fs::read(dir.join(format!("{ti}.gz"))).unwrap();
    std::fs::write(dir.join(format!("{ti}.gz")), &bytes[..bytes.len() - 9]).unwrap();
    let e = load_err(&dir);
    assert!(e.contains(&format!("{ti}.gz")) && e.contains("gzip"), "{e}");
    write_idx_gz(&dir.join(format!("{ti}.gz")), &full.dims, &full.data).unwrap();
    assert!(load(DatasetKind::Mnist, Some(&dir), 0, 0).is_ok());
    // Missing test split.
    std::fs::remove_file(dir.join(&ei)).unwrap();
    let e = load_err(&dir);
    assert!(e.contains("missing test split") && e.contains(&ei), "{e}");
    write_dataset(&dir, 5, 3, false, 1).unwrap();
    std::fs::remove_file(dir.join(&el)).unwrap();
    assert!(load_err(&dir).contains(&el));
}

#[test]
fn mnist_without_a_directory_says_what_to_pass() {
    let e = load(DatasetKind::Mnist, None, 0, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--data-dir"), "{e}");
}

#[test]
fn truncate_keeps_a_prefix() {
    let dir = scratch("trunc");
    write_dataset(&dir, 20, 4, true, 9).unwrap();
    let mut s = load(DatasetKind::Mnist, Some(&dir), 0, 0).unwrap();
    let (x, _) = s.train.batch(&[3]).unwrap();
    s.train.truncate(5);
    assert_eq!(s.train.len(), 5);
    assert!(s.train.batch(&[3]).unwrap().0.equal(&x));
    assert!(s.train.batch(&[5]).is_err());
}

#[test]
fn synthetic_data_is_deterministic() {
    let a = Dataset::synthetic(16, 42).unwrap();
    let b = Dataset::synthetic(16, 42).unwrap();
    let all: Vec<usize> = (0..16).collect();
    let (xa, ya) = a.batch(&all).unwrap();
    let (xb, yb) = b.batch(&all).unwrap();
    assert!(xa.equal(&xb) && ya.equal(&yb));
    assert!(Dataset::synthetic(0, 42).is_err());
    let s = load(DatasetKind::Synthetic, None, 8, 1).unwrap();
    assert!(s.test.is_none());
}
