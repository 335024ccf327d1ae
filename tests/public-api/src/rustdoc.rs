//! Running rustdoc, through cargo, for the facade and the workspace crates it re-exports.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// The packages documented, facade first: (package name, crate name).
pub(crate) const PACKAGES: &[(&str, &str)] = &[
    ("toolwright", "toolwright"),
    ("toolwright-core", "toolwright_core"),
    ("toolwright-runtime", "toolwright_runtime"),
    ("toolwright-mcp", "toolwright_mcp"),
    ("toolwright-agent", "toolwright_agent"),
    ("toolwright-console", "toolwright_console"),
    ("toolwright-macros", "toolwright_macros"),
];

/// The facade's features the surface is listed with: every feature that gates items (`runtime`,
/// `mcp`, `sandbox`, `postgres`, `agent`, `agent-loopback`, `console`), less `tls`, which only
/// turns on rmcp's HTTPS client and gates no item. A feature that starts gating items belongs
/// here.
pub(crate) const FEATURES: &str = "toolwright/mcp,toolwright/sandbox,toolwright/postgres,\
    toolwright/agent,toolwright/agent-loopback,toolwright/console";

/// Variables that cargo sets for the test or build it runs (or that a user sets for the main
/// build) and that must not steer the nested cargo: its own target directory and flags keep its
/// builds reproducible and independent of the outer one.
const CLEARED: &[&str] = &[
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "RUSTC_BOOTSTRAP",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// Prefixes of variables cleared likewise.
const CLEARED_PREFIXES: &[&str] = &["CARGO_PKG_", "CARGO_BIN_EXE_", "CARGO_CFG_", "__CARGO"];

/// Writes the rustdoc JSON of every package in [`PACKAGES`] under `target_dir/doc` and returns
/// that directory.
///
/// One `cargo doc` for all of them, so that their features are resolved together, as the facade
/// sees them. `RUSTC_BOOTSTRAP` names only these crates: the pinned stable toolchain accepts
/// `--output-format json` for them, while every dependency is checked exactly as on stable (build
/// scripts that probe for nightly features find none).
pub(crate) fn generate(root: &Path, target_dir: &Path) -> Result<PathBuf, Error> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args([
            "doc",
            "--locked",
            "--no-deps",
            "--lib",
            "--no-default-features",
        ])
        .args(["--features", FEATURES])
        .arg("--target-dir")
        .arg(target_dir);
    for (package, _) in PACKAGES {
        command.args(["-p", package]);
    }
    for (key, _) in std::env::vars_os() {
        let Some(name) = key.to_str() else { continue };
        if CLEARED.contains(&name) || CLEARED_PREFIXES.iter().any(|p| name.starts_with(p)) {
            command.env_remove(&key);
        }
    }
    let crates: Vec<&str> = PACKAGES.iter().map(|(_, name)| *name).collect();
    command
        .env("RUSTC_BOOTSTRAP", crates.join(","))
        .env("RUSTDOCFLAGS", "-Z unstable-options --output-format json");
    let doc_dir = target_dir.join("doc");
    // Cargo knows a documented crate's output only as `doc/<crate>/index.html`, which JSON output
    // never writes, so on its own it would document every crate on every run. The check writes
    // that file (empty) after a run, so cargo's freshness check applies as for HTML: a crate is
    // documented again when its sources, dependencies or flags change. A missing JSON file drops
    // its marker, so that cargo writes it again.
    for (_, name) in PACKAGES {
        if !doc_dir.join(format!("{name}.json")).exists() {
            let _ = std::fs::remove_file(marker(&doc_dir, name));
        }
    }
    let shown = format!("{command:?}");
    let output = command.output().map_err(|e| Error::Io {
        what: format!("running {shown}"),
        source: e,
    })?;
    if !output.status.success() {
        return Err(Error::Cargo {
            command: shown,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    for (_, name) in PACKAGES {
        let marker = marker(&doc_dir, name);
        let written = marker
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&marker, ""));
        written.map_err(|e| Error::Io {
            what: format!("writing {}", marker.display()),
            source: e,
        })?;
    }
    Ok(doc_dir)
}

/// The output cargo expects of documenting crate `name`.
fn marker(doc_dir: &Path, name: &str) -> PathBuf {
    doc_dir.join(name).join("index.html")
}
