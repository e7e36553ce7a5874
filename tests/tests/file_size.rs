//! No production source file of the library crates grows past 500 lines (issue 20): a file
//! that long mixes concerns and is split along its seams. Test code does not count: files
//! named `tests.rs` (test modules of their folder) or lying in a `tests/` folder of `src/`
//! (a test module split into files), and a file's trailing `#[cfg(test)] mod tests { ... }`
//! block.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 500;

/// The crates whose `src/` is held to the limit.
const CRATES: &[&str] = &[
    "gaspi",
    "gaspi/capi",
    "allreduce",
    "fusion",
    "trainer",
    "launcher",
    "tnt-env",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Lines of `text` before its trailing test module, if it has one.
fn production_lines(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let test_module = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].starts_with("mod tests"));
    test_module.unwrap_or(lines.len())
}

/// Whether `file` lies in a `tests/` folder below a crate's `src/`.
fn is_in_test_folder(file: &Path) -> bool {
    let parts: Vec<_> = file.iter().collect();
    let src = parts.iter().rposition(|p| *p == "src");
    src.is_some_and(|s| parts[s + 1..parts.len() - 1].iter().any(|p| *p == "tests"))
}

#[test]
fn no_production_file_is_longer_than_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut long: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter(|f| !is_in_test_folder(f))
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).expect("readable source");
            let n = production_lines(&text);
            (n > MAX_LINES).then(|| {
                format!(
                    "{} ({n} lines)",
                    f.strip_prefix(&root).unwrap_or(f).display()
                )
            })
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines; split them along their seams:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_trailing_test_module_does_not_count() {
    let text = "fn a() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
    assert_eq!(production_lines(text), 2);
    assert_eq!(production_lines("fn a() {}\nfn b() {}\n"), 2);
}

#[test]
fn files_of_a_test_folder_in_src_do_not_count() {
    assert!(is_in_test_folder(Path::new(
        "/w/allreduce/src/schedule/tests/model.rs"
    )));
    assert!(is_in_test_folder(Path::new("/w/allreduce/src/tests/a.rs")));
    assert!(!is_in_test_folder(Path::new(
        "/w/allreduce/src/schedule/ring.rs"
    )));
    // A `tests` folder above `src/` (the workspace's tests crate) is not a test module.
    assert!(!is_in_test_folder(Path::new("/w/tests/src/faults.rs")));
    assert!(!is_in_test_folder(Path::new("/w/allreduce/src/tests.rs")));
}
