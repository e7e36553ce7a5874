//! `-H`/`--host`: hosts given on the command line instead of in a hostfile, as mpirun takes
//! them: `-H node1:2,node2:2` (or `-H node1,node1,node2`: a host named again adds a slot).

use crate::error::{Error, Result};
use crate::hostfile::{self, Host};

/// Parses the values of every `-H` (each a comma-separated list of `name` or `name:N`), in
/// the order given. Errors name the offending item.
pub fn parse(values: &[String]) -> Result<Vec<Host>> {
    let mut entries = Vec::new();
    for value in values {
        for item in value.split(',') {
            let bad = |msg: String| Error::HostListItem {
                item: item.to_string(),
                list: value.clone(),
                msg,
            };
            let item = item.trim();
            if item.is_empty() {
                return Err(bad(
                    "empty item (two commas in a row, or one at an end)".into()
                ));
            }
            entries.push(hostfile::parse_host_word(item).map_err(bad)?);
        }
    }
    Ok(hostfile::merge(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_and_slots(hosts: &[Host]) -> Vec<(&str, Option<usize>)> {
        hosts.iter().map(|h| (h.name.as_str(), h.slots)).collect()
    }

    #[test]
    fn counts_repeats_and_several_flags() {
        let hosts = parse(&["node1:2,node2:2".into()]).unwrap();
        assert_eq!(
            names_and_slots(&hosts),
            [("node1", Some(2)), ("node2", Some(2))]
        );
        let hosts = parse(&["a,a,b".into(), "c:3".into(), "b".into()]).unwrap();
        assert_eq!(
            names_and_slots(&hosts),
            [("a", Some(2)), ("b", Some(2)), ("c", Some(3))]
        );
        let hosts = parse(&["user@fe80::1".into()]).unwrap();
        assert_eq!(names_and_slots(&hosts), [("user@fe80::1", None)]);
    }

    #[test]
    fn errors_name_the_item_and_the_list() {
        for (list, item, why) in [
            ("a:2,b:x", "b:x", "not a positive integer"),
            ("a,,b", "", "empty item"),
            ("a,", "", "empty item"),
            ("a,b$c", "b$c", "not a valid host name"),
        ] {
            let err = parse(&[list.to_string()]).unwrap_err().to_string();
            assert!(
                err.contains(&format!("-H item {item:?} (in {list:?})")) && err.contains(why),
                "{list:?}: {err}"
            );
        }
    }
}
