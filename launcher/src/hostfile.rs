//! Hostfile parsing: one host per line, `name [slots=K]`, `#` comments, no duplicates.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
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
    let read_error = |source| Error::HostfileRead {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    open_regular_file(path)?
        .read_to_string(&mut text)
        .map_err(read_error)?;
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

/// Opens `path` for reading if it is a regular file. Anything else is refused before it is
/// read: a FIFO would block until some writer came along (possibly never), and a device
/// could be read forever.
fn open_regular_file(path: &Path) -> Result<File> {
    let read_error = |source| Error::HostfileRead {
        path: path.to_path_buf(),
        source,
    };
    let refuse = |file_type: FileType| Error::HostfileNotRegular {
        path: path.to_path_buf(),
        what: describe_file_type(file_type),
    };
    // Checked before opening, since opening a device may itself do something...
    let file_type = std::fs::metadata(path).map_err(read_error)?.file_type();
    if !file_type.is_file() {
        return Err(refuse(file_type));
    }
    // ...and again on what was opened, in case the path was replaced in between; without
    // blocking, should that be a FIFO.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(read_error)?;
    let file_type = file.metadata().map_err(read_error)?.file_type();
    if !file_type.is_file() {
        return Err(refuse(file_type));
    }
    Ok(file)
}

/// "a FIFO", "a directory", ...: what a file that is not a regular file is, for messages.
fn describe_file_type(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "an unknown kind of file"
    }
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
    fn only_a_regular_file_is_read() {
        let dir = std::env::temp_dir().join(format!("tnt-hostfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let regular = dir.join("hosts");
        std::fs::write(&regular, "node1 slots=2\n").unwrap();
        assert_eq!(read(&regular).unwrap().len(), 1);
        for (path, what) in [
            (dir.as_path(), "is a directory"),
            (Path::new("/dev/null"), "is a character device"),
        ] {
            let err = read(path).unwrap_err().to_string();
            assert!(
                err.contains(what) && err.contains("not a regular file"),
                "{err}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
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
