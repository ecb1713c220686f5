//! The layers inside pki-core, pki-rotate and pki-ffi (DESIGN.md,
//! "Layers"): at every level (a crate's top-level modules, and the modules
//! of each top-level folder, such as pki-rotate's `engines/`) modules import
//! each other without a cycle, and pki-rotate's top level is the stack
//! DESIGN.md draws: model, engines, driver, stores, each importing only
//! downward.
//!
//! Read from the sources, as a reader would: every `crate::X`, `crate::G::X`
//! and `super::X` that reaches a module `X` of the level (through `use`, a
//! path in code, or a name a root file re-exports from `X`) is an arrow from
//! the module of the file to `X`. Comments are left out. The strongly
//! connected components of that graph are the cycles.
//! `PKI_LAYERS_ARROWS=1 cargo test --test layers -- --nocapture` prints
//! every level's arrows; `PKI_LAYERS_SITES=1` the file each arrow starts in.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates whose modules must form a stack.
const CRATES: &[&str] = &["pki-core", "pki-rotate", "pki-ffi"];

/// pki-rotate's layers, bottom to top (DESIGN.md, "Layers"): each imports
/// only those before it. The request schema that the C ABI and Go read
/// sits on top.
const ROTATE_LAYERS: &[&str] = &["model", "engines", "driver", "stores", "request"];

/// A crate's top-level modules and, for each, the top-level modules it
/// imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, tests aside (`tests.rs` and files under a
/// `tests` folder): a test may drive its module through a layer above it.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
                && !path.components().any(|c| c.as_os_str() == "tests")
            {
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

/// The code before a file's inline test module (`#[cfg(test)] mod tests {`,
/// at the end of a file by this crate's convention).
fn without_test_module(code: &str) -> String {
    let mut end = code.len();
    for (i, _) in code.match_indices("#[cfg(test)]") {
        if code[i + "#[cfg(test)]".len()..]
            .trim_start()
            .starts_with("mod tests {")
        {
            end = i;
            break;
        }
    }
    code[..end].to_string()
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

/// The modules a root file (`lib.rs`, or a folder's `G.rs`) declares, and
/// where each name it re-exports comes from, as a path of modules below
/// that root (`pub use engines::{signer}` makes `signer` the path
/// `engines::signer`; `pub use signer::{SignerState}` then makes
/// `SignerState` that path too).
fn root_file(file: &Path) -> (BTreeSet<String>, BTreeMap<String, Vec<String>>) {
    let lib = code(&std::fs::read_to_string(file).unwrap());
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
    let mut exported: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for statement in lib.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let first = ident(path).to_string();
        let base = if modules.contains(&first) {
            vec![first.clone()]
        } else if let Some(known) = exported.get(&first) {
            known.clone()
        } else {
            continue;
        };
        let after = &path[first.len()..];
        if let Some(alias) = after.trim().strip_prefix("as ") {
            // `pub use stores as store`: the module under another name.
            exported.insert(ident(alias.trim()).to_string(), base);
            continue;
        }
        let entries: Vec<&str> = match after.strip_prefix("::{") {
            Some(group) => group.trim_end_matches('}').split(',').collect(),
            None => vec![after.trim_start_matches("::")],
        };
        for entry in entries.into_iter().map(str::trim) {
            let name = match entry.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => entry.rsplit("::").next().unwrap_or(entry),
            };
            let name = ident(name);
            if name.is_empty() {
                continue;
            }
            // The segment right below the module: the submodule the name
            // comes from (or the name itself); deeper ones do not matter.
            let mut full = base.clone();
            full.push(ident(entry).to_string());
            exported.insert(name.to_string(), full);
        }
    }
    (modules, exported)
}

/// The import graph of one level of the crate whose sources are in `src`:
/// its top-level modules (`group` None), or the modules of the folder
/// `src/<group>` (declared in `src/<group>.rs`).
fn graph(src: &Path, group: Option<&str>) -> Graph {
    let (root_modules, root_exported) = root_file(&src.join("lib.rs"));
    let (dir, (modules, exported)) = match group {
        None => (
            src.to_path_buf(),
            (root_modules.clone(), root_exported.clone()),
        ),
        Some(g) => (src.join(g), root_file(&src.join(format!("{g}.rs")))),
    };
    // A name at this level: one of its modules, or a name its root file
    // re-exports from one.
    let at_level = |name: &str| -> Option<String> {
        if modules.contains(name) {
            Some(name.to_string())
        } else {
            exported
                .get(name)
                .and_then(|p| p.first())
                .filter(|m| modules.contains(*m))
                .cloned()
        }
    };
    // A name after `crate::`, resolved to this level's module it reaches.
    let from_crate = |name: &str| -> Option<String> {
        let path = match root_modules.contains(name) {
            true => vec![name.to_string()],
            false => root_exported.get(name)?.clone(),
        };
        match group {
            None => path.first().cloned(),
            Some(g) if path.first().map(String::as_str) == Some(g) => {
                path.get(1).and_then(|n| at_level(n))
            }
            Some(_) => None,
        }
    };
    let mut graph: Graph = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    if !dir.is_dir() {
        return graph;
    }
    for file in sources(&dir) {
        let relative = file.strip_prefix(&dir).unwrap();
        let parts: Vec<String> = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let Some(own) = parts.first().filter(|p| modules.contains(*p)) else {
            continue;
        };
        let text = without_test_module(&code(&std::fs::read_to_string(&file).unwrap()));
        let mut used: Vec<String> = names_after(&text, "crate::")
            .into_iter()
            .filter_map(&from_crate)
            .collect();
        if let Some(g) = group {
            used.extend(
                names_after(&text, &format!("crate::{g}::"))
                    .into_iter()
                    .filter_map(&at_level),
            );
        }
        // As many `super::` as the file is deep below this level's root
        // reach that root.
        let root_super = "super::".repeat(parts.len());
        used.extend(
            names_after(&text, &root_super)
                .into_iter()
                .filter_map(&at_level),
        );
        for target in used {
            if std::env::var_os("PKI_LAYERS_SITES").is_some() && target != *own {
                println!("    {} -> {target}", relative.display());
            }
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

/// The levels of a crate: its top-level modules, then the modules of each
/// top-level folder (`src/G/` with its root `src/G.rs`), each with its
/// import graph.
fn levels(src: &Path) -> Vec<(String, Graph)> {
    let top = graph(src, None);
    let mut out = Vec::new();
    for module in top.keys() {
        if src.join(module).is_dir() && src.join(format!("{module}.rs")).is_file() {
            let inner = graph(src, Some(module));
            if inner.len() > 1 {
                out.push((format!("{module}/"), inner));
            }
        }
    }
    out.insert(0, ("top level".to_string(), top));
    out
}

fn print_graph(graph: &Graph) {
    for (from, to) in graph {
        println!(
            "    {from} -> {}",
            to.iter().cloned().collect::<Vec<_>>().join(" ")
        );
    }
}

#[test]
fn modules_import_each_other_without_a_cycle_at_every_level() {
    let mut failures = Vec::new();
    for krate in CRATES {
        for (level, graph) in levels(&workspace().join(krate).join("src")) {
            let found = cycles(&graph);
            let arrows: usize = graph.values().map(BTreeSet::len).sum();
            println!(
                "{krate} {level}: {} modules, {arrows} arrows, {} cycles",
                graph.len(),
                found.len()
            );
            if std::env::var_os("PKI_LAYERS_ARROWS").is_some() {
                print_graph(&graph);
            }
            for cycle in found {
                failures.push(format!("{krate} {level}: a cycle: {cycle:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn pki_rotate_is_the_stack_design_draws() {
    let top = graph(&workspace().join("pki-rotate").join("src"), None);
    let place = |m: &str| ROTATE_LAYERS.iter().position(|l| *l == m);
    let mut failures = Vec::new();
    for (from, to) in &top {
        let Some(below) = place(from) else {
            failures.push(format!("{from} is in no layer of ROTATE_LAYERS"));
            continue;
        };
        for target in to {
            if place(target).is_none_or(|above| above >= below) {
                failures.push(format!("{from} imports {target}, which is not below it"));
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
