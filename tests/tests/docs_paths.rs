//! The docs cite only paths that exist: every backticked repository path in the README, in
//! `docs/` and in the crates' READMEs names a file or folder of the tree (relative to the root,
//! or, in a crate's README, to that crate).

use std::path::{Path, PathBuf};

/// Where a path written in the docs starts when it is one of ours.
const TOP: &[&str] = &[
    "gaspi/",
    "allreduce/",
    "fusion/",
    "trainer/",
    "launcher/",
    "benches/",
    "tests/",
    "docs/",
    "scripts/",
    ".ci/",
    "src/",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn docs(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    for dir in [
        "docs",
        "launcher",
        "benches",
        "benches/peers",
        "gaspi/capi",
        "trainer",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "md") {
                files.push(p);
            }
        }
    }
    files
}

/// The backticked words of `text` that look like paths of ours.
fn cited_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(|t| t.trim_end_matches(['.', ',', ':', ';', ')']))
        .filter(|t| !t.contains(char::is_whitespace))
        .filter(|t| TOP.iter().any(|top| t.starts_with(top)))
        // Placeholders and globs are not paths.
        .filter(|t| !t.contains(['*', '<', '>', '{', '}', '$']))
        .map(|t| t.split([':', '#']).next().unwrap_or(t).to_string())
        .collect()
}

#[test]
fn every_cited_path_exists() {
    let root = root();
    let mut missing = Vec::new();
    for doc in docs(&root) {
        let text = std::fs::read_to_string(&doc).unwrap();
        let here = doc.parent().unwrap();
        for path in cited_paths(&text) {
            if !root.join(&path).exists() && !here.join(&path).exists() {
                missing.push(format!("{}: {path}", doc.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "cited paths that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn paths_are_found_in_backticks_only() {
    let found =
        cited_paths("see `gaspi/src/lib.rs:10`, `docs/x.md`. and gaspi/src/y.rs or `a b/c`");
    assert_eq!(found, ["gaspi/src/lib.rs", "docs/x.md"]);
}
