//! The docs cite only paths that exist: every backticked repository path in every Markdown
//! file of the tree (the README, every crate's README, `docs/`) names a file or folder of the
//! tree (relative to the root, or to the folder of the file that cites it).

use std::path::{Path, PathBuf};

/// Where a path written in the docs starts when it is one of ours. `shared/` is not in the
/// repository: a citation of it is a path the reader cannot follow, and fails here.
const TOP: &[&str] = &[
    "gaspi/",
    "allreduce/",
    "fusion/",
    "trainer/",
    "launcher/",
    "benches/",
    "tests/",
    "tnt-env/",
    "docs/",
    "scripts/",
    "shared/",
    ".ci/",
    "src/",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.md` file under `dir`, leaving out build output (`target/`) and hidden folders
/// (`.git/`, the Python `.venv/`), which hold no docs of ours.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                markdown_files(&path, out);
            }
        } else if path.extension().is_some_and(|x| x == "md") {
            out.push(path);
        }
    }
}

fn docs(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    files.sort();
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

#[test]
fn every_readme_and_every_doc_is_checked() {
    let root = root();
    let checked: Vec<PathBuf> = docs(&root)
        .iter()
        .map(|p| p.strip_prefix(&root).unwrap().to_path_buf())
        .collect();
    for doc in [
        "README.md",
        "gaspi/README.md",
        "allreduce/README.md",
        "fusion/README.md",
        "tnt-env/README.md",
        "launcher/README.md",
        "trainer/README.md",
        "benches/peers/README.md",
        "docs/capi.md",
        "docs/launcher.md",
    ] {
        assert!(
            checked.contains(&PathBuf::from(doc)),
            "{doc} is not checked: {checked:?}"
        );
    }
}

#[test]
fn paths_outside_the_repository_are_caught() {
    let found = cited_paths("`tnt-env/src/lib.rs` and `shared/design/notes.md`");
    assert_eq!(found, ["tnt-env/src/lib.rs", "shared/design/notes.md"]);
    let root = root();
    assert!(!root.join("shared/design/notes.md").exists());
}
