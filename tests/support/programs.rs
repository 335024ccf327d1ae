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
