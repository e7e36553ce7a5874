//! Hostfile parsing: one host per line, `name [slots=K]`, `#` comments, no duplicates.

use std::path::Path;

use crate::error::{Error, Result};

/// One host line of a hostfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    /// `slots=K`, when given.
    pub slots: Option<usize>,
}

/// Reads and parses a hostfile.
pub fn read(path: &Path) -> Result<Vec<Host>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::HostfileRead {
        path: path.to_path_buf(),
        source,
    })?;
    let hosts = parse(&text).map_err(|(line, msg)| Error::HostfileSyntax {
        path: path.to_path_buf(),
        line,
        msg,
    })?;
    if hosts.is_empty() {
        return Err(Error::HostfileEmpty(path.to_path_buf()));
    }
    Ok(hosts)
}

/// Parses hostfile text; errors carry the 1-based line number.
pub fn parse(text: &str) -> Result<Vec<Host>, (usize, String)> {
    let mut hosts: Vec<Host> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or_default();
        if !valid_host(name) {
            return Err((
                lineno,
                format!("{name:?} is not a valid host name or address"),
            ));
        }
        let mut slots = None;
        for w in words {
            let Some(v) = w.strip_prefix("slots=") else {
                return Err((
                    lineno,
                    format!("unexpected {w:?} (expected `slots=K` after the host name)"),
                ));
            };
            if slots.is_some() {
                return Err((lineno, "slots= given twice".into()));
            }
            match v.parse::<usize>() {
                Ok(k) if k > 0 => slots = Some(k),
                _ => return Err((lineno, format!("slots={v:?} is not a positive integer"))),
            }
        }
        if let Some(prev) = hosts.iter().position(|h| h.name == name) {
            return Err((
                lineno,
                format!(
                    "host {name:?} is listed twice (first as host {}); give it slots=K instead",
                    prev + 1
                ),
            ));
        }
        hosts.push(Host {
            name: name.to_string(),
            slots,
        });
    }
    Ok(hosts)
}

/// Host names, IPv4 and bracket-less IPv6 addresses, optionally `user@host`.
fn valid_host(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@%".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_slots_and_comments() {
        let h =
            parse("# cluster\nnode1 slots=4\n\n  node2   # second\n10.0.0.3 slots=1\n").unwrap();
        assert_eq!(
            h,
            vec![
                Host {
                    name: "node1".into(),
                    slots: Some(4)
                },
                Host {
                    name: "node2".into(),
                    slots: None
                },
                Host {
                    name: "10.0.0.3".into(),
                    slots: Some(1)
                },
            ]
        );
    }

    #[test]
    fn rejects_malformed_lines() {
        assert_eq!(parse("a\nb\na slots=2\n").unwrap_err().0, 3);
        assert_eq!(parse("a slots=0").unwrap_err().0, 1);
        assert_eq!(parse("a slots=x").unwrap_err().0, 1);
        assert_eq!(parse("a cpus=2").unwrap_err().0, 1);
        assert_eq!(parse("a slots=1 slots=2").unwrap_err().0, 1);
        assert_eq!(parse("ok\nbad$host").unwrap_err().0, 2);
    }
}
