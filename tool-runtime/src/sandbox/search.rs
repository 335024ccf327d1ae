//! `grep` and `glob`: walks of the tree beneath a path with ripgrep's rules, each file checked
//! and opened through the root's handle.

use std::io;
use std::path::{Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, MetadataExt, OpenOptions};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkFinish, SinkMatch};
use toolwright_core::error::quoted_prefix;
use toolwright_core::{Found, GrepMatch, GrepRequest, SandboxError};

use super::fs::{beneath, classify, kind_name, open_file, slash_path};

/// How many characters of a matching line `grep` returns.
const MAX_LINE_CHARS: usize = 500;

/// The longest line `grep` holds in memory; a file with a longer one is skipped rather than
/// read whole (a multi-gigabyte file without line breaks would otherwise be).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Where a `grep` or `glob` starts: `path` resolved beneath the root (symlinks inside it
/// followed, none leading out), relative to the root, and whether it is a directory.
fn search_base(dir: &Dir, path: &str) -> Result<(PathBuf, bool), SandboxError> {
    let relative = beneath(path)?;
    if relative.as_os_str().is_empty() {
        return Ok((relative, true));
    }
    let resolved = dir
        .canonicalize(&relative)
        .map_err(|error| classify(path, &error))?;
    let metadata = dir
        .metadata(&resolved)
        .map_err(|error| classify(path, &error))?;
    if metadata.is_dir() {
        Ok((resolved, true))
    } else if metadata.is_file() {
        Ok((resolved, false))
    } else {
        Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file or a directory",
            found: kind_name(&metadata),
        })
    }
}

/// The regular, singly linked files under `base` that ripgrep's rules keep, in walk order, each
/// as (path relative to the root, path relative to `base`). Stops early when `visit` says so;
/// returns `false` when it stopped because it had visited `limit` entries.
fn walk_files(
    dir: &Dir,
    root: &Path,
    base: &Path,
    limit: usize,
    mut visit: impl FnMut(&Path, &Path) -> bool,
) -> bool {
    let start = root.join(base);
    let walk = ignore::WalkBuilder::new(&start)
        .standard_filters(true)
        // No ignore file is read: the walker opens them by their real path, following
        // symlinks and without a size limit, so a `.gitignore` linked to `/dev/zero` or to a
        // FIFO would exhaust memory or block, and one linked outside would leak its lines
        // through what is skipped. Hidden files are still skipped.
        .git_ignore(false)
        .git_exclude(false)
        .ignore(false)
        .parents(false)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for (visited, entry) in walk.flatten().enumerate() {
        if visited == limit {
            return false;
        }
        // Symlinks are skipped, not followed, even those pointing inside: the walk's file type is
        // the entry's own (`lstat`).
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        let Ok(from_root) = entry.path().strip_prefix(root) else {
            continue;
        };
        // The walk went by path; the handle has the last word on what is actually there.
        let Ok(metadata) = dir.symlink_metadata(from_root) else {
            continue;
        };
        if !metadata.is_file() || metadata.nlink() > 1 {
            continue;
        }
        let from_base = entry
            .path()
            .strip_prefix(&start)
            .ok()
            .filter(|relative| !relative.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new(entry.file_name()));
        if !visit(from_root, from_base) {
            break;
        }
    }
    true
}

fn build_glob(pattern: &str) -> Result<globset::GlobMatcher, SandboxError> {
    globset::GlobBuilder::new(pattern)
        // `*` stays within one directory, `**` crosses them, as in a shell.
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| SandboxError::Refused {
            path: pattern.to_owned(),
            reason: format!(
                "is not a valid glob ({}); write e.g. `*.rs` or `src/**/*.rs`",
                quoted_prefix(&error.to_string())
            ),
        })
}

pub(super) fn glob_files(
    dir: &Dir,
    root: &Path,
    pattern: &str,
    path: &str,
    max: usize,
    limit: usize,
) -> Result<Found<String>, SandboxError> {
    let matcher = build_glob(pattern)?;
    let (base, is_dir) = search_base(dir, path)?;
    if !is_dir {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a directory",
            found: "a file",
        });
    }
    let mut items = Vec::new();
    let mut truncated = false;
    let complete = walk_files(dir, root, &base, limit, |from_root, from_base| {
        if !matcher.is_match(from_base) {
            return true;
        }
        if items.len() == max {
            truncated = true;
            return false;
        }
        items.push(slash_path(from_root));
        true
    });
    truncated |= !complete;
    items.sort();
    Ok(Found { items, truncated })
}

/// Collects one file's matching lines, at most `room` of them (one more tells that the limit
/// was reached), and whether the file turned out to be binary.
struct Collect {
    room: usize,
    lines: Vec<(u64, String)>,
    binary: bool,
}

impl Sink for Collect {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let bytes = found.bytes();
        let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text: String = String::from_utf8_lossy(bytes)
            .chars()
            .take(MAX_LINE_CHARS)
            .collect();
        self.lines.push((found.line_number().unwrap_or(0), text));
        Ok(self.lines.len() <= self.room)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }

    fn finish(&mut self, _searcher: &Searcher, finish: &SinkFinish) -> Result<(), io::Error> {
        self.binary |= finish.binary_byte_offset().is_some();
        Ok(())
    }
}

fn build_matcher(request: &GrepRequest) -> Result<RegexMatcher, SandboxError> {
    RegexMatcherBuilder::new()
        .case_insensitive(request.case_insensitive)
        // A model's pattern must not make the regex engine take a gigabyte.
        .size_limit(10 * 1024 * 1024)
        .dfa_size_limit(10 * 1024 * 1024)
        // A match never spans lines, which is what lets the searcher go line by line.
        .line_terminator(Some(b'\n'))
        .build(&request.pattern)
        .map_err(|error| SandboxError::Refused {
            path: request.pattern.clone(),
            reason: format!(
                "is not a valid regular expression ({}); escape special characters with `\\`",
                quoted_prefix(&error.to_string())
            ),
        })
}

pub(super) fn grep_files(
    dir: &Dir,
    root: &Path,
    request: &GrepRequest,
    limit: usize,
) -> Result<Found<GrepMatch>, SandboxError> {
    let matcher = build_matcher(request)?;
    // ripgrep's rule: a glob without `/` is matched against the file name, one with `/` against
    // the path from where the search starts.
    let filter = match &request.glob {
        Some(glob) => Some((build_glob(glob)?, !glob.contains('/'))),
        None => None,
    };
    let (base, _) = search_base(dir, &request.path)?;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        // The first NUL byte marks the file as binary and ends its search.
        .binary_detection(BinaryDetection::quit(b'\0'))
        .heap_limit(Some(MAX_LINE_BYTES))
        .build();
    let mut items: Vec<GrepMatch> = Vec::new();
    let mut truncated = false;
    let complete = walk_files(dir, root, &base, limit, |from_root, from_base| {
        if let Some((glob, by_name)) = &filter {
            let subject = if *by_name {
                from_base.file_name().map(Path::new).unwrap_or(from_base)
            } else {
                from_base
            };
            if !glob.is_match(subject) {
                return true;
            }
        }
        // Opened through the handle, not the walk's path, and without following a symlink that
        // replaced the file since it was listed.
        let Ok(file) = open_file(
            dir,
            from_root,
            OpenOptions::new().read(true).follow(FollowSymlinks::No),
        ) else {
            return true;
        };
        match file.metadata() {
            Ok(metadata) if metadata.is_file() && metadata.nlink() == 1 => {}
            _ => return true,
        }
        let mut sink = Collect {
            room: request.max_matches - items.len(),
            lines: Vec::new(),
            binary: false,
        };
        // A file that cannot be searched (unreadable, a line past the heap limit) is skipped, as
        // ripgrep skips it with a warning.
        if searcher
            .search_file(&matcher, &file.into_std(), &mut sink)
            .is_err()
            || sink.binary
        {
            return true;
        }
        let shown = slash_path(from_root);
        for (line, text) in sink.lines {
            if items.len() == request.max_matches {
                truncated = true;
                return false;
            }
            items.push(GrepMatch {
                path: shown.clone(),
                line,
                text,
            });
        }
        true
    });
    truncated |= !complete;
    items.sort_by(|a, b| a.path.cmp(&b.path).then(a.line.cmp(&b.line)));
    Ok(Found { items, truncated })
}
