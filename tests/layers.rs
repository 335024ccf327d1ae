//! The crates' module structure: imports only go down `tool-runtime`'s layers, and no crate's
//! modules import each other in a cycle.
//!
//! A module "uses" another when a `crate::`, `super::` or `self::` path in its code (in `use`
//! lists, grouped ones included, inline, and inside macro invocations) names it or an item in
//! it, or when it `use`s a child module; a path through a `use` re-export counts for the module
//! that defines the item. Test modules are left out, and so are doc comments.
//!
//! The layers are the table in `ARCHITECTURE.md` between the `layers` markers, bottom first: a
//! module may use modules of its own layer and of the layers below, never one above.
//!
//! A cycle is one between distinct modules: siblings, or modules of different folders. A folder
//! module contains its files, so `mod.rs` calling its files and a file using the type `mod.rs`
//! defines (the type whose impl it holds) is containment, not a cycle between components; the
//! layers still apply to it. `tests/fixtures/layers/` is a crate with an upward import, a cycle
//! and a parent and child that use each other, which the checks must tell apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

// Each structure check uses a part of the shared source reader.
#[allow(dead_code)]
mod source;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The module graph of the crate whose root is `lib`.
fn graph(lib: &Path) -> Graph {
    let modules = source::modules(lib);
    let krate: source::Crate<'_> = modules.iter().map(|m| (m.path.clone(), m)).collect();
    modules
        .iter()
        .map(|m| (m.path.clone(), source::uses(m, &krate)))
        .collect()
}

/// Whether one of `a` and `b` contains the other (the crate root contains every module).
fn contains(a: &str, b: &str) -> bool {
    let inside = |outer: &str, inner: &str| {
        outer.is_empty()
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with("::"))
    };
    inside(a, b) || inside(b, a)
}

/// How a module is called in messages and in the layer table.
fn shown(module: &str) -> &str {
    if module.is_empty() { "lib" } else { module }
}

/// One cycle of `graph`, as the modules on it (the first repeated last), if it has any.
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &Graph,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = stack.iter().position(|m| m == node).unwrap_or(0);
                let mut found: Vec<String> = stack[start..].to_vec();
                found.push(node.to_owned());
                return Some(found);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        stack.push(node.to_owned());
        for next in graph
            .get(node)
            .into_iter()
            .flatten()
            .filter(|next| !contains(node, next))
        {
            if let Some(found) = visit(next, graph, marks, stack) {
                return Some(found);
            }
        }
        stack.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

/// The layers of `ARCHITECTURE.md`-style `text`: for each module named in the table between
/// the markers, its row (0 at the bottom).
fn layers(text: &str) -> BTreeMap<String, usize> {
    let start = text
        .find("<!-- layers -->")
        .expect("the layer table starts with <!-- layers -->");
    let end = text
        .find("<!-- /layers -->")
        .expect("the layer table ends with <!-- /layers -->");
    let rows = text[start..end].lines().filter(|line| {
        line.starts_with('|') && !line.starts_with("|--") && !line.starts_with("| layer")
    });
    let mut table = BTreeMap::new();
    for (row, line) in rows.enumerate() {
        let modules = line.split('|').nth(2).unwrap_or_default();
        for name in modules.split('`').skip(1).step_by(2) {
            assert!(
                table.insert(name.to_owned(), row).is_none(),
                "`{name}` is in two rows of the layer table"
            );
        }
    }
    table
}

/// The layer of `module`: that of the longest prefix the table names.
fn layer_of(module: &str, table: &BTreeMap<String, usize>) -> Option<usize> {
    let module = shown(module);
    let mut path = module;
    loop {
        if let Some(layer) = table.get(path) {
            return Some(*layer);
        }
        path = &path[..path.rfind("::")?];
    }
}

/// What breaks the layering of `graph` under `table`: modules the table does not place, names
/// the table holds that are no module, and imports that go up.
fn layering_problems(graph: &Graph, table: &BTreeMap<String, usize>) -> Vec<String> {
    let mut problems = Vec::new();
    for module in graph.keys() {
        if layer_of(module, table).is_none() {
            problems.push(format!(
                "module `{}` is in no layer; add it to the layer table in ARCHITECTURE.md",
                shown(module)
            ));
        }
    }
    for name in table.keys() {
        if !graph.keys().any(|m| shown(m) == name) {
            problems.push(format!(
                "the layer table names `{name}`, which is no module; remove it from ARCHITECTURE.md"
            ));
        }
    }
    for (from, uses) in graph {
        let Some(own) = layer_of(from, table) else {
            continue;
        };
        for to in uses {
            if let Some(theirs) = layer_of(to, table)
                && theirs > own
            {
                problems.push(format!(
                    "`{}` (layer {own}) uses `{}` (layer {theirs}): imports only go down; move what it needs to a lower layer",
                    shown(from),
                    shown(to)
                ));
            }
        }
    }
    problems
}

fn cycle_problem(crate_name: &str, graph: &Graph) -> Option<String> {
    cycle(graph).map(|modules| {
        let shown: Vec<&str> = modules.iter().map(|m| shown(m)).collect();
        format!(
            "the modules of {crate_name} import each other in a cycle: {}",
            shown.join(" → ")
        )
    })
}

#[test]
fn tool_runtime_imports_only_go_down_its_layers() {
    let graph = graph(&root().join("tool-runtime/src/lib.rs"));
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let problems = layering_problems(&graph, &layers(&architecture));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_crate_imports_its_own_modules_in_a_cycle() {
    let mut problems = Vec::new();
    for (name, lib) in [
        ("tool-runtime", "tool-runtime/src/lib.rs"),
        ("tool-core", "tool-core/src/lib.rs"),
    ] {
        problems.extend(cycle_problem(name, &graph(&root().join(lib))));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_find_an_upward_import_and_a_cycle_in_a_fixture() {
    let fixture = root().join("tests/fixtures/layers");
    let graph = graph(&fixture.join("src/lib.rs"));
    let table = layers(&std::fs::read_to_string(fixture.join("LAYERS.md")).unwrap());
    assert_eq!(
        layering_problems(&graph, &table),
        [
            "module `orphan` is in no layer; add it to the layer table in ARCHITECTURE.md",
            "`store` (layer 0) uses `pipeline` (layer 1): imports only go down; move what it needs to a lower layer",
            "`store` (layer 0) uses `pipeline::stage` (layer 1): imports only go down; move what it needs to a lower layer",
        ]
    );
    // `pipeline` and its child `pipeline::stage` use each other: containment. `store` and
    // `pipeline::stage` use each other: a cycle.
    assert_eq!(
        cycle_problem("the fixture", &graph).as_deref(),
        Some(
            "the modules of the fixture import each other in a cycle: pipeline::stage → store → pipeline::stage"
        )
    );
    // Every way of naming a module counts: grouped `use` lists, inline paths, `super::`,
    // `self::`, child modules, paths in macros; doc comments and test modules do not.
    let uses: Vec<&str> = graph["handle"].iter().map(String::as_str).collect();
    assert_eq!(uses, ["pipeline", "pipeline::stage", "store"]);
    let stage: Vec<&str> = graph["pipeline::stage"]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(stage, ["pipeline", "store"]);
}
