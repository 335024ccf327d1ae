//! # The facade's public surface, checked mechanically
//!
//! `tests/public-api/toolwright.txt` is the reviewed list of everything the `toolwright` crate
//! exports: one line per item reachable by a public path from `toolwright` (the root and its
//! modules `export`, `json`, `names`, `runtime`, `sandbox`, `mcp`, `agent`, `model` and
//! `prelude`, not the hidden `__private`), sorted by path. A change to the surface shows up as a change to this file in the
//! diff under review; the test `public_api` fails while the file and the code disagree.
//!
//! The lines:
//!
//! - items under their shortest facade path, written as Rust: `pub mod`, `pub struct`, `pub
//!   enum`, `pub trait`, `pub fn` with the whole signature, `pub type`, `pub const`, `pub
//!   attribute macro`, `pub derive macro`; `#[non_exhaustive]` where the item has it;
//! - members under their item: `pub field` (public fields, also of tuple structs as `::0` and of
//!   struct variants), `pub variant`, trait methods (a provided one ends in `{ .. }`), associated
//!   types and consts, and the public inherent methods and consts of every listed type;
//! - `impl Trait for Type` for the trait impls, derived ones included, of listed types and of
//!   listed traits, from any workspace crate (auto-trait impls and blanket impls are left out);
//! - `pub use other::path = kind shortest::path` for each further facade path of an item;
//! - `pub use path = definition::path` for a re-export of another crate's item.
//!
//! Types in signatures are written with their facade path when the facade reaches them, and with
//! their definition path otherwise: `alloc::string::String`, `serde_json::value::Value`, and a
//! workspace type the facade does not reach, such as `toolwright_core::descriptor::LabelSpec`.
//!
//! ## Nameability
//!
//! Every workspace type that a listed line mentions (parameters, return types, fields, variant
//! fields, trait items, associated types, generic bounds and where clauses, impl headers) must be
//! reachable by some facade path too, or a user can receive a value whose type they cannot
//! name. A type that is not is reported with every line that mentions it. The types in
//! [`KNOWN_UNNAMEABLE`] are the ones known today, allowed until the facade is narrowed; an
//! entry that is no longer needed fails the check too, so the list only shrinks.
//!
//! ## Updating the list
//!
//! ```text
//! TOOLWRIGHT_PUBLIC_API=overwrite cargo test --workspace --test public_api --locked
//! ```
//!
//! rewrites the file from the code; review its diff like code. `cargo run -p
//! toolwright-public-api -- overwrite` does the same, `-- check` compares, `-- print` writes the
//! list to stdout.
//!
//! ## How
//!
//! The check runs `cargo doc` for the facade and the workspace crates it re-exports
//! (`toolwright-core`, `toolwright-runtime`, `toolwright-mcp`, `toolwright-agent`,
//! `toolwright-macros`) with rustdoc's JSON output, in a target directory of its own (`target/public-api`, or `public-api` under
//! `CARGO_TARGET_DIR`), so it neither waits for nor invalidates the main build. The pinned stable
//! toolchain writes that JSON only with `RUSTC_BOOTSTRAP`, which the check sets for these crates
//! alone. The facade's JSON knows a re-exported item only by its path in the defining crate; the
//! check follows it into that crate's JSON. The JSON is read with the `rustdoc-types` crate at
//! the release whose `FORMAT_VERSION` is the one the toolchain writes; a toolchain update that
//! changes the format fails the check with both numbers, and the pin in the workspace
//! `Cargo.toml` moves with it.
//!
//! The nested cargo runs from inside `cargo test` without waiting on it: the outer cargo holds
//! the lock of its own target directory, not of `target/public-api`. The variables the outer
//! cargo sets for a test (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...) and the flags meant for the
//! main build (`RUSTFLAGS`, `RUSTDOCFLAGS`, `CARGO_TARGET_DIR`, `CARGO_ENCODED_*`, jobserver
//! `MAKEFLAGS`) are removed from its environment; `CARGO` names the cargo binary to use. The
//! first run checks the dependencies once more for that directory (a few CPU-minutes); after
//! that cargo documents a crate again only when it changed, and a run without changes takes a
//! second or two.

mod allowlist;
mod rustdoc;
mod surface;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

pub use allowlist::KNOWN_UNNAMEABLE;

/// The committed list, relative to the workspace root.
pub const LIST_FILE: &str = "tests/public-api/toolwright.txt";

/// The variable the test reads: `overwrite` rewrites the committed list.
pub const MODE_VAR: &str = "TOOLWRIGHT_PUBLIC_API";

/// The command that rewrites the list.
pub const OVERWRITE_COMMAND: &str =
    "TOOLWRIGHT_PUBLIC_API=overwrite cargo test --workspace --test public_api --locked";

/// What to do with the committed list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Compare the list from the code with the committed one.
    Check,
    /// Write the list from the code over the committed one.
    Overwrite,
}

impl Mode {
    /// The mode [`MODE_VAR`] asks for: `overwrite`, or else `check`.
    pub fn from_env() -> Mode {
        match std::env::var(MODE_VAR).as_deref() {
            Ok("overwrite") => Mode::Overwrite,
            _ => Mode::Check,
        }
    }
}

/// Why the surface could not be listed.
#[derive(Debug)]
pub enum Error {
    /// Reading, writing or starting something failed.
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// `cargo doc` failed.
    Cargo {
        /// The command, as run.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// A JSON file did not parse.
    Json {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: serde_json::Error,
    },
    /// The toolchain writes another JSON format than the `rustdoc-types` release reads.
    Format {
        /// The file.
        path: PathBuf,
        /// The format version in the file.
        found: u32,
        /// The format version `rustdoc-types` reads.
        expected: u32,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Cargo {
                command,
                status,
                stderr,
            } => write!(f, "{command} failed ({status}):\n{stderr}"),
            Error::Json { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Format {
                path,
                found,
                expected,
            } => write!(
                f,
                "{} has rustdoc JSON format version {found}, and the pinned `rustdoc-types` reads \
                 version {expected}: pin the `rustdoc-types` release whose FORMAT_VERSION is \
                 {found} in the workspace Cargo.toml",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Json { source, .. } => Some(source),
            Error::Cargo { .. } | Error::Format { .. } => None,
        }
    }
}

/// The facade's surface as the code has it.
#[derive(Debug)]
pub struct Surface {
    /// The rustdoc JSON format version read.
    pub format_version: u32,
    /// The list: one line per item.
    pub lines: Vec<String>,
    /// Workspace types that listed lines mention and no facade path reaches, each with the
    /// subjects of the lines mentioning it.
    pub unnameable: BTreeMap<String, BTreeSet<String>>,
    /// Facade re-exports the listing could not follow.
    pub unresolved: Vec<String>,
}

/// The workspace root (this crate lives in `tests/public-api`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The target directory of the check's own build: `public-api` under `CARGO_TARGET_DIR`, or
/// `target/public-api`.
pub fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root.join(dir).join("public-api"),
        None => root.join("target").join("public-api"),
    }
}

/// Builds the rustdoc JSON in `target_dir` and lists the facade's surface.
pub fn surface(root: &Path, target_dir: &Path) -> Result<Surface, Error> {
    let doc_dir = rustdoc::generate(root, target_dir)?;
    let mut crates = Vec::new();
    for (_, name) in rustdoc::PACKAGES {
        let path = doc_dir.join(format!("{name}.json"));
        let text = std::fs::read(&path).map_err(|e| Error::Io {
            what: format!("reading {}", path.display()),
            source: e,
        })?;
        let krate: rustdoc_types::Crate = match serde_json::from_slice(&text) {
            Ok(krate) => krate,
            Err(e) => {
                // A format mismatch usually shows as a parse error: name it as such.
                let found = serde_json::from_slice::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("format_version")?.as_u64());
                return Err(match found {
                    Some(found) if found != u64::from(rustdoc_types::FORMAT_VERSION) => {
                        Error::Format {
                            path,
                            found: u32::try_from(found).unwrap_or(u32::MAX),
                            expected: rustdoc_types::FORMAT_VERSION,
                        }
                    }
                    _ => Error::Json { path, source: e },
                });
            }
        };
        if krate.format_version != rustdoc_types::FORMAT_VERSION {
            return Err(Error::Format {
                path,
                found: krate.format_version,
                expected: rustdoc_types::FORMAT_VERSION,
            });
        }
        crates.push(krate);
    }
    let format_version = crates[0].format_version;
    let listing = surface::list(&surface::Docs::new(crates));
    Ok(Surface {
        format_version,
        lines: listing.lines,
        unnameable: listing.unnameable,
        unresolved: listing.unresolved,
    })
}

/// What a run found.
#[derive(Debug)]
pub struct Report {
    /// The surface listed.
    pub surface: Surface,
    /// How the committed list differs from the surface (`-` committed only, `+` code only),
    /// empty when they agree or when the list was just written.
    pub diff: Vec<String>,
    /// Whether the committed list was (re)written.
    pub written: bool,
}

impl Report {
    /// Unnameable types not in [`KNOWN_UNNAMEABLE`], with the lines mentioning them.
    pub fn new_unnameable(&self) -> Vec<(&str, &BTreeSet<String>)> {
        self.surface
            .unnameable
            .iter()
            .filter(|(ty, _)| !KNOWN_UNNAMEABLE.contains(&ty.as_str()))
            .map(|(ty, at)| (ty.as_str(), at))
            .collect()
    }

    /// Unnameable types still allowed by [`KNOWN_UNNAMEABLE`].
    pub fn known_unnameable(&self) -> Vec<(&str, &BTreeSet<String>)> {
        self.surface
            .unnameable
            .iter()
            .filter(|(ty, _)| KNOWN_UNNAMEABLE.contains(&ty.as_str()))
            .map(|(ty, at)| (ty.as_str(), at))
            .collect()
    }

    /// Entries of [`KNOWN_UNNAMEABLE`] that no line needs any more.
    pub fn stale_allowances(&self) -> Vec<&'static str> {
        KNOWN_UNNAMEABLE
            .iter()
            .copied()
            .filter(|ty| !self.surface.unnameable.contains_key(*ty))
            .collect()
    }

    /// Whether the check passes.
    pub fn passed(&self) -> bool {
        self.diff.is_empty()
            && self.new_unnameable().is_empty()
            && self.stale_allowances().is_empty()
            && self.surface.unresolved.is_empty()
    }

    /// The allowed findings, for the log of a passing run: one line per type, with the lines
    /// that mention it.
    pub fn notes(&self) -> String {
        let mut out = String::new();
        let known = self.known_unnameable();
        if !known.is_empty() {
            out.push_str(&format!(
                "note: {} known unnameable type(s), allowed by KNOWN_UNNAMEABLE \
                 (tests/public-api/src/allowlist.rs) until the facade names them:\n",
                known.len()
            ));
            for (ty, at) in known {
                let at: Vec<&str> = at.iter().map(String::as_str).collect();
                out.push_str(&format!("    {ty}: {}\n", at.join(", ")));
            }
        }
        out
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        if !self.diff.is_empty() {
            out.push_str(&format!(
                "The public surface of `toolwright` differs from {LIST_FILE} (- only in the file, \
                 + only in the code):\n\n"
            ));
            for line in &self.diff {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str(&format!(
                "\nIf the change is intended, rewrite the list and commit it with the change:\n    \
                 {OVERWRITE_COMMAND}\n\n"
            ));
        }
        let new = self.new_unnameable();
        if !new.is_empty() {
            out.push_str(&format!(
                "{} type(s) appear in the facade's public signatures but no public path of \
                 `toolwright` reaches them (re-export them, or change the signatures):\n",
                new.len()
            ));
            write_types(&mut out, &new);
            out.push('\n');
        }
        let stale = self.stale_allowances();
        if !stale.is_empty() {
            out.push_str(
                "These KNOWN_UNNAMEABLE entries (tests/public-api/src/allowlist.rs) are no longer \
                 needed; remove them:\n",
            );
            for ty in stale {
                out.push_str(&format!("    {ty}\n"));
            }
            out.push('\n');
        }
        if !self.surface.unresolved.is_empty() {
            out.push_str("These re-exports of the facade could not be followed:\n");
            for path in &self.surface.unresolved {
                out.push_str(&format!("    {path}\n"));
            }
            out.push('\n');
        }
        if out.is_empty() {
            out.push_str(&format!(
                "The public surface of `toolwright` ({} items) matches {LIST_FILE}.\n",
                self.surface.lines.len()
            ));
        }
        f.write_str(&out)
    }
}

fn write_types(out: &mut String, types: &[(&str, &BTreeSet<String>)]) {
    for (ty, at) in types {
        out.push_str(&format!("    {ty}, mentioned by\n"));
        for line in *at {
            out.push_str(&format!("        {line}\n"));
        }
    }
}

/// Lists the surface and compares it with the committed list, or overwrites that list.
pub fn run(mode: Mode) -> Result<Report, Error> {
    let root = workspace_root();
    let surface = surface(&root, &target_dir(&root))?;
    let file = root.join(LIST_FILE);
    let mut text = surface.lines.join("\n");
    text.push('\n');
    if mode == Mode::Overwrite {
        std::fs::write(&file, &text).map_err(|e| Error::Io {
            what: format!("writing {}", file.display()),
            source: e,
        })?;
        return Ok(Report {
            surface,
            diff: Vec::new(),
            written: true,
        });
    }
    let committed = match std::fs::read_to_string(&file) {
        Ok(committed) => committed,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(Error::Io {
                what: format!("reading {}", file.display()),
                source: e,
            });
        }
    };
    let committed: Vec<&str> = committed.lines().collect();
    let current: Vec<&str> = surface.lines.iter().map(String::as_str).collect();
    let diff = diff(&committed, &current);
    Ok(Report {
        surface,
        diff,
        written: false,
    })
}

/// The lines only in `old` (`- `) and only in `new` (`+ `), in list order. Both lists are
/// sorted the same way and hold each line once, so one merge pass is the diff.
fn diff(old: &[&str], new: &[&str]) -> Vec<String> {
    let in_old: HashSet<&str> = old.iter().copied().collect();
    let in_new: HashSet<&str> = new.iter().copied().collect();
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) if a == b => {
                i += 1;
                j += 1;
            }
            (Some(a), _) if !in_new.contains(a) => {
                out.push(format!("- {a}"));
                i += 1;
            }
            (_, Some(b)) if !in_old.contains(b) => {
                out.push(format!("+ {b}"));
                j += 1;
            }
            // Both lines are on both sides, elsewhere: an order change only.
            (Some(a), _) => {
                out.push(format!("- {a}"));
                i += 1;
            }
            (None, Some(b)) => {
                out.push(format!("+ {b}"));
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn diff_marks_removed_and_added_lines_in_order() {
        let old = ["a", "b", "c", "e"];
        let new = ["a", "c", "d", "e", "f"];
        assert_eq!(diff(&old, &new), ["- b", "+ d", "+ f"]);
        assert!(diff(&old, &old).is_empty());
    }
}
