//! The import graph of the workspace's library crates (issue 20): no cycle among the files of
//! a crate, and in `gaspi/src` no import from a lower layer to a higher one.
//!
//! The graph is read from the sources with a small lexer and parser (plain std, no `syn`):
//!
//! - Nodes are the files of a crate's module tree, found by following `mod x;` from `lib.rs`
//!   (`a.rs` and `a/mod.rs` are module `a`; `#[path]` is honoured). Binaries (`main.rs`,
//!   `src/bin/`) are separate roots and are not part of a library's graph. A file declared
//!   under `#[cfg(test)]` (`#[cfg(test)] mod tests;`) is a test module, not a node, and so
//!   are the modules it declares (a test folder's `tests/mod.rs` and its files).
//! - Edges are the paths a file names: `crate::x::y` anywhere in code (also `$crate::` in
//!   macros), `super::x` and `self::x` (relative to the module the code is in, inline modules
//!   included), `x::y` where `x` is a child module declared in the same file, and every leaf of
//!   `use`/`pub use` trees (nested groups, `self` in a group, globs). A path goes to the file of
//!   its longest prefix that is a file module; `crate::m!` of a `#[macro_export]` macro goes to
//!   the file defining the macro. `mod x;` is not an edge, nor is `pub(in crate::x)`.
//! - Comments, string and char literals, attributes, and everything under `#[cfg(test)]` (a
//!   `mod tests { }` block, a test-only `use` or fn) are skipped.
//!
//! Each crate's cycle check is its own test, so that a crate is enabled as soon as it is
//! free of cycles; the failure names each cycle's files and the shortest chain of imports
//! around it with the `file:line` of every link.
//!
//! The checker's parts: `lexer.rs` (tokens with lines), `parse.rs` (a file's `mod`
//! declarations and the paths it names), `graph.rs` (a crate's files and imports),
//! `report.rs` (cycles and layer violations, as messages); `self_check.rs` tests them on
//! small inline crates, this file runs them on the workspace.

mod graph;
mod lexer;
mod parse;
mod report;
mod self_check;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use graph::{build, Graph};
use report::{cycle_report, layer_report};

/// The layers of `gaspi/src`, lowest first: a file may import from its own layer and the ones
/// before it, never from a later one. Every top-level module (a file or folder of `gaspi/src`)
/// must be listed; `crate` is `lib.rs` itself.
const GASPI_LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "types", "error", "config", "clock", "log", "env", "state", "counters", "backoff",
            "topology",
        ],
    ),
    ("memory", &["memory"]),
    ("wire", &["wire"]),
    ("transport", &["transport"]),
    ("control", &["control"]),
    ("runtime", &["runtime"]),
    (
        "api",
        &[
            "crate",
            "context",
            "segment",
            "onesided",
            "notify",
            "queue",
            "group",
            "passive",
            "atomic",
            "reduce",
            "statistics",
            "testing",
        ],
    ),
];

/// The library crates whose graphs are checked, as folders of the workspace.
const LIBRARY_CRATES: &[&str] = &[
    "gaspi",
    "gaspi/capi",
    "allreduce",
    "fusion",
    "trainer",
    "launcher",
    "benches",
    "tnt-env",
];

// ---------------------------------------------------------------------------------------------
// The checks over the workspace.

#[test]
fn no_cycles_fusion() {
    assert_no_cycles("fusion");
}

#[test]
fn no_cycles_tnt_env() {
    assert_no_cycles("tnt-env");
}

#[test]
fn no_cycles_benches() {
    assert_no_cycles("benches");
}

#[test]
fn no_cycles_gaspi_capi() {
    assert_no_cycles("gaspi/capi");
}

#[test]
fn no_cycles_gaspi() {
    assert_no_cycles("gaspi");
}

#[test]
fn no_cycles_allreduce() {
    assert_no_cycles("allreduce");
}

#[test]
fn no_cycles_trainer() {
    assert_no_cycles("trainer");
}

#[test]
fn no_cycles_launcher() {
    assert_no_cycles("launcher");
}

#[test]
fn gaspi_layers() {
    let g = crate_graph("gaspi");
    if let Some(report) = layer_report(&g, GASPI_LAYERS) {
        panic!("{report}");
    }
}

/// The checker sees the whole of every crate: each `.rs` file under `src/` (but the binaries)
/// is a node of the graph or a test module, and gaspi's graph is as large as it really is, so
/// a parser that reads nothing cannot pass the checks above.
#[test]
fn graphs_cover_every_file() {
    let mut missed = Vec::new();
    for krate in LIBRARY_CRATES {
        let g = crate_graph(krate);
        let src = workspace_root().join(krate).join("src");
        let known: HashSet<&str> = g
            .files
            .iter()
            .map(|f| f.rel.as_str())
            .chain(g.test_only.iter().map(String::as_str))
            .collect();
        for rel in rust_files(&src) {
            if rel == "main.rs" || rel.starts_with("bin/") {
                continue;
            }
            if !known.contains(rel.as_str()) {
                missed.push(format!("{krate}/src/{rel}"));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "files not reached from lib.rs by `mod` declarations (an orphan, or a declaration \
         the parser missed):\n  {}",
        missed.join("\n  ")
    );

    let g = crate_graph("gaspi");
    let pairs = g.pairs().len();
    assert!(
        g.files.len() > 30,
        "gaspi/src: only {} files",
        g.files.len()
    );
    assert!(pairs > 80, "gaspi/src: only {pairs} file-to-file edges");
    // One known edge of each kind, so a regression of the parser shows here first.
    for (from, to) in [
        ("transport/tcp/mod.rs", "transport/mod.rs"),
        ("lib.rs", "context.rs"),
        ("context.rs", "error.rs"),
    ] {
        assert!(
            g.has_edge(from, to),
            "gaspi/src: expected an edge {from} -> {to}"
        );
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn crate_graph(krate: &str) -> Graph {
    let src = workspace_root().join(krate).join("src");
    let read = |rel: &str| std::fs::read_to_string(src.join(rel)).ok();
    build(&format!("{krate}/src"), &read).unwrap_or_else(|e| panic!("{e}"))
}

fn assert_no_cycles(krate: &str) {
    let g = crate_graph(krate);
    assert!(!g.files.is_empty(), "{krate}: no files");
    if let Some(report) = cycle_report(&g) {
        panic!("{report}");
    }
}

/// The `.rs` files under `dir`, relative to it, with `/` separators.
fn rust_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(dir).unwrap();
                let parts: Vec<_> = rel.iter().map(|s| s.to_string_lossy()).collect();
                out.push(parts.join("/"));
            }
        }
    }
    out.sort();
    out
}
