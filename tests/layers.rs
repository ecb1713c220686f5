//! The layers inside pki-core, pki-rotate and pki-ffi: their top-level
//! modules must import each other without a cycle (DESIGN.md, "Layers").
//!
//! Read from the sources, as a reader would: every `crate::X` and `super::X`
//! that reaches a top-level module `X` (through `use`, a path in code, or a
//! name `lib.rs` re-exports from `X`) is an arrow from the module of the file
//! to `X`. Comments are left out. The strongly connected components of that
//! graph are the cycles.
//!
//! The refactor that removes them lands in steps, so this is a ratchet:
//! each crate's cycles must lie inside the ones listed in `KNOWN` (which
//! shrinks as the work goes on, to nothing), and a cycle that is not there
//! fails the test. `cargo test --test layers -- --nocapture` prints the
//! figures: modules, arrows, modules in cycles.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The cycles each crate still has, as the sets of modules they join. An
/// empty list: the crate is a stack.
const KNOWN: &[(&str, &[&[&str]])] = &[("pki-core", &[]), ("pki-rotate", &[]), ("pki-ffi", &[])];

/// A crate's top-level modules and, for each, the top-level modules it
/// imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The source without comments (line comments and block comments).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
            out.push('\n');
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with('"') {
            // A string literal: skipped whole (it may hold "//").
            let mut chars = rest.char_indices().skip(1);
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            out.push_str("\"\"");
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The names right after `prefix` in `code`: `prefix::name`, or each first
/// name of a `prefix::{a, b::c}` group.
fn names_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut names = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        names.push(ident(group[start..j].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        names.push(ident(group[start..j].trim()));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            names.push(ident(rest));
        }
    }
    names
}

/// The top-level modules `lib.rs` declares, and the names it re-exports
/// from each (`pub use X::{a, b}` makes `crate::a` a use of `X`).
fn crate_root(src: &Path) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let lib = code(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut modules = BTreeSet::new();
    for line in lib.lines() {
        let line = line.trim();
        let declared = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .or_else(|| line.strip_prefix("pub(crate) mod "));
        if let Some(name) = declared {
            modules.insert(ident(name).to_string());
        }
    }
    let mut exported = BTreeMap::new();
    for statement in lib.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let module = ident(path).to_string();
        if !modules.contains(&module) {
            continue;
        }
        let after = &path[module.len()..];
        let names = match after.strip_prefix("::{") {
            Some(group) => group
                .trim_end_matches('}')
                .split(',')
                .map(|n| n.rsplit("::").next().unwrap_or(n).trim())
                .map(|n| n.rsplit(" as ").next().unwrap_or(n).trim())
                .collect(),
            None => vec![after.rsplit("::").next().unwrap_or(after).trim()],
        };
        for name in names.into_iter().filter(|n| !n.is_empty()) {
            exported.insert(ident(name).to_string(), module.clone());
        }
    }
    (modules, exported)
}

/// The import graph of the crate whose sources are in `src`.
fn graph(src: &Path) -> Graph {
    let (modules, exported) = crate_root(src);
    let resolve = |name: &str| -> Option<String> {
        if modules.contains(name) {
            Some(name.to_string())
        } else {
            exported.get(name).cloned()
        }
    };
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for file in sources(src) {
        let relative = file.strip_prefix(src).unwrap();
        let parts: Vec<String> = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some(own) = parts.first().filter(|p| modules.contains(*p)) else {
            continue;
        };
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let mut used: Vec<String> = names_after(&text, "crate::")
            .into_iter()
            .filter_map(resolve)
            .collect();
        // `super::` from a top-level file, or as many `super::` as the
        // file is deep, reaches the crate root.
        let root_super = "super::".repeat(parts.len());
        used.extend(
            names_after(&text, &root_super)
                .into_iter()
                .filter_map(resolve),
        );
        for target in used {
            if target != *own {
                graph.get_mut(own).unwrap().insert(target);
            }
        }
    }
    graph
}

/// The strongly connected components of more than one module (Tarjan).
fn cycles(graph: &Graph) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in &s.graph[v] {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn top_level_modules_import_each_other_without_a_new_cycle() {
    let mut failures = Vec::new();
    for (krate, known) in KNOWN {
        let graph = graph(&workspace().join(krate).join("src"));
        let found = cycles(&graph);
        let arrows: usize = graph.values().map(BTreeSet::len).sum();
        let in_cycles: usize = found.iter().map(BTreeSet::len).sum();
        println!(
            "{krate}: {} top-level modules, {arrows} arrows, {in_cycles} modules in {} cycles",
            graph.len(),
            found.len()
        );
        if std::env::var_os("PKI_LAYERS_ARROWS").is_some() {
            for (from, to) in &graph {
                println!(
                    "  {from} -> {}",
                    to.iter().cloned().collect::<Vec<_>>().join(" ")
                );
            }
        }
        for cycle in &found {
            println!(
                "  cycle: {}",
                cycle.iter().cloned().collect::<Vec<_>>().join(" ")
            );
            let allowed = known
                .iter()
                .any(|k| cycle.iter().all(|m| k.contains(&m.as_str())));
            if !allowed {
                failures.push(format!("{krate}: a new cycle: {cycle:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_reader_sees_groups_supers_and_reexports() {
    let text = code(
        "use crate::{a, b::{c, d}, e as f};\n// crate::g\nlet x = \"crate::h\"; super::i::j();",
    );
    assert_eq!(names_after(&text, "crate::"), ["a", "b", "e"]);
    assert_eq!(names_after(&text, "super::"), ["i"]);
    let mut graph = Graph::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        graph.entry(from.into()).or_default().insert(to.into());
        graph.entry(to.into()).or_default();
    }
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0], ["a", "b", "c"].map(String::from).into());
}
