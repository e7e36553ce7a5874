//! Cycles (Tarjan's strongly connected components) and layers.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;

use super::graph::{FileNode, Graph};

pub(crate) fn strongly_connected(n: usize, adj: &[Vec<usize>]) -> Vec<Vec<usize>> {
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

pub(crate) fn adjacency(g: &Graph) -> Vec<Vec<usize>> {
    let mut adj = vec![Vec::new(); g.files.len()];
    for (a, b) in g.pairs() {
        adj[a].push(b);
    }
    adj
}

/// The files of each cycle (components of more than one file), each sorted by path.
pub(crate) fn cycles(g: &Graph) -> Vec<Vec<usize>> {
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
pub(crate) fn shortest_cycle(g: &Graph, comp: &[usize]) -> Vec<usize> {
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

pub(crate) fn cycle_report(g: &Graph) -> Option<String> {
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
pub(crate) fn top(f: &FileNode) -> &str {
    f.module.first().map_or("crate", String::as_str)
}

pub(crate) fn layer_report(g: &Graph, layers: &[(&str, &[&str])]) -> Option<String> {
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
