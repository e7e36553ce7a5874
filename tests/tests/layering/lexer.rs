//! Lexer: identifiers, `::`, punctuation and string literals, with line numbers; comments,
//! numbers, char literals and lifetimes are dropped or reduced to `Other`.

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    Str(String),
    Punct(char),
    PathSep,
    Other,
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) line: usize,
}

pub(crate) fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

pub(crate) fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

pub(crate) fn lex(src: &str) -> Vec<Token> {
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
pub(crate) fn quoted(c: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
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
pub(crate) fn raw_string(c: &[char], i: usize, line: &mut usize) -> Option<(String, usize)> {
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
