//! Parser: the `mod` declarations, the paths a file names and its exported macros.

use super::lexer::{lex, Tok, Token};

/// Where a path starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Base {
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
pub(crate) struct RawRef {
    pub(crate) base: Base,
    pub(crate) segs: Vec<String>,
    pub(crate) scope: Vec<String>,
    pub(crate) line: usize,
    pub(crate) text: String,
}

/// `mod name;` (a file module) or `mod name { }` (inline) inside the inline modules `scope`.
#[derive(Clone, Debug)]
pub(crate) struct ModDecl {
    pub(crate) name: String,
    pub(crate) scope: Vec<String>,
    pub(crate) path_attr: Option<String>,
    pub(crate) test_only: bool,
    pub(crate) inline: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub(crate) mods: Vec<ModDecl>,
    pub(crate) refs: Vec<RawRef>,
    pub(crate) macro_exports: Vec<String>,
    /// The whole file is `#![cfg(test)]`.
    pub(crate) test_only: bool,
}

/// The attributes read before the item they apply to.
#[derive(Default)]
pub(crate) struct Attrs {
    pub(crate) cfg_test: bool,
    pub(crate) path: Option<String>,
    pub(crate) macro_export: bool,
}

pub(crate) fn ident(t: &[Token], i: usize) -> Option<&str> {
    match t.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

pub(crate) fn is_ident(t: &[Token], i: usize, word: &str) -> bool {
    ident(t, i) == Some(word)
}

pub(crate) fn is_punct(t: &[Token], i: usize, ch: char) -> bool {
    matches!(t.get(i).map(|t| &t.tok), Some(Tok::Punct(c)) if *c == ch)
}

pub(crate) fn is_sep(t: &[Token], i: usize) -> bool {
    matches!(t.get(i).map(|t| &t.tok), Some(Tok::PathSep))
}

pub(crate) fn parse(src: &str) -> Parsed {
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
pub(crate) fn closing_bracket(t: &[Token], open: usize) -> usize {
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
pub(crate) fn is_cfg_test(body: &[Token]) -> bool {
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

pub(crate) fn read_attr(body: &[Token], attrs: &mut Attrs) {
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
pub(crate) fn skip_vis(t: &[Token], mut i: usize) -> usize {
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
pub(crate) fn skip_item(t: &[Token], i: usize) -> usize {
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
pub(crate) fn file_mod_decl(item: &[Token]) -> Option<String> {
    let k = skip_vis(item, 0);
    if is_ident(item, k, "mod") && is_punct(item, k + 2, ';') {
        ident(item, k + 1).map(str::to_string)
    } else {
        None
    }
}

/// Reads the use tree at `j` below `prefix`, pushing each leaf path with the line of its last
/// name; returns the index after the tree.
pub(crate) fn use_tree(
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
pub(crate) fn classify(mut segs: Vec<String>, scope: Vec<String>, line: usize) -> Option<RawRef> {
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
pub(crate) fn path_at(t: &[Token], i: usize, scope: &[String]) -> Option<(RawRef, usize)> {
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
