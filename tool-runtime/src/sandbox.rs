//! [`LocalSandbox`]: one directory of the host's file system, reached through a capability
//! instead of through paths.
//!
//! # What is confined
//!
//! The file API (`read`, `write`, `list`, `grep`, `glob`) cannot reach anything outside the
//! root. The root is opened once as a directory handle (`cap_std::fs::Dir`, with
//! `openat2(RESOLVE_BENEATH)` on Linux) and every file operation resolves its path beneath that
//! handle, so:
//!
//! - `..` anywhere in a path and absolute paths are refused before anything is touched;
//! - symlinks that lead out of the root are refused, whether they are the last component or a
//!   parent directory (also when `write` would create missing parents through them); symlinks
//!   that stay inside are followed by `read`, `write` and `list`, reported (not followed) in a
//!   listing, and skipped by `grep` and `glob`;
//! - a regular file with more than one hard link is neither read, overwritten nor searched: it
//!   may be a hard link to a file outside the root, and nothing in the file system tells the two
//!   names apart;
//! - special files (pipes, devices, sockets) are refused, so a read cannot block forever on a
//!   FIFO.
//!
//! `grep` and `glob` enumerate directories with the `ignore` crate, which walks by path; every
//! file they report or search is then checked, and opened, through the directory handle, so a
//! directory swapped for a symlink mid-walk can at worst hide files, never expose outside ones.
//!
//! # What is not confined
//!
//! **Commands are not jailed.** `exec` runs `sh -c` as the host's user, with the root as its
//! working directory: the command can read and write anything that user can (`cat /etc/passwd`,
//! `cd ..`, the network). What `exec` does bound is the command's lifetime and what it costs the
//! host:
//!
//! - the environment is scrubbed: `PATH=/usr/local/bin:/usr/bin:/bin`, `HOME` set to the root,
//!   `LANG=C.UTF-8` and the variables given with [`LocalSandbox::env`], none of the host
//!   process's (its API keys stay out);
//! - stdin is empty; the command runs in a process group of its own, and the whole group is
//!   killed on timeout, on cancellation, when the `exec` future is dropped, and when the shell
//!   exits: background processes (`server &`) do not outlive the command, and their output is
//!   waited for at most a second after the shell exits;
//! - stdout and stderr are read to the end, whatever their size, and at most `max_output` bytes
//!   of each are kept.
//!
//! A process that leaves the group on purpose (`setsid`, a double fork into a new session)
//! escapes even that. Run untrusted code inside a container or VM and put the sandbox's root in
//! it.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, Metadata, MetadataExt, OpenOptions, OpenOptionsExt, PermissionsExt};
use futures_util::future::BoxFuture;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkFinish, SinkMatch};
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;
use toolwright_core::{
    CancelSignal, DirEntry, EntryKind, ExecOutput, ExecRequest, FileChunk, Found, GrepMatch,
    GrepRequest, Sandbox, SandboxError,
};

/// The `PATH` commands get: the system's directories only, never the host process's `PATH`.
const COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How many characters of a matching line `grep` returns.
const MAX_LINE_CHARS: usize = 500;

/// The longest line `grep` holds in memory; a file with a longer one is skipped rather than
/// read whole (a multi-gigabyte file without line breaks would otherwise be).
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// How much of a pipe one read takes; large so that a command writing gigabytes is drained at
/// the pipe's speed.
const PIPE_CHUNK: usize = 64 * 1024;

/// How long the output pipes get to reach end of file once the shell has exited or the process
/// group was killed. Only a background process holds them open past the shell, and it is killed
/// with the group; after a kill, only a process that left the group (`setsid`) can.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How long the killed shell gets to be reaped; past that it is left to tokio's orphan reaper.
const REAP_GRACE: Duration = Duration::from_secs(5);

/// A [`Sandbox`] confining one directory: files through a capability-based directory handle,
/// commands run by `sh -c` in it. See the [module documentation](self) for exactly what is and
/// is not confined; in short, file access is, commands are not.
///
/// Paths are relative to the root and `/`-separated; `""` and `"."` name the root. Paths in
/// `grep` and `glob` results are relative to the root too, ready to pass to `read`.
///
/// ```no_run
/// # async fn demo() -> Result<(), toolwright_core::SandboxError> {
/// use toolwright_core::{ExecRequest, NeverCancelled, Sandbox};
/// use toolwright_runtime::LocalSandbox;
///
/// let sandbox = LocalSandbox::open("/srv/workspace")?.env("CI", "1");
/// sandbox.write("notes/todo.md", b"- ship it\n".to_vec()).await?;
/// let output = sandbox.exec(ExecRequest::new("cat notes/todo.md"), &NeverCancelled).await?;
/// assert_eq!(output.stdout, "- ship it\n");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LocalSandbox {
    dir: Arc<Dir>,
    root: Arc<Path>,
    env: Vec<(String, String)>,
    walk_limit: usize,
}

/// How many entries (files and folders) one `grep` or `glob` visits by default.
pub const WALK_LIMIT: usize = 100_000;

impl fmt::Debug for LocalSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The variables' values may be secrets given to commands on purpose: names only.
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("LocalSandbox")
            .field("root", &self.root)
            .field("env", &names)
            .finish_non_exhaustive()
    }
}

impl LocalSandbox {
    /// Confines the directory `root`, which must exist. It is resolved once, here (symlinks
    /// in `root` itself are followed); later changes to the path do not move the sandbox.
    ///
    /// # Errors
    ///
    /// [`SandboxError::NotFound`] when `root` does not exist, [`SandboxError::WrongKind`] when
    /// it is not a directory, [`SandboxError::Io`] when it cannot be opened.
    pub fn open(root: impl AsRef<Path>) -> Result<LocalSandbox, SandboxError> {
        let given = root.as_ref();
        let shown = given.display().to_string();
        let canonical = std::fs::canonicalize(given).map_err(|error| match error.kind() {
            io::ErrorKind::NotFound => SandboxError::NotFound {
                path: shown.clone(),
            },
            _ => io_error(&shown, &error),
        })?;
        let dir =
            Dir::open_ambient_dir(&canonical, ambient_authority()).map_err(|error| match error
                .kind()
            {
                io::ErrorKind::NotFound => SandboxError::NotFound {
                    path: shown.clone(),
                },
                io::ErrorKind::NotADirectory => SandboxError::WrongKind {
                    path: shown.clone(),
                    expected: "a directory",
                    found: "a file",
                },
                _ => io_error(&shown, &error),
            })?;
        Ok(LocalSandbox {
            dir: Arc::new(dir),
            root: Arc::from(canonical),
            env: Vec::new(),
            walk_limit: WALK_LIMIT,
        })
    }

    /// How many entries (files and folders) one `grep` or `glob` visits at most (default
    /// [`WALK_LIMIT`]): a search over a huge tree stops there and reports its results as cut,
    /// so that the model narrows its path or pattern instead of a call running for minutes.
    pub fn walk_limit(mut self, entries: usize) -> Self {
        self.walk_limit = entries.max(1);
        self
    }

    /// Passes the variable `name=value` to every command, on top of the scrubbed environment
    /// (`PATH`, `HOME` set to the root, `LANG=C.UTF-8`); a name given twice keeps the last value,
    /// and a name given here overrides those three.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.env.retain(|(existing, _)| *existing != name);
        self.env.push((name, value.into()));
        self
    }

    /// The root directory, resolved (absolute, without symlinks).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `work` on the blocking pool: every file operation is a blocking system call.
    async fn blocking<T: Send + 'static>(
        &self,
        path: &str,
        work: impl FnOnce(&Dir, &Path) -> Result<T, SandboxError> + Send + 'static,
    ) -> Result<T, SandboxError> {
        let dir = Arc::clone(&self.dir);
        let root = Arc::clone(&self.root);
        tokio::task::spawn_blocking(move || work(&dir, &root))
            .await
            .map_err(|error| SandboxError::Io {
                path: path.to_owned(),
                message: format!("the file operation did not complete ({error}); retry it"),
            })?
    }
}

/// `path` as a relative path beneath the root, `.` components dropped; refused as an escape when
/// absolute or when it has a `..` anywhere (even `a/../b`: which `a` it crosses could be a
/// symlink, and a plain name is never needed).
fn beneath(path: &str) -> Result<PathBuf, SandboxError> {
    let escape = || SandboxError::Escape {
        path: path.to_owned(),
    };
    let mut relative = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => relative.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escape());
            }
        }
    }
    Ok(relative)
}

/// Whether cap-std refused to resolve a path because it led outside the directory. It reports
/// that as `PermissionDenied` with its own message, where a real `EACCES` carries an OS code.
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied && error.raw_os_error().is_none()
}

/// Maps a failed operation on `path` (as given) to the sandbox's errors.
fn classify(path: &str, error: &io::Error) -> SandboxError {
    let path = path.to_owned();
    if is_escape(error) {
        return SandboxError::Escape { path };
    }
    match error.kind() {
        io::ErrorKind::NotFound => SandboxError::NotFound { path },
        io::ErrorKind::IsADirectory => SandboxError::WrongKind {
            path,
            expected: "a file",
            found: "a directory",
        },
        io::ErrorKind::NotADirectory => SandboxError::Io {
            path,
            message: "one of its parents is a file, not a directory; check the path".to_owned(),
        },
        _ => io_error(&path, error),
    }
}

fn io_error(path: &str, error: &io::Error) -> SandboxError {
    let message = match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "permission denied; the host's user cannot access it, choose another path".to_owned()
        }
        _ => {
            // The system's messages start with a capital ("No space left on device").
            let system = error.to_string();
            let mut chars = system.chars();
            let first = chars.next().map(|c| c.to_lowercase().to_string());
            format!("{}{}", first.unwrap_or_default(), chars.as_str())
        }
    };
    SandboxError::Io {
        path: path.to_owned(),
        message,
    }
}

fn kind_name(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        "a file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "a special file (pipe, socket or device)"
    }
}

/// Refuses what `read` and `write` must not touch: anything but a regular file, and a regular
/// file with other hard links (one of them may be outside the root).
fn check_plain_file(path: &str, metadata: &Metadata) -> Result<(), SandboxError> {
    if !metadata.is_file() {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: kind_name(metadata),
        });
    }
    let links = metadata.nlink();
    if links > 1 {
        return Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: format!(
                "has {links} hard links, and one may be a file outside the sandbox, so it is \
                 neither read nor overwritten; write the contents you need to a new path"
            ),
        });
    }
    Ok(())
}

/// Opens `relative` beneath `dir` without blocking on a pipe (`O_NONBLOCK` makes opening a FIFO
/// return at once; the caller then refuses it as not a regular file).
fn open_file(
    dir: &Dir,
    relative: &Path,
    options: &mut OpenOptions,
) -> io::Result<cap_std::fs::File> {
    dir.open_with(relative, options.nonblock(true))
}

/// Maps a failed open: when something other than a regular file is in the way (a directory, a
/// pipe without a reader), says what it is rather than the system's message.
fn open_error(dir: &Dir, relative: &Path, path: &str, error: &io::Error) -> SandboxError {
    if !is_escape(error)
        && let Ok(metadata) = dir.metadata(relative)
        && !metadata.is_file()
    {
        return SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: kind_name(&metadata),
        };
    }
    classify(path, error)
}

fn read_chunk(dir: &Dir, path: &str, offset: u64, limit: usize) -> Result<FileChunk, SandboxError> {
    let relative = beneath(path)?;
    if relative.as_os_str().is_empty() {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: "a directory",
        });
    }
    let file = open_file(dir, &relative, OpenOptions::new().read(true))
        .map_err(|error| open_error(dir, &relative, path, &error))?;
    // Checked on the open handle, not the path: it is the file that will be read.
    let metadata = file.metadata().map_err(|error| classify(path, &error))?;
    check_plain_file(path, &metadata)?;
    let size = metadata.len();
    let available = size.saturating_sub(offset);
    let wanted = u64::try_from(limit).unwrap_or(u64::MAX).min(available);
    let mut file = file.into_std();
    file.seek(SeekFrom::Start(offset))
        .map_err(|error| classify(path, &error))?;
    let mut data = Vec::with_capacity(usize::try_from(wanted).unwrap_or(limit));
    file.take(wanted)
        .read_to_end(&mut data)
        .map_err(|error| classify(path, &error))?;
    Ok(FileChunk { data, size })
}

/// Maps a failure to create the parents `parent` of `path`. `create_dir_all` reports a symlink
/// leading out, or a file in the way, as "already exists"; looking at each ancestor in turn tells
/// which it was.
fn parent_error(dir: &Dir, parent: &Path, path: &str, error: &io::Error) -> SandboxError {
    let mut ancestor = PathBuf::new();
    for component in parent.components() {
        ancestor.push(component);
        match dir.metadata(&ancestor) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(metadata) => {
                return SandboxError::WrongKind {
                    path: slash_path(&ancestor),
                    expected: "a directory",
                    found: kind_name(&metadata),
                };
            }
            Err(error) if is_escape(&error) => {
                return SandboxError::Escape {
                    path: path.to_owned(),
                };
            }
            Err(_) => break,
        }
    }
    classify(&slash_path(parent), error)
}

fn write_file(dir: &Dir, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
    let relative = beneath(path)?;
    // `notes/` would otherwise write the file `notes`: the path's components drop the slash.
    if path.ends_with('/') || path.ends_with("/.") {
        return Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: "names a directory (it ends with `/`); give the path of a file".to_owned(),
        });
    }
    let Some(parent) = relative.parent() else {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: "a directory",
        });
    };
    if !parent.as_os_str().is_empty() {
        dir.create_dir_all(parent)
            .map_err(|error| parent_error(dir, parent, path, &error))?;
    }
    // What is there now, the last component not followed.
    match dir.symlink_metadata(&relative) {
        // A symlink inside the root is written through (the link stays a link).
        Ok(metadata) if metadata.file_type().is_symlink() => {}
        Ok(metadata) => {
            check_plain_file(path, &metadata)?;
            // Renaming needs only the folder's write permission: open the file for writing
            // first, so that a file this process may not write is not replaced either, and
            // check the handle (the path may have changed since).
            let existing = open_file(
                dir,
                &relative,
                OpenOptions::new().write(true).follow(FollowSymlinks::No),
            )
            .map_err(|error| open_error(dir, &relative, path, &error))?;
            let metadata = existing
                .metadata()
                .map_err(|error| classify(path, &error))?;
            check_plain_file(path, &metadata)?;
            drop(existing);
            if replace_file(dir, &relative, path, contents, Some(&metadata))? {
                return Ok(());
            }
            // Owned by someone else: written in place, which keeps its owner.
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if replace_file(dir, &relative, path, contents, None)? {
                return Ok(());
            }
        }
        Err(error) => return Err(open_error(dir, &relative, path, &error)),
    }
    // Not truncated on open: the link count is checked first, and truncating a hard link would
    // already have destroyed the outside file's contents.
    let file = open_file(dir, &relative, OpenOptions::new().write(true).create(true))
        .map_err(|error| open_error(dir, &relative, path, &error))?;
    let metadata = file.metadata().map_err(|error| classify(path, &error))?;
    check_plain_file(path, &metadata)?;
    file.set_len(0).map_err(|error| classify(path, &error))?;
    let mut file = file.into_std();
    file.write_all(contents)
        .map_err(|error| classify(path, &error))?;
    Ok(())
}

/// Writes `contents` to a new file beside `relative` and renames it over `relative`: readers see
/// the old contents or the new ones, never an empty or half-written file, and a crash mid-write
/// leaves the old file as it was. A replaced file keeps its permission bits (not setuid, setgid
/// or sticky); `false`, with nothing changed, when it belongs to another user or group, whom a
/// new file would not keep.
fn replace_file(
    dir: &Dir,
    relative: &Path,
    path: &str,
    contents: &[u8],
    existing: Option<&Metadata>,
) -> Result<bool, SandboxError> {
    // Hidden, so `grep` and `glob` skip it while it exists; a fixed length, so any name that
    // fits the folder fits it too.
    let temporary = relative.with_file_name(format!(
        ".tw-{}.tmp",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    if existing.is_some() {
        // Nobody else reads the new contents of a private file while they are written.
        options.mode(0o600);
    }
    let mut file =
        open_file(dir, &temporary, &mut options).map_err(|error| classify(path, &error))?;
    if let Some(existing) = existing {
        let mine = file.metadata().map_err(|error| classify(path, &error))?;
        if mine.uid() != existing.uid() || mine.gid() != existing.gid() {
            drop(file);
            let _ = dir.remove_file(&temporary);
            return Ok(false);
        }
    }
    let written =
        file.write_all(contents)
            .and_then(|()| match existing {
                Some(existing) => file
                    .set_permissions(cap_std::fs::Permissions::from_mode(existing.mode() & 0o777)),
                None => Ok(()),
            })
            .and_then(|()| file.sync_data())
            .and_then(|()| dir.rename(&temporary, dir, relative));
    if let Err(error) = written {
        let _ = dir.remove_file(&temporary);
        return Err(open_error(dir, relative, path, &error));
    }
    Ok(true)
}

fn list_dir(dir: &Dir, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
    let relative = beneath(path)?;
    let opened;
    let target = if relative.as_os_str().is_empty() {
        dir
    } else {
        opened = dir.open_dir(&relative).map_err(|error| {
            if error.kind() == io::ErrorKind::NotADirectory
                && let Ok(metadata) = dir.metadata(&relative)
            {
                return SandboxError::WrongKind {
                    path: path.to_owned(),
                    expected: "a directory",
                    found: kind_name(&metadata),
                };
            }
            classify(path, &error)
        })?;
        &opened
    };
    let mut entries = Vec::new();
    for entry in target.entries().map_err(|error| classify(path, &error))? {
        let entry = entry.map_err(|error| classify(path, &error))?;
        let name = entry.file_name();
        // Not followed: a symlink is reported as one, whatever it points at.
        let metadata = match target.symlink_metadata(&name) {
            Ok(metadata) => metadata,
            // Removed between listing and looking: it is no longer an entry.
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(classify(path, &error)),
        };
        let file_type = metadata.file_type();
        let (kind, size) = if file_type.is_file() {
            (EntryKind::File, metadata.len())
        } else if file_type.is_dir() {
            (EntryKind::Dir, 0)
        } else if file_type.is_symlink() {
            (EntryKind::Symlink, 0)
        } else {
            (EntryKind::Other, 0)
        };
        entries.push(DirEntry {
            name: name.to_string_lossy().into_owned(),
            kind,
            size,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

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

/// `/`-separated, whatever the platform's separator.
fn slash_path(path: &Path) -> String {
    let parts: Vec<_> = path
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

fn build_glob(pattern: &str) -> Result<globset::GlobMatcher, SandboxError> {
    globset::GlobBuilder::new(pattern)
        // `*` stays within one directory, `**` crosses them, as in a shell.
        .literal_separator(true)
        .build()
        .map(|glob| glob.compile_matcher())
        .map_err(|error| SandboxError::Refused {
            path: pattern.to_owned(),
            reason: format!("is not a valid glob ({error}); write e.g. `*.rs` or `src/**/*.rs`"),
        })
}

fn glob_files(
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
                "is not a valid regular expression ({error}); escape special characters with `\\`"
            ),
        })
}

fn grep_files(
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

/// The first `max` bytes of a stream, and whether there were more.
struct Capture {
    kept: Vec<u8>,
    max: usize,
    cut: bool,
}

impl Capture {
    fn new(max: usize) -> Self {
        Capture {
            kept: Vec::new(),
            max,
            cut: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let room = self.max - self.kept.len();
        if chunk.len() > room {
            self.cut = true;
        }
        self.kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }

    fn text(&self) -> String {
        let mut kept = self.kept.as_slice();
        // A character the cut split in two would come back as a replacement character, longer
        // than the bytes it replaces: dropped, so the text stays within `max`.
        if self.cut
            && let Err(error) = std::str::from_utf8(kept)
            && error.error_len().is_none()
        {
            kept = &kept[..error.valid_up_to()];
        }
        String::from_utf8_lossy(kept).into_owned()
    }
}

/// Reads one chunk from a pipe still open; pends forever once it is closed, so that `select!`
/// stops polling it.
async fn read_pipe<R: tokio::io::AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buffer: &mut [u8],
) -> io::Result<usize> {
    match pipe {
        Some(pipe) => pipe.read(buffer).await,
        None => std::future::pending().await,
    }
}

/// Takes a read's result: the data into `capture`, end of file or a failure closes the pipe.
fn take_read<R>(
    result: io::Result<usize>,
    pipe: &mut Option<R>,
    buffer: &[u8],
    capture: &mut Capture,
) {
    match result {
        Ok(0) | Err(_) => *pipe = None,
        Ok(read) => capture.push(&buffer[..read]),
    }
}

/// The running command. Dropping it kills its whole process group: on timeout and cancellation,
/// when the `exec` future itself is dropped, and after a normal exit, so that background
/// processes it left behind do not outlive it.
struct Group(Box<dyn ChildWrapper>);

impl Drop for Group {
    fn drop(&mut self) {
        // `ProcessGroupChild::start_kill` is `killpg(SIGKILL)`; it fails only when the group is
        // already empty, which is the goal.
        let _ = self.0.start_kill();
    }
}

/// Why the command stopped before its output ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    TimedOut,
    Cancelled,
}

fn command_error(what: &str, error: &io::Error) -> SandboxError {
    SandboxError::Command(format!(
        "{what} ({error}); check that `/bin/sh` can run on the host"
    ))
}

impl LocalSandbox {
    fn check_env(&self) -> Result<(), SandboxError> {
        for (name, value) in &self.env {
            if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
                return Err(SandboxError::Command(format!(
                    "cannot be given the variable `{}`: a name must be non-empty and contain \
                     neither `=` nor NUL, a value no NUL; fix the `LocalSandbox::env` call",
                    name.escape_debug()
                )));
            }
        }
        Ok(())
    }

    async fn run(
        &self,
        request: ExecRequest,
        cancel: &dyn CancelSignal,
    ) -> Result<ExecOutput, SandboxError> {
        self.check_env()?;
        let mut stdout_capture = Capture::new(request.max_output);
        let mut stderr_capture = Capture::new(request.max_output);
        if cancel.is_cancelled() {
            // Not started at all: a command killed right after starting may have half-done
            // something.
            return Ok(ExecOutput {
                stdout: String::new(),
                stderr: String::new(),
                exit_code: None,
                timed_out: false,
                truncated: false,
            });
        }
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(&request.command)
            .current_dir(&*self.root)
            .env_clear()
            .env("PATH", COMMAND_PATH)
            .env("HOME", &*self.root)
            .env("LANG", "C.UTF-8")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut command = CommandWrap::from(command);
        command.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut group = Group(
            command
                .spawn()
                .map_err(|error| command_error("could not be started", &error))?,
        );
        let mut stdout = group.0.stdout().take();
        let mut stderr = group.0.stderr().take();
        let mut stdout_buffer = vec![0; PIPE_CHUNK];
        let mut stderr_buffer = vec![0; PIPE_CHUNK];

        let deadline = Instant::now().checked_add(request.timeout);
        let mut expired = pin!(async move {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        });
        let mut cancelled = pin!(cancel.cancelled());
        // Armed when the shell exits: whatever still holds the pipes then is a background process,
        // killed with the group at the end anyway, so its output is waited for only briefly.
        let mut linger = pin!(tokio::time::sleep(Duration::MAX));
        let mut status: Option<ExitStatus> = None;
        let mut stop = None;
        // Both pipes are read to their end even past `max_output`: a command blocked on a full
        // pipe would never exit. Done when the shell has exited and no one holds the pipes.
        while status.is_none() || stdout.is_some() || stderr.is_some() {
            tokio::select! {
                read = read_pipe(&mut stdout, &mut stdout_buffer) => {
                    take_read(read, &mut stdout, &stdout_buffer, &mut stdout_capture);
                }
                read = read_pipe(&mut stderr, &mut stderr_buffer) => {
                    take_read(read, &mut stderr, &stderr_buffer, &mut stderr_capture);
                }
                waited = group.0.wait(), if status.is_none() => {
                    let waited = waited
                        .map_err(|error| command_error("could not be waited for", &error))?;
                    status = Some(waited);
                    linger.as_mut().reset(Instant::now() + DRAIN_GRACE);
                }
                () = &mut linger, if status.is_some() => break,
                () = &mut expired => {
                    stop = Some(Stop::TimedOut);
                    break;
                }
                () = &mut cancelled => {
                    stop = Some(Stop::Cancelled);
                    break;
                }
            }
        }

        if stop.is_some() {
            // The whole group, before the shell is reaped: while it is unreaped its process
            // group ID cannot be reused, so the signal reaches this group and no other.
            let _ = group.0.start_kill();
            if status.is_none()
                && let Ok(Ok(waited)) = tokio::time::timeout(REAP_GRACE, group.0.wait()).await
            {
                status = Some(waited);
            }
            // What the killed processes wrote before dying is still in the pipes.
            let drained = tokio::time::timeout(DRAIN_GRACE, async {
                while stdout.is_some() || stderr.is_some() {
                    tokio::select! {
                        read = read_pipe(&mut stdout, &mut stdout_buffer) => {
                            take_read(read, &mut stdout, &stdout_buffer, &mut stdout_capture);
                        }
                        read = read_pipe(&mut stderr, &mut stderr_buffer) => {
                            take_read(read, &mut stderr, &stderr_buffer, &mut stderr_capture);
                        }
                    }
                }
            });
            let _ = drained.await;
        }
        drop(group);

        Ok(ExecOutput {
            stdout: stdout_capture.text(),
            stderr: stderr_capture.text(),
            exit_code: status.and_then(|status| status.code()),
            timed_out: stop == Some(Stop::TimedOut),
            truncated: stdout_capture.cut || stderr_capture.cut,
        })
    }
}

impl Sandbox for LocalSandbox {
    fn read(
        &self,
        path: &str,
        offset: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<FileChunk, SandboxError>> {
        let path = path.to_owned();
        Box::pin(async move {
            let shown = path.clone();
            self.blocking(&shown, move |dir, _| read_chunk(dir, &path, offset, limit))
                .await
        })
    }

    fn write(&self, path: &str, contents: Vec<u8>) -> BoxFuture<'_, Result<(), SandboxError>> {
        let path = path.to_owned();
        Box::pin(async move {
            let shown = path.clone();
            self.blocking(&shown, move |dir, _| write_file(dir, &path, &contents))
                .await
        })
    }

    fn list(&self, path: &str) -> BoxFuture<'_, Result<Vec<DirEntry>, SandboxError>> {
        let path = path.to_owned();
        Box::pin(async move {
            let shown = path.clone();
            self.blocking(&shown, move |dir, _| list_dir(dir, &path))
                .await
        })
    }

    fn grep(&self, request: GrepRequest) -> BoxFuture<'_, Result<Found<GrepMatch>, SandboxError>> {
        Box::pin(async move {
            let shown = request.path.clone();
            let limit = self.walk_limit;
            self.blocking(&shown, move |dir, root| {
                grep_files(dir, root, &request, limit)
            })
            .await
        })
    }

    fn glob(
        &self,
        pattern: &str,
        path: &str,
        max: usize,
    ) -> BoxFuture<'_, Result<Found<String>, SandboxError>> {
        let pattern = pattern.to_owned();
        let path = path.to_owned();
        Box::pin(async move {
            let shown = path.clone();
            let limit = self.walk_limit;
            self.blocking(&shown, move |dir, root| {
                glob_files(dir, root, &pattern, &path, max, limit)
            })
            .await
        })
    }

    fn exec<'a>(
        &'a self,
        request: ExecRequest,
        cancel: &'a dyn CancelSignal,
    ) -> BoxFuture<'a, Result<ExecOutput, SandboxError>> {
        Box::pin(self.run(request, cancel))
    }
}
