//! Shell quoting (for remote commands and `--dry-run`) and splitting (for `--interpreter` and
//! `TARANTELLA_SSH`).

use crate::error::{Error, Result};

/// Quotes `s` for a POSIX shell; plain words stay as they are.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@%+,".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Quotes every word and joins them with spaces.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a command line into words like a shell does for quotes and backslashes (no
/// expansion). `"valgrind --leak-check=yes"` → `["valgrind", "--leak-check=yes"]`.
pub fn split(s: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(Error::Invalid(format!("unclosed ' in {s:?}"))),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => cur.push(c),
                            None => return Err(Error::Invalid(format!("trailing \\ in {s:?}"))),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(Error::Invalid(format!("unclosed \" in {s:?}"))),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => cur.push(c),
                    None => return Err(Error::Invalid(format!("trailing \\ in {s:?}"))),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_roundtrips_through_split() {
        for w in [
            "plain",
            "",
            "a b",
            "it's",
            "$HOME",
            "x=\"y\"",
            "back\\slash",
        ] {
            assert_eq!(split(&quote(w)).unwrap(), vec![w.to_string()], "{w:?}");
        }
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split(r#"valgrind --leak-check=yes "a b" 'c d' e\ f"#).unwrap(),
            ["valgrind", "--leak-check=yes", "a b", "c d", "e f"]
        );
        assert!(split("").unwrap().is_empty());
        assert!(split("'open").is_err());
    }
}
