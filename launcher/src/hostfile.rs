//! Hostfile parsing, as people write hostfiles for mpirun and machine files for GPI-2's
//! `gaspi_run`: `name [slots=N] [max_slots=M]` or `name:N` per line, `#` comments, a host
//! listed again adding to its slots.

use std::fs::{File, FileType, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Error, Result};

/// One host line of a hostfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// The ssh destination: a host name or address, possibly as `user@host`.
    pub name: String,
    /// `slots=N` or `name:N` (or the number of lines naming the host), when given.
    pub slots: Option<usize>,
    /// `max_slots=M`: the most ranks the host may get, also with `--n-per-node`.
    pub max_slots: Option<usize>,
}

impl Host {
    /// The most ranks this host may run: `max_slots`, else `slots`, else no limit.
    pub fn limit(&self) -> Option<usize> {
        self.max_slots.or(self.slots)
    }
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
///
/// A line is `name [slots=N] [max_slots=M]` (Open MPI) or `name:N` (MPICH, `-H`); `#`
/// starts a comment. A host on several lines gets the slots of all of them, a line without
/// a count being one slot: a GPI-2 machine file lists a host once per rank.
pub fn parse(text: &str) -> Result<Vec<Host>, (usize, String)> {
    let mut entries = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        let mut entry = parse_host_word(first).map_err(|msg| (lineno, msg))?;
        for word in words {
            parse_attribute(&mut entry, word).map_err(|msg| (lineno, msg))?;
        }
        if let (Some(slots), Some(max)) = (entry.slots, entry.max_slots) {
            if max < slots {
                return Err((lineno, format!("max_slots={max} is below slots={slots}")));
            }
        }
        entries.push(entry);
    }
    Ok(merge(entries))
}

/// `name` or `name:N`. A name with more than one `:` is an IPv6 address, which takes no
/// `:N` (give it `slots=N` in a hostfile).
pub(crate) fn parse_host_word(word: &str) -> Result<Host, String> {
    let (name, slots) = match word.split_once(':') {
        Some((name, count)) if !count.contains(':') => (name, Some(parse_count("slots", count)?)),
        _ => (word, None),
    };
    if !valid_host(name) {
        return Err(format!("{name:?} is not a valid host name or address"));
    }
    Ok(Host {
        name: name.to_string(),
        slots,
        max_slots: None,
    })
}

/// `slots=N` or `max_slots=M` (also spelled `max-slots`, as Open MPI accepts).
fn parse_attribute(host: &mut Host, word: &str) -> Result<(), String> {
    let (key, value) = word.split_once('=').unwrap_or((word, ""));
    let field = match key {
        "slots" => &mut host.slots,
        "max_slots" | "max-slots" => &mut host.max_slots,
        _ => {
            return Err(format!(
                "unexpected {word:?} (expected `slots=N` or `max_slots=M` after the host name)"
            ))
        }
    };
    if field.is_some() {
        return Err(format!("{key} given twice (as `{key}=` or `host:N`)"));
    }
    *field = Some(parse_count(key, value)?);
    Ok(())
}

fn parse_count(key: &str, value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(k) if k > 0 => Ok(k),
        _ => Err(format!("{key}={value:?} is not a positive integer")),
    }
}

/// Joins the entries of a host listed more than once into its first entry, in the order
/// of first appearance. Each entry counts its own slots, or one without a count; a host
/// listed once keeps `slots` unset when none was given, so that `--n-per-node` alone
/// decides its ranks, as before repeated hosts were allowed.
pub(crate) fn merge(entries: Vec<Host>) -> Vec<Host> {
    let slots_of = |h: &Host| h.slots.unwrap_or(1);
    let max_of = |h: &Host| h.max_slots.unwrap_or(slots_of(h));
    let mut hosts: Vec<Host> = Vec::new();
    for e in entries {
        match hosts.iter_mut().find(|h| h.name == e.name) {
            None => hosts.push(e),
            Some(h) => {
                if h.max_slots.is_some() || e.max_slots.is_some() {
                    h.max_slots = Some(max_of(h) + max_of(&e));
                }
                h.slots = Some(slots_of(h) + slots_of(&e));
            }
        }
    }
    hosts
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

    fn host(name: &str, slots: Option<usize>, max_slots: Option<usize>) -> Host {
        Host {
            name: name.into(),
            slots,
            max_slots,
        }
    }

    #[test]
    fn parses_hosts_slots_and_comments() {
        let h =
            parse("# cluster\nnode1 slots=4\n\n  node2   # second\n10.0.0.3 slots=1\n").unwrap();
        assert_eq!(
            h,
            [
                host("node1", Some(4), None),
                host("node2", None, None),
                host("10.0.0.3", Some(1), None),
            ]
        );
    }

    #[test]
    fn a_host_listed_on_several_lines_gets_a_slot_per_line_as_in_a_gpi2_machine_file() {
        assert_eq!(
            parse("a\na\nb\nb\nb\n").unwrap(),
            [host("a", Some(2), None), host("b", Some(3), None)]
        );
        // Lines with counts add theirs; hosts keep the order of their first line.
        assert_eq!(
            parse("a slots=2\nb\na:3\n").unwrap(),
            [host("a", Some(5), None), host("b", None, None)]
        );
        assert_eq!(
            parse("a slots=1 max_slots=2\na\n").unwrap(),
            [host("a", Some(2), Some(3))]
        );
    }

    #[test]
    fn open_mpi_and_mpich_spellings() {
        assert_eq!(
            parse("n1 slots=2 max_slots=4\nn2:3\nn3 max-slots=2\nuser@n4:2\n").unwrap(),
            [
                host("n1", Some(2), Some(4)),
                host("n2", Some(3), None),
                host("n3", None, Some(2)),
                host("user@n4", Some(2), None),
            ]
        );
        // An IPv6 address has colons of its own and takes no `:N`.
        assert_eq!(
            parse("fe80::1 slots=2\n::1\n").unwrap(),
            [host("fe80::1", Some(2), None), host("::1", None, None)]
        );
        assert_eq!(host("n", Some(2), Some(4)).limit(), Some(4));
        assert_eq!(host("n", Some(2), None).limit(), Some(2));
        assert_eq!(host("n", None, None).limit(), None);
    }

    #[test]
    fn syntax_errors_name_the_file_and_the_line() {
        let dir = std::env::temp_dir().join(format!("tnt-hostfile-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("machines");
        std::fs::write(&path, "# GPI-2 style\nnode1\nnode1\nnode2 slots=two\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            err,
            format!(
                "hostfile {}, line 4: slots=\"two\" is not a positive integer",
                path.display()
            )
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
    fn rejects_malformed_lines_by_number_and_says_why() {
        for (text, line, why) in [
            ("a slots=0", 1, "slots=\"0\" is not a positive integer"),
            ("a\nb slots=x", 2, "slots=\"x\" is not a positive integer"),
            ("a cpus=2", 1, "unexpected \"cpus=2\""),
            ("a slots=1 slots=2", 1, "slots given twice"),
            ("a:2 slots=2", 1, "slots given twice"),
            ("a:0", 1, "slots=\"0\" is not a positive integer"),
            ("a:x", 1, "slots=\"x\" is not a positive integer"),
            (":2", 1, "\"\" is not a valid host name"),
            ("ok\nbad$host", 2, "\"bad$host\" is not a valid host name"),
            ("a slots=4 max_slots=2", 1, "max_slots=2 is below slots=4"),
        ] {
            let (at, msg) = parse(text).unwrap_err();
            assert_eq!(at, line, "{text:?}: {msg}");
            assert!(msg.contains(why), "{text:?}: {msg}");
        }
    }
}
