//! The import graph of the workspace's library crates (issue 20): no cycle among the files of
//! a crate, and in `gaspi/src` no import from a lower layer to a higher one.
//!
//! The graph is read from the sources with a small lexer and parser (plain std, no `syn`):
//!
//! - Nodes are the files of a crate's module tree, found by following `mod x;` from `lib.rs`
//!   (`a.rs` and `a/mod.rs` are module `a`; `#[path]` is honoured). Binaries (`main.rs`,
//!   `src/bin/`) are separate roots and are not part of a library's graph. A file declared
//!   under `#[cfg(test)]` (`#[cfg(test)] mod tests;`) is a test module, not a node.
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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

// ---------------------------------------------------------------------------------------------
// Lexer: identifiers, `::`, punctuation and string literals, with line numbers; comments,
// numbers, char literals and lifetimes are dropped or reduced to `Other`.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
    PathSep,
    Other,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

fn lex(src: &str) -> Vec<Token> {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let at = |k: usize| if k < n { c[k] } else { '\0' };
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < n {
        let ch = c[i];
        let start = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < n && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            // Block comments nest.
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, j) = quoted(&c, i + 1, &mut line);
            out.push(Token {
                tok: Tok::Str(s),
                line: start,
            });
            i = j;
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                // '\n', '\'', '\u{7f}': the escaped char, then up to the closing quote.
                i += 3;
                while i < n && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3; // 'x', '{', '"'
            } else {
                // A lifetime or a label.
                i += 1;
                while i < n && is_ident_char(c[i]) {
                    i += 1;
                }
            }
            out.push(Token {
                tok: Tok::Other,
                line: start,
            });
        } else if ch.is_ascii_digit() {
            while i < n && (is_ident_char(c[i]) || (c[i] == '.' && at(i + 1).is_ascii_digit())) {
                i += 1;
            }
            out.push(Token {
                tok: Tok::Other,
                line: start,
            });
        } else if is_ident_start(ch) {
            let b = i;
            while i < n && is_ident_char(c[i]) {
                i += 1;
            }
            let word: String = c[b..i].iter().collect();
            let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
            if raw_prefix && (at(i) == '"' || at(i) == '#') {
                if let Some((s, j)) = raw_string(&c, i, &mut line) {
                    out.push(Token {
                        tok: Tok::Str(s),
                        line: start,
                    });
                    i = j;
                    continue;
                }
            }
            if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                let (s, j) = quoted(&c, i + 1, &mut line);
                out.push(Token {
                    tok: Tok::Str(s),
                    line: start,
                });
                i = j;
                continue;
            }
            if word == "r" && at(i) == '#' && is_ident_start(at(i + 1)) {
                // A raw identifier, r#type.
                let b = i + 1;
                i += 1;
                while i < n && is_ident_char(c[i]) {
                    i += 1;
                }
                out.push(Token {
                    tok: Tok::Ident(c[b..i].iter().collect()),
                    line: start,
                });
                continue;
            }
            out.push(Token {
                tok: Tok::Ident(word),
                line: start,
            });
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Token {
                tok: Tok::PathSep,
                line: start,
            });
            i += 2;
        } else {
            out.push(Token {
                tok: Tok::Punct(ch),
                line: start,
            });
            i += 1;
        }
    }
    out
}

/// The body of a `"…"` literal starting at `i` (after the quote), and the index after it.
fn quoted(c: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let mut s = String::new();
    while i < c.len() {
        match c[i] {
            '\\' => {
                s.push('\\');
                if let Some(&e) = c.get(i + 1) {
                    *line += usize::from(e == '\n');
                    s.push(e);
                }
                i += 2;
            }
            '"' => return (s, i + 1),
            ch => {
                *line += usize::from(ch == '\n');
                s.push(ch);
                i += 1;
            }
        }
    }
    (s, i)
}

/// A raw string `#*"…"#*` starting at `i` (after the `r`), if it is one.
fn raw_string(c: &[char], i: usize, line: &mut usize) -> Option<(String, usize)> {
    let hashes = c[i..].iter().take_while(|&&ch| ch == '#').count();
    if c.get(i + hashes) != Some(&'"') {
        return None;
    }
    let mut j = i + hashes + 1;
    let b = j;
    while j < c.len() {
        if c[j] == '"'
            && c[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&h| h == '#')
                .count()
                == hashes
        {
            let s: String = c[b..j].iter().collect();
            return Some((s, j + 1 + hashes));
        }
        *line += usize::from(c[j] == '\n');
        j += 1;
    }
    Some((c[b..].iter().collect(), c.len()))
}

// ---------------------------------------------------------------------------------------------
// Parser: the `mod` declarations, the paths a file names and its exported macros.

/// Where a path starts.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Base {
    /// `crate::` (or `$crate::`).
    Crate,
    /// `super::` repeated n times.
    Super(usize),
    /// `self::`.
    SelfMod,
    /// A plain name, an edge only if it is a child module declared in the same file.
    Bare,
}

/// A path as written: `segs` follow `base`; `scope` is the inline modules it is written in.
#[derive(Clone, Debug)]
struct RawRef {
    base: Base,
    segs: Vec<String>,
    scope: Vec<String>,
    line: usize,
    text: String,
}

/// `mod name;` (a file module) or `mod name { }` (inline) inside the inline modules `scope`.
#[derive(Clone, Debug)]
struct ModDecl {
    name: String,
    scope: Vec<String>,
    path_attr: Option<String>,
    test_only: bool,
    inline: bool,
}

#[derive(Debug, Default)]
struct Parsed {
    mods: Vec<ModDecl>,
    refs: Vec<RawRef>,
    macro_exports: Vec<String>,
    /// The whole file is `#![cfg(test)]`.
    test_only: bool,
}

/// The attributes read before the item they apply to.
#[derive(Default)]
struct Attrs {
    cfg_test: bool,
    path: Option<String>,
    macro_export: bool,
}

fn ident(t: &[Token], i: usize) -> Option<&str> {
    match t.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

fn is_ident(t: &[Token], i: usize, word: &str) -> bool {
    ident(t, i) == Some(word)
}

fn is_punct(t: &[Token], i: usize, ch: char) -> bool {
    matches!(t.get(i).map(|t| &t.tok), Some(Tok::Punct(c)) if *c == ch)
}

fn is_sep(t: &[Token], i: usize) -> bool {
    matches!(t.get(i).map(|t| &t.tok), Some(Tok::PathSep))
}

fn parse(src: &str) -> Parsed {
    let t = lex(src);
    let mut p = Parsed::default();
    // One entry per open `{`: the module's name when the brace opens an inline module.
    let mut braces: Vec<Option<String>> = Vec::new();
    let scope =
        |braces: &[Option<String>]| -> Vec<String> { braces.iter().flatten().cloned().collect() };
    let mut attrs = Attrs::default();
    let mut i = 0;
    while i < t.len() {
        if is_punct(&t, i, '#') {
            let inner = is_punct(&t, i + 1, '!');
            let open = if inner { i + 2 } else { i + 1 };
            if is_punct(&t, open, '[') {
                let close = closing_bracket(&t, open);
                let body = &t[open + 1..close.min(t.len())];
                if inner {
                    if braces.is_empty() && is_cfg_test(body) {
                        p.test_only = true;
                        return p;
                    }
                } else {
                    read_attr(body, &mut attrs);
                }
                i = close + 1;
                continue;
            }
        }
        if attrs.cfg_test {
            let end = skip_item(&t, i);
            if let Some(name) = file_mod_decl(&t[i..end]) {
                p.mods.push(ModDecl {
                    name,
                    scope: scope(&braces),
                    path_attr: attrs.path.take(),
                    test_only: true,
                    inline: false,
                });
            }
            attrs = Attrs::default();
            i = end.max(i + 1);
            continue;
        }
        match &t[i].tok {
            Tok::Punct('{') => {
                braces.push(None);
                attrs = Attrs::default();
                i += 1;
            }
            Tok::Punct('}') => {
                braces.pop();
                attrs = Attrs::default();
                i += 1;
            }
            Tok::Punct(';') => {
                attrs = Attrs::default();
                i += 1;
            }
            Tok::Ident(w) if w == "use" && !is_sep(&t, i.wrapping_sub(1)) => {
                let here = scope(&braces);
                let mut leaves = Vec::new();
                i = use_tree(&t, i + 1, &[], &mut leaves);
                for (segs, line) in leaves {
                    if let Some(r) = classify(segs, here.clone(), line) {
                        p.refs.push(r);
                    }
                }
                attrs = Attrs::default();
            }
            Tok::Ident(w) if w == "mod" && ident(&t, i + 1).is_some() => {
                let name = ident(&t, i + 1).unwrap().to_string();
                if is_punct(&t, i + 2, '{') {
                    p.mods.push(ModDecl {
                        name: name.clone(),
                        scope: scope(&braces),
                        path_attr: None,
                        test_only: false,
                        inline: true,
                    });
                    braces.push(Some(name));
                    i += 3;
                } else {
                    if is_punct(&t, i + 2, ';') {
                        p.mods.push(ModDecl {
                            name,
                            scope: scope(&braces),
                            path_attr: attrs.path.take(),
                            test_only: false,
                            inline: false,
                        });
                    }
                    i += 2;
                }
                attrs = Attrs::default();
            }
            Tok::Ident(w) if w == "macro_rules" && is_punct(&t, i + 1, '!') => {
                if let (true, Some(name)) = (attrs.macro_export, ident(&t, i + 2)) {
                    p.macro_exports.push(name.to_string());
                }
                i += 3;
            }
            Tok::Ident(_) => match path_at(&t, i, &scope(&braces)) {
                Some((r, end)) => {
                    p.refs.push(r);
                    i = end;
                }
                None => i += 1,
            },
            _ => i += 1,
        }
    }
    p
}

/// The index of the `]` closing the `[` at `open` (or the end).
fn closing_bracket(t: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (j, tok) in t.iter().enumerate().skip(open) {
        match tok.tok {
            Tok::Punct('[') => depth += 1,
            Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// `cfg(test)` or `cfg(all(test, …))`: the item exists only in test builds.
fn is_cfg_test(body: &[Token]) -> bool {
    if !(is_ident(body, 0, "cfg") && is_punct(body, 1, '(')) {
        return false;
    }
    if is_ident(body, 2, "test") && is_punct(body, 3, ')') && body.len() == 4 {
        return true;
    }
    if !(is_ident(body, 2, "all") && is_punct(body, 3, '(')) {
        return false;
    }
    let mut depth = 0;
    for tok in &body[4..] {
        match &tok.tok {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') if depth == 0 => return false,
            Tok::Punct(')') => depth -= 1,
            Tok::Ident(w) if depth == 0 && w == "test" => return true,
            _ => {}
        }
    }
    false
}

fn read_attr(body: &[Token], attrs: &mut Attrs) {
    if is_cfg_test(body) {
        attrs.cfg_test = true;
    }
    if let (true, true, Some(Tok::Str(s))) = (
        is_ident(body, 0, "path"),
        is_punct(body, 1, '='),
        body.get(2).map(|t| &t.tok),
    ) {
        attrs.path = Some(s.clone());
    }
    if is_ident(body, 0, "macro_export") {
        attrs.macro_export = true;
    }
}

/// Skips a visibility (`pub`, `pub(crate)`, `pub(in a::b)`) at `i`.
fn skip_vis(t: &[Token], mut i: usize) -> usize {
    if is_ident(t, i, "pub") {
        i += 1;
        if is_punct(t, i, '(') {
            while i < t.len() && !is_punct(t, i, ')') {
                i += 1;
            }
            i += 1;
        }
    }
    i
}

/// The index after the item (or statement) starting at `i`: its `;` or the `}` closing its
/// body, or the `}` of the enclosing block if the item runs into it (a last field or arm).
fn skip_item(t: &[Token], i: usize) -> usize {
    let k = skip_vis(t, i);
    let ends_with_semicolon = match ident(t, k) {
        Some("use" | "let" | "type" | "static") => true,
        Some("const") => !matches!(ident(t, k + 1), Some("fn" | "unsafe" | "async" | "extern")),
        _ => false,
    };
    let mut depth = 0usize;
    for (j, tok) in t.iter().enumerate().skip(i) {
        match tok.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(c @ (')' | ']' | '}')) => {
                if depth == 0 {
                    return j;
                }
                depth -= 1;
                if depth == 0 && c == '}' && !ends_with_semicolon {
                    return j + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return j + 1,
            _ => {}
        }
    }
    t.len()
}

/// `[vis] mod name;` → name.
fn file_mod_decl(item: &[Token]) -> Option<String> {
    let k = skip_vis(item, 0);
    if is_ident(item, k, "mod") && is_punct(item, k + 2, ';') {
        ident(item, k + 1).map(str::to_string)
    } else {
        None
    }
}

/// Reads the use tree at `j` below `prefix`, pushing each leaf path with the line of its last
/// name; returns the index after the tree.
fn use_tree(
    t: &[Token],
    mut j: usize,
    prefix: &[String],
    leaves: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut segs = prefix.to_vec();
    let mut line = t.get(j).map_or(0, |t| t.line);
    while j < t.len() {
        match &t[j].tok {
            Tok::PathSep => {
                if segs.is_empty() {
                    segs.push("::".into()); // `::name`, an external crate
                }
                j += 1;
            }
            Tok::Punct('$') => j += 1,
            Tok::Ident(w) if w == "as" => {
                leaves.push((segs, line));
                return j + 2;
            }
            Tok::Ident(w) => {
                segs.push(w.clone());
                line = t[j].line;
                j += 1;
            }
            Tok::Punct('*') => {
                leaves.push((segs, t[j].line));
                return j + 1;
            }
            Tok::Punct('{') => {
                j += 1;
                while j < t.len() {
                    if is_punct(t, j, '}') {
                        return j + 1;
                    }
                    if is_punct(t, j, ',') {
                        j += 1;
                        continue;
                    }
                    let next = use_tree(t, j, &segs, leaves);
                    j = next.max(j + 1);
                }
                return j;
            }
            _ => {
                leaves.push((segs, line));
                return j;
            }
        }
    }
    j
}

/// A use leaf as a path: `crate::…`, `super::…`, `self::…` or a plain name.
fn classify(mut segs: Vec<String>, scope: Vec<String>, line: usize) -> Option<RawRef> {
    let text = segs.join("::");
    if segs.len() > 1 && segs.last().is_some_and(|s| s == "self") {
        segs.pop(); // `a::{self, …}`
    }
    let first = segs.first()?.clone();
    let (base, skip) = match first.as_str() {
        "::" => return None,
        "crate" => (Base::Crate, 1),
        "self" => (Base::SelfMod, 1),
        "super" => {
            let n = segs.iter().take_while(|s| *s == "super").count();
            (Base::Super(n), n)
        }
        _ => (Base::Bare, 0),
    };
    Some(RawRef {
        base,
        segs: segs[skip..].to_vec(),
        scope,
        line,
        text,
    })
}

/// The path starting with the name at `i`, if it is one that can name a module of the crate,
/// and the index after it.
fn path_at(t: &[Token], i: usize, scope: &[String]) -> Option<(RawRef, usize)> {
    let word = ident(t, i)?;
    if i > 0 && (is_sep(t, i - 1) || is_punct(t, i - 1, '.')) {
        return None; // the middle of a path, or a method
    }
    let in_visibility = i >= 2 && is_ident(t, i - 1, "in") && is_punct(t, i - 2, '(');
    let (base, mut j) = match word {
        "crate" => (Base::Crate, i + 1),
        "self" => (Base::SelfMod, i + 1),
        "super" => {
            let (mut n, mut j) = (1, i + 1);
            while is_sep(t, j) && is_ident(t, j + 1, "super") {
                n += 1;
                j += 2;
            }
            (Base::Super(n), j)
        }
        _ if i > 0 && is_punct(t, i - 1, '$') => return None, // a macro variable
        _ => (Base::Bare, i + 1),
    };
    if !is_sep(t, j) {
        return None;
    }
    let mut segs = if base == Base::Bare {
        vec![word.to_string()]
    } else {
        Vec::new()
    };
    while is_sep(t, j) {
        match ident(t, j + 1) {
            Some(s) => {
                segs.push(s.to_string());
                j += 2;
            }
            None => break,
        }
    }
    if in_visibility {
        return None; // `pub(in crate::a)` restricts, it imports nothing
    }
    let text = t[i..j]
        .iter()
        .map(|t| match &t.tok {
            Tok::Ident(s) => s.as_str(),
            _ => "::",
        })
        .collect::<String>();
    let r = RawRef {
        base,
        segs,
        scope: scope.to_vec(),
        line: t[i].line,
        text,
    };
    Some((r, j))
}

// ---------------------------------------------------------------------------------------------
// The graph of one crate.

struct FileNode {
    /// Relative to the crate's `src/`, with `/` separators.
    rel: String,
    module: Vec<String>,
}

/// One import: file `from` names `path` on `line`, which lives in file `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: usize,
    to: usize,
    line: usize,
    path: String,
}

struct Graph {
    /// The crate's `src/` as written in messages (`gaspi/src`).
    label: String,
    files: Vec<FileNode>,
    /// Files that are only test modules (`#[cfg(test)] mod tests;`).
    test_only: Vec<String>,
    edges: Vec<Edge>,
}

impl Graph {
    fn loc(&self, f: usize) -> String {
        format!("{}/{}", self.label, self.files[f].rel)
    }

    /// The distinct (from, to) file pairs.
    fn pairs(&self) -> BTreeSet<(usize, usize)> {
        self.edges.iter().map(|e| (e.from, e.to)).collect()
    }

    fn index(&self, rel: &str) -> Option<usize> {
        self.files.iter().position(|f| f.rel == rel)
    }

    fn has_edge(&self, from: &str, to: &str) -> bool {
        match (self.index(from), self.index(to)) {
            (Some(a), Some(b)) => self.edges.iter().any(|e| e.from == a && e.to == b),
            _ => false,
        }
    }

    /// The imports making the edge `from -> to`, first line first.
    fn edges_between(&self, from: usize, to: usize) -> Vec<&Edge> {
        self.edges
            .iter()
            .filter(|e| e.from == from && e.to == to)
            .collect()
    }

    /// `file:line `path`` of the first import making `from -> to`, and how many more lines.
    fn link(&self, from: usize, to: usize) -> String {
        let es = self.edges_between(from, to);
        let e = es[0];
        let more = es.len() - 1;
        let more = if more > 0 {
            format!(" (and {more} more line{})", if more > 1 { "s" } else { "" })
        } else {
            String::new()
        };
        format!(
            "{}:{} `{}` -> {}{more}",
            self.loc(from),
            e.line,
            e.path,
            self.files[to].rel
        )
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

fn parent(rel: &str) -> &str {
    rel.rfind('/').map_or("", |k| &rel[..k])
}

/// The module tree from `lib.rs` (files read through `read`, relative to `src/`) and its edges.
fn build(label: &str, read: &dyn Fn(&str) -> Option<String>) -> Result<Graph, String> {
    let mut files = Vec::new();
    let mut parsed = Vec::new();
    let mut test_only = Vec::new();
    // (file, module, whether its child modules live in its own folder: lib.rs, mod.rs, #[path])
    let mut queue = VecDeque::from([("lib.rs".to_string(), Vec::<String>::new(), true)]);
    while let Some((rel, module, owns_dir)) = queue.pop_front() {
        let src = read(&rel).ok_or_else(|| format!("{label}/{rel}: cannot read"))?;
        let p = parse(&src);
        if p.test_only {
            test_only.push(rel);
            continue;
        }
        let dir = if owns_dir {
            parent(&rel).to_string()
        } else {
            rel.trim_end_matches(".rs").to_string()
        };
        for m in p.mods.iter().filter(|m| !m.inline) {
            let mut child_module = module.clone();
            child_module.extend(m.scope.iter().cloned());
            child_module.push(m.name.clone());
            let found = match &m.path_attr {
                Some(path) if m.scope.is_empty() => {
                    let f = join(parent(&rel), path);
                    read(&f).map(|_| (f, true))
                }
                _ => {
                    let base = m.scope.iter().fold(dir.clone(), |d, s| join(&d, s));
                    let base = join(&base, &m.name);
                    let leaf = format!("{base}.rs");
                    let folder = format!("{base}/mod.rs");
                    if read(&leaf).is_some() {
                        Some((leaf, false))
                    } else {
                        read(&folder).map(|_| (folder, true))
                    }
                }
            };
            match (found, m.test_only) {
                (Some((f, _)), true) => test_only.push(f),
                (Some((f, owns)), false) => queue.push_back((f, child_module, owns)),
                (None, true) => {}
                (None, false) => {
                    return Err(format!(
                        "{label}/{rel}: `mod {};` names no file (a parser bug?)",
                        m.name
                    ))
                }
            }
        }
        files.push(FileNode { rel, module });
        parsed.push(p);
    }

    let by_module: HashMap<&[String], usize> = files
        .iter()
        .enumerate()
        .map(|(k, f)| (f.module.as_slice(), k))
        .collect();
    let macros: HashMap<&str, usize> = parsed
        .iter()
        .enumerate()
        .flat_map(|(k, p)| p.macro_exports.iter().map(move |m| (m.as_str(), k)))
        .collect();
    let mut edges = BTreeSet::new();
    for (from, (file, p)) in files.iter().zip(&parsed).enumerate() {
        // Every module declared in this file, inline ones included, as a full path.
        let declared: HashSet<Vec<String>> = p
            .mods
            .iter()
            .filter(|m| !m.test_only)
            .map(|m| {
                let mut full = file.module.clone();
                full.extend(m.scope.iter().cloned());
                full.push(m.name.clone());
                full
            })
            .collect();
        for r in &p.refs {
            let Some(abs) = absolute(r, &file.module, &declared) else {
                continue;
            };
            let mut n = abs.len();
            while !by_module.contains_key(&abs[..n]) {
                n -= 1;
            }
            let mut to = by_module[&abs[..n]];
            if n == 0 {
                if let Some(&k) = abs.first().and_then(|name| macros.get(name.as_str())) {
                    to = k;
                }
            }
            if to != from {
                edges.insert(Edge {
                    from,
                    to,
                    line: r.line,
                    path: r.text.clone(),
                });
            }
        }
    }
    Ok(Graph {
        label: label.to_string(),
        files,
        test_only,
        edges: edges.into_iter().collect(),
    })
}

/// The path from the crate root that `r` names, written in `module`; `None` if it names
/// nothing of the crate.
fn absolute(r: &RawRef, module: &[String], declared: &HashSet<Vec<String>>) -> Option<Vec<String>> {
    let mut here = module.to_vec();
    here.extend(r.scope.iter().cloned());
    let mut abs = match r.base {
        Base::Crate => Vec::new(),
        Base::SelfMod => here,
        Base::Super(n) => {
            let keep = here.len().checked_sub(n)?;
            here.truncate(keep);
            here
        }
        Base::Bare => {
            let mut child = here.clone();
            child.push(r.segs.first()?.clone());
            if !declared.contains(&child) {
                return None;
            }
            here
        }
    };
    abs.extend(r.segs.iter().cloned());
    Some(abs)
}

// ---------------------------------------------------------------------------------------------
// Cycles (Tarjan's strongly connected components) and layers.

fn strongly_connected(n: usize, adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adj: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.adj[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let mut s = State {
        adj,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

fn adjacency(g: &Graph) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); g.files.len()];
    for (a, b) in g.pairs() {
        adj[a].push(b);
    }
    adj
}

/// The files of each cycle (components of more than one file), each sorted by path.
fn cycles(g: &Graph) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = strongly_connected(g.files.len(), &adjacency(g))
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut c| {
            c.sort_by(|&a, &b| g.files[a].rel.cmp(&g.files[b].rel));
            c
        })
        .collect();
    out.sort_by(|a, b| g.files[a[0]].rel.cmp(&g.files[b[0]].rel));
    out
}

/// The shortest cycle inside `comp`: its files in order, the first repeated at the end.
fn shortest_cycle(g: &Graph, comp: &[usize]) -> Vec<usize> {
    let adj = adjacency(g);
    let inside: HashSet<usize> = comp.iter().copied().collect();
    let mut best: Option<Vec<usize>> = None;
    for &s in comp {
        // Breadth first from s until an edge leads back to s.
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([s]);
        let mut seen = HashSet::from([s]);
        let mut closing = None;
        'bfs: while let Some(v) = queue.pop_front() {
            for &w in &adj[v] {
                if w == s {
                    closing = Some(v);
                    break 'bfs;
                }
                if inside.contains(&w) && seen.insert(w) {
                    prev.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        let Some(mut v) = closing else { continue };
        let mut path = vec![s, v];
        while v != s {
            v = prev[&v];
            path.push(v);
        }
        path.reverse(); // s … v s
        if best.as_ref().is_none_or(|b| path.len() < b.len()) {
            best = Some(path);
        }
    }
    best.expect("a strongly connected component of more than one file has a cycle")
}

fn cycle_report(g: &Graph) -> Option<String> {
    let cycles = cycles(g);
    if cycles.is_empty() {
        return None;
    }
    let mut r = format!(
        "{}: {} import cycle{} among files ({} files, {} file-to-file edges); break each by \
         moving what one side needs below the other:\n",
        g.label,
        cycles.len(),
        if cycles.len() > 1 { "s" } else { "" },
        g.files.len(),
        g.pairs().len()
    );
    for (k, comp) in cycles.iter().enumerate() {
        let names: Vec<&str> = comp.iter().map(|&f| g.files[f].rel.as_str()).collect();
        let _ = writeln!(
            r,
            "\ncycle {} ({} files): {}",
            k + 1,
            comp.len(),
            names.join(", ")
        );
        let chain = shortest_cycle(g, comp);
        let _ = writeln!(r, "  shortest chain:");
        for w in chain.windows(2) {
            let _ = writeln!(r, "    {}", g.link(w[0], w[1]));
        }
    }
    Some(r)
}

/// The top-level module of a file (`crate` for `lib.rs`).
fn top(f: &FileNode) -> &str {
    f.module.first().map_or("crate", String::as_str)
}

fn layer_report(g: &Graph, layers: &[(&str, &[&str])]) -> Option<String> {
    let mut problems = Vec::new();
    let mut layer_of: HashMap<&str, (usize, &str)> = HashMap::new();
    for (k, (name, modules)) in layers.iter().enumerate() {
        for m in *modules {
            if let Some((_, other)) = layer_of.insert(m, (k, name)) {
                problems.push(format!("`{m}` is in two layers, {other} and {name}"));
            }
        }
    }
    let present: BTreeMap<&str, &str> = g
        .files
        .iter()
        .rev()
        .map(|f| (top(f), f.rel.as_str()))
        .collect();
    for (m, rel) in &present {
        if !layer_of.contains_key(m) {
            problems.push(format!(
                "top-level module `{m}` ({}/{rel}) has no layer: add it to GASPI_LAYERS",
                g.label
            ));
        }
    }
    for (m, _) in layer_of.iter().filter(|(m, _)| !present.contains_key(*m)) {
        problems.push(format!(
            "GASPI_LAYERS names `{m}`, which is no module of {}",
            g.label
        ));
    }
    problems.sort();
    let mut upward = Vec::new();
    for (a, b) in g.pairs() {
        let (ma, mb) = (top(&g.files[a]), top(&g.files[b]));
        if let (Some(&(la, na)), Some(&(lb, nb))) = (layer_of.get(ma), layer_of.get(mb)) {
            if lb > la {
                upward.push(format!(
                    "{}   [{ma}: {la} {na} -> {mb}: {lb} {nb}]",
                    g.link(a, b)
                ));
            }
        }
    }
    if problems.is_empty() && upward.is_empty() {
        return None;
    }
    let mut r = format!(
        "{}: layering (GASPI_LAYERS, lowest first) broken:\n",
        g.label
    );
    for p in &problems {
        let _ = writeln!(r, "  {p}");
    }
    if !upward.is_empty() {
        let _ = writeln!(r, "{} imports from a higher layer:", upward.len());
        for u in &upward {
            let _ = writeln!(r, "  {u}");
        }
    }
    Some(r)
}

// ---------------------------------------------------------------------------------------------
// The parser and the checks on small inline crates.

mod parser {
    use super::*;

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
    }

    #[test]
    fn child_modules_by_name_and_inline_modules() {
        let g = graph(&[
            ("lib.rs", "mod net;\nmod other;\npub use net::Net;\nfn f() { other::g(); std::mem::drop(0); }"),
            ("net/mod.rs", "mod tcp;\npub struct Net(tcp::Tcp);"),
            ("net/tcp.rs", "pub struct Tcp;\nmod inner { use super::super::Net; }"),
            ("other.rs", "mod inner { pub fn g() { super::super::net::Net; } }\nfn h() { inner::g() }"),
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
        let layers: &[(&str, &[&str])] =
            &[("bottom", &["low"]), ("top", &["high", "crate", "gone"])];
        let r = layer_report(&g, layers).expect("a broken layering");
        assert!(
            r.contains("top-level module `stray` (t/src/stray.rs) has no layer"),
            "{r}"
        );
        assert!(r.contains("GASPI_LAYERS names `gone`"), "{r}");
        assert!(
            r.contains(
                "t/src/low.rs:2 `crate::high::H` -> high.rs   [low: 0 bottom -> high: 1 top]"
            ),
            "{r}"
        );
        assert!(!r.contains("t/src/high.rs:"), "{r}");

        let fixed: &[(&str, &[&str])] =
            &[("bottom", &["low", "stray"]), ("top", &["high", "crate"])];
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
}
