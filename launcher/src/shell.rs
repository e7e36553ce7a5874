//! Shell quoting (for remote commands and `--dry-run`) and splitting (for `--interpreter` and
//! `TARANTELLA_SSH`), by the [`shlex`] crate: POSIX shell syntax, tested by its authors
//! against bash, dash, zsh, busybox ash and mksh.

use crate::error::{Error, Result};

/// Quotes `s` for a POSIX shell; plain words stay as they are. A NUL byte cannot be passed
/// through a shell (nor be part of an argument at all): such a word is an error.
pub fn quote(s: &str) -> Result<String> {
    shlex::try_quote(s)
        .map(|q| q.into_owned())
        .map_err(|_| nul_error(s))
}

/// Quotes every word and joins them with spaces; as [`quote`], a word with a NUL byte is an
/// error.
pub fn join<S: AsRef<str>>(words: &[S]) -> Result<String> {
    shlex::try_join(words.iter().map(AsRef::as_ref)).map_err(|_| {
        let bad = words
            .iter()
            .map(AsRef::as_ref)
            .find(|w| w.contains('\0'))
            .unwrap_or_default();
        nul_error(bad)
    })
}

fn nul_error(word: &str) -> Error {
    Error::Invalid(format!(
        "{word:?} cannot be passed through a shell: it contains a NUL byte"
    ))
}

/// Splits a command line into words like a shell does for quotes, backslashes and `#`
/// comments (no expansion). `"valgrind --leak-check=yes"` → `["valgrind", "--leak-check=yes"]`.
pub fn split(s: &str) -> Result<Vec<String>> {
    shlex::split(s).ok_or_else(|| {
        Error::Invalid(format!(
            "cannot split {s:?} into words: a quote is not closed or it ends in a backslash"
        ))
    })
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
            "#comment",
            "tab\tand\nnewline",
            "grüße aus 東京",
        ] {
            assert_eq!(
                split(&quote(w).unwrap()).unwrap(),
                vec![w.to_string()],
                "{w:?}"
            );
        }
        let words = ["a b", "it's", "", "$x", "ü"];
        assert_eq!(split(&join(&words).unwrap()).unwrap(), words);
    }

    #[test]
    fn quoting_roundtrips_through_sh() {
        let words = [
            "plain",
            "",
            "a b",
            "it's",
            "$HOME",
            "`id`",
            "x=\"y\"",
            "back\\slash",
            "!^*?[",
            "grüße",
        ];
        let script = format!("printf '%s\\n' {}", join(&words).unwrap());
        let out = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success());
        let expected: String = words.iter().map(|w| format!("{w}\n")).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    }

    #[test]
    fn non_ascii_is_quoted_and_kept() {
        let q = quote("grüße").unwrap();
        assert_eq!(q, "'grüße'");
        assert_eq!(split(&q).unwrap(), ["grüße"]);
    }

    #[test]
    fn a_nul_byte_is_an_error_naming_the_word() {
        let e = quote("a\0b").unwrap_err().to_string();
        assert!(e.contains(r#""a\0b""#) && e.contains("NUL"), "{e}");
        let e = join(&["ok", "x\0y"]).unwrap_err().to_string();
        assert!(e.contains(r#""x\0y""#), "{e}");
    }

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(
            split(r#"valgrind --leak-check=yes "a b" 'c d' e\ f"#).unwrap(),
            ["valgrind", "--leak-check=yes", "a b", "c d", "e f"]
        );
        assert!(split("").unwrap().is_empty());
        let e = split("'open").unwrap_err().to_string();
        assert!(e.contains("\"'open\""), "{e}");
        assert!(split("trailing\\").is_err());
    }
}
