//! The checker itself, on small inline crates: the lexer, the parser, the graph and the
//! reports.

use std::collections::HashMap;

use super::graph::{build, Graph};
use super::lexer::{lex, Tok};
use super::report::{cycle_report, cycles, layer_report, shortest_cycle};

fn graph(files: &[(&str, &str)]) -> Graph {
    let map: HashMap<&str, &str> = files.iter().copied().collect();
    let read = |rel: &str| map.get(rel).map(|s| s.to_string());
    build("t/src", &read).unwrap()
}

/// The edges as `from -> to` of relative paths, sorted and distinct.
fn edges(g: &Graph) -> Vec<String> {
    let mut out: Vec<String> = g
        .pairs()
        .into_iter()
        .map(|(a, b)| format!("{} -> {}", g.files[a].rel, g.files[b].rel))
        .collect();
    out.sort();
    out
}

#[test]
fn a_cycle_is_found_with_its_lines() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "\n\npub struct B(crate::c::C);\n"),
        (
            "c.rs",
            "pub struct C;\nfn f() -> crate::a::A {\n    crate::a::A\n}\n",
        ),
    ]);
    assert_eq!(edges(&g), ["a.rs -> b.rs", "b.rs -> c.rs", "c.rs -> a.rs"]);
    let report = cycle_report(&g).expect("a cycle");
    assert!(
        report.contains("cycle 1 (3 files): a.rs, b.rs, c.rs"),
        "{report}"
    );
    assert!(
        report.contains("t/src/a.rs:1 `crate::b::B` -> b.rs"),
        "{report}"
    );
    assert!(
        report.contains("t/src/b.rs:3 `crate::c::C` -> c.rs"),
        "{report}"
    );
    assert!(
        report.contains("t/src/c.rs:2 `crate::a::A` -> a.rs (and 1 more line)"),
        "{report}"
    );

    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b;"),
        ("b.rs", ""),
    ]);
    assert!(cycle_report(&g).is_none());
}

#[test]
fn the_shortest_chain_is_shown() {
    let g = graph(&[
        ("lib.rs", "mod a; mod b; mod c; mod d;"),
        ("a.rs", "use crate::b; use crate::d;"),
        ("b.rs", "use crate::c;"),
        ("c.rs", "use crate::a;"),
        ("d.rs", "use crate::a;"),
    ]);
    let c = cycles(&g);
    assert_eq!(c.len(), 1);
    let chain: Vec<&str> = shortest_cycle(&g, &c[0])
        .iter()
        .map(|&f| g.files[f].rel.as_str())
        .collect();
    assert_eq!(chain, ["a.rs", "d.rs", "a.rs"]);
}

#[test]
fn super_in_mod_rs_and_in_a_leaf() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod top;\n"),
        ("top.rs", ""),
        // In a/mod.rs (module a), super is the root; in a/b.rs (module a::b), super is a.
        ("a/mod.rs", "mod b;\nmod c;\nuse super::top;\n"),
        (
            "a/b.rs",
            "use super::c::C;\nfn f() { super::super::top::g() }\n",
        ),
        ("a/c.rs", "use super::*;\n"),
    ]);
    assert_eq!(
        edges(&g),
        [
            "a/b.rs -> a/c.rs",
            "a/b.rs -> top.rs",
            "a/c.rs -> a/mod.rs",
            "a/mod.rs -> top.rs"
        ]
    );
    // A non-mod.rs file's children live in its own folder.
    let g = graph(&[
        ("lib.rs", "mod a;"),
        ("a.rs", "mod b;\npub use self::b::B;"),
        ("a/b.rs", "pub struct B; use super::super::a;"),
    ]);
    assert_eq!(edges(&g), ["a.rs -> a/b.rs", "a/b.rs -> a.rs"]);
}

#[test]
fn nested_use_groups() {
    let g = graph(&[
        ("lib.rs", "mod a; mod b; mod c; mod d; mod e;"),
        (
            "a.rs",
            "pub(crate) use crate::{\n    b::{self, B},\n    c::{C, d_again::{x as y}},\n    d::*,\n};\n",
        ),
        ("b.rs", ""),
        ("c.rs", "pub mod d_again { pub fn x() {} }"),
        ("d.rs", "use crate::{e};"),
        ("e.rs", "use crate::{ };"),
    ]);
    assert_eq!(
        edges(&g),
        [
            "a.rs -> b.rs",
            "a.rs -> c.rs",
            "a.rs -> d.rs",
            "d.rs -> e.rs"
        ]
    );
    let lines: Vec<(usize, &str)> = g
        .edges
        .iter()
        .filter(|e| g.files[e.from].rel == "a.rs")
        .map(|e| (e.line, e.path.as_str()))
        .collect();
    assert_eq!(
        lines,
        [
            (2, "crate::b::B"),
            (2, "crate::b::self"),
            (3, "crate::c::C"),
            (3, "crate::c::d_again::x"),
            (4, "crate::d")
        ]
    );
}

#[test]
fn comments_strings_and_cfg_test_are_not_imports() {
    let g = graph(&[
        ("lib.rs", "mod a; mod b; mod c;\n#[cfg(test)]\nmod tests;"),
        (
            "a.rs",
            r####"
            // use crate::b;
            /// [`crate::b::B`]
            //! crate::b
            /* crate::b /* nested */ crate::b */
            const S: &str = "crate::b::B { \" crate::b";
            const R: &str = r##"crate::b "# crate::b"##;
            const C: [char; 3] = ['{', '"', '\''];
            fn f<'a>(x: &'a str) -> &'a str { x }
            #[cfg(test)]
            mod tests {
                use crate::b;
                fn g() { let _ = "}"; crate::b::h(); }
            }
            #[cfg(test)]
            use crate::b::B;
            #[cfg(all(test, unix))]
            fn t() { crate::b::h() }
            pub(in crate::b) fn v() {}
            fn after() { crate::c::k() }
            "####,
        ),
        ("b.rs", "pub fn h() {}"),
        ("c.rs", "pub fn k() {}"),
        ("tests.rs", "use crate::a;"),
    ]);
    assert_eq!(edges(&g), ["a.rs -> c.rs"]);
    assert_eq!(g.test_only, ["tests.rs"]);
    assert_eq!(g.edges[0].line, 20);
}

#[test]
fn test_modules_by_path_and_inner_cfg_test_files() {
    let g = graph(&[
        (
            "lib.rs",
            "mod a;\n#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;\n#[cfg(test)] mod more;",
        ),
        ("a.rs", "#[path = \"other/place.rs\"]\npub mod b;"),
        ("other/place.rs", "use crate::a;"),
        ("a_tests.rs", "use crate::a;"),
        ("more.rs", "use crate::a;"),
    ]);
    assert_eq!(edges(&g), ["other/place.rs -> a.rs"]);
    assert_eq!(g.test_only, ["a_tests.rs", "more.rs"]);

    let g = graph(&[
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "#![cfg(test)]\nuse crate::b;"),
        ("b.rs", ""),
    ]);
    assert!(edges(&g).is_empty());
    assert_eq!(g.test_only, ["a.rs"]);

    // A test module split into a folder: its own modules are test modules too.
    let g = graph(&[
        ("lib.rs", "mod a;"),
        ("a.rs", "#[cfg(test)]\nmod tests;"),
        ("a/tests/mod.rs", "mod model;\nmod flat;"),
        ("a/tests/model.rs", "use crate::a;"),
        ("a/tests/flat.rs", "use super::model;"),
    ]);
    assert!(edges(&g).is_empty());
    assert_eq!(
        g.test_only,
        ["a/tests/mod.rs", "a/tests/model.rs", "a/tests/flat.rs"]
    );
}

#[test]
fn child_modules_by_name_and_inline_modules() {
    let g = graph(&[
        (
            "lib.rs",
            "mod net;\nmod other;\npub use net::Net;\nfn f() { other::g(); std::mem::drop(0); }",
        ),
        ("net/mod.rs", "mod tcp;\npub struct Net(tcp::Tcp);"),
        (
            "net/tcp.rs",
            "pub struct Tcp;\nmod inner { use super::super::Net; }",
        ),
        (
            "other.rs",
            "mod inner { pub fn g() { super::super::net::Net; } }\nfn h() { inner::g() }",
        ),
    ]);
    assert_eq!(
        edges(&g),
        [
            "lib.rs -> net/mod.rs",
            "lib.rs -> other.rs",
            "net/mod.rs -> net/tcp.rs",
            "net/tcp.rs -> net/mod.rs",
            "other.rs -> net/mod.rs",
        ]
    );
}

#[test]
fn exported_macros_belong_to_their_file() {
    let g = graph(&[
        ("lib.rs", "mod a; mod b; pub use a::A;"),
        (
            "a.rs",
            "#[macro_export]\nmacro_rules! shout { () => { $crate::b::f() } }\npub struct A;",
        ),
        (
            "b.rs",
            "pub fn f() {} fn g() { crate::shout!(); crate::A; }",
        ),
    ]);
    assert_eq!(
        edges(&g),
        [
            "a.rs -> b.rs",
            "b.rs -> a.rs",
            "b.rs -> lib.rs",
            "lib.rs -> a.rs"
        ]
    );
}

#[test]
fn layers_name_unassigned_modules_and_upward_imports() {
    let g = graph(&[
        ("lib.rs", "mod low; mod high; mod stray; use high::H;"),
        ("low.rs", "\nuse crate::high::H;"),
        ("high.rs", "use crate::low; pub struct H;"),
        ("stray.rs", ""),
    ]);
    let layers: &[(&str, &[&str])] = &[("bottom", &["low"]), ("top", &["high", "crate", "gone"])];
    let r = layer_report(&g, layers).expect("a broken layering");
    assert!(
        r.contains("top-level module `stray` (t/src/stray.rs) has no layer"),
        "{r}"
    );
    assert!(r.contains("GASPI_LAYERS names `gone`"), "{r}");
    assert!(
        r.contains("t/src/low.rs:2 `crate::high::H` -> high.rs   [low: 0 bottom -> high: 1 top]"),
        "{r}"
    );
    assert!(!r.contains("t/src/high.rs:"), "{r}");

    let fixed: &[(&str, &[&str])] = &[("bottom", &["low", "stray"]), ("top", &["high", "crate"])];
    let g = graph(&[
        ("lib.rs", "mod low; mod high; mod stray;"),
        ("low.rs", ""),
        ("high.rs", "use crate::low;"),
        ("stray.rs", ""),
    ]);
    assert!(layer_report(&g, fixed).is_none());
}

#[test]
fn lexer_keeps_lines_through_multiline_literals() {
    let toks = lex("a\n\"x\ny\"\nb /* \n */ c r#\"\n\"# d 'e' 1.5 f");
    let words: Vec<(String, usize)> = toks
        .iter()
        .filter_map(|t| match &t.tok {
            Tok::Ident(w) => Some((w.clone(), t.line)),
            _ => None,
        })
        .collect();
    let expected = [("a", 1), ("b", 4), ("c", 5), ("d", 6), ("f", 6)];
    assert_eq!(words, expected.map(|(w, l)| (w.to_string(), l)).to_vec());
}
