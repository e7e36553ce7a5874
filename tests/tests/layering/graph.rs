//! The graph of one crate.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use super::parse::{parse, Base, RawRef};

pub(crate) struct FileNode {
    /// Relative to the crate's `src/`, with `/` separators.
    pub(crate) rel: String,
    pub(crate) module: Vec<String>,
}

/// One import: file `from` names `path` on `line`, which lives in file `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Edge {
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) line: usize,
    pub(crate) path: String,
}

pub(crate) struct Graph {
    /// The crate's `src/` as written in messages (`gaspi/src`).
    pub(crate) label: String,
    pub(crate) files: Vec<FileNode>,
    /// Files that are only test modules (`#[cfg(test)] mod tests;`).
    pub(crate) test_only: Vec<String>,
    pub(crate) edges: Vec<Edge>,
}

impl Graph {
    pub(crate) fn loc(&self, f: usize) -> String {
        format!("{}/{}", self.label, self.files[f].rel)
    }

    /// The distinct (from, to) file pairs.
    pub(crate) fn pairs(&self) -> BTreeSet<(usize, usize)> {
        self.edges.iter().map(|e| (e.from, e.to)).collect()
    }

    pub(crate) fn index(&self, rel: &str) -> Option<usize> {
        self.files.iter().position(|f| f.rel == rel)
    }

    pub(crate) fn has_edge(&self, from: &str, to: &str) -> bool {
        match (self.index(from), self.index(to)) {
            (Some(a), Some(b)) => self.edges.iter().any(|e| e.from == a && e.to == b),
            _ => false,
        }
    }

    /// The imports making the edge `from -> to`, first line first.
    pub(crate) fn edges_between(&self, from: usize, to: usize) -> Vec<&Edge> {
        self.edges
            .iter()
            .filter(|e| e.from == from && e.to == to)
            .collect()
    }

    /// `file:line `path`` of the first import making `from -> to`, and how many more lines.
    pub(crate) fn link(&self, from: usize, to: usize) -> String {
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

pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

pub(crate) fn parent(rel: &str) -> &str {
    rel.rfind('/').map_or("", |k| &rel[..k])
}

/// The module tree from `lib.rs` (files read through `read`, relative to `src/`) and its edges.
pub(crate) fn build(label: &str, read: &dyn Fn(&str) -> Option<String>) -> Result<Graph, String> {
    let mut files = Vec::new();
    let mut parsed = Vec::new();
    let mut test_only = Vec::new();
    // (file, module, whether its child modules live in its own folder (lib.rs, mod.rs,
    // #[path]), whether it is a test module or inside one)
    let mut queue = VecDeque::from([("lib.rs".to_string(), Vec::<String>::new(), true, false)]);
    while let Some((rel, module, owns_dir, test)) = queue.pop_front() {
        let src = read(&rel).ok_or_else(|| format!("{label}/{rel}: cannot read"))?;
        let p = parse(&src);
        // A test module's own modules (`tests/mod.rs` declaring `mod model;`) are test
        // modules too: followed, so that they count as reached, but neither nodes nor edges.
        let test = test || p.test_only;
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
            match (found, test || m.test_only) {
                (Some((f, owns)), child_test) => {
                    queue.push_back((f, child_module, owns, child_test))
                }
                (None, true) => {}
                (None, false) => {
                    return Err(format!(
                        "{label}/{rel}: `mod {};` names no file (a parser bug?)",
                        m.name
                    ))
                }
            }
        }
        if test {
            test_only.push(rel);
            continue;
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
pub(crate) fn absolute(
    r: &RawRef,
    module: &[String],
    declared: &HashSet<Vec<String>>,
) -> Option<Vec<String>> {
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
