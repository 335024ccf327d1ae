//! The sandbox a host installs on the runtime: files and commands in one confined place, reached
//! from a plain or durable tool's context (`ctx.sandbox()`), never from a workflow body (its
//! context has no sandbox: a compile error, rule C8).
//!
//! Paths are relative to the sandbox's root, `/`-separated; implementations refuse any path that
//! would leave the root (`..`, absolute paths, symlinks pointing out) with
//! [`SandboxError::Escape`]. The runtime's `LocalSandbox` confines one directory with
//! capability-based file access.

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::approval::CancelSignal;
use crate::error::quoted_prefix;

/// Why a sandbox operation failed. Messages name the path (at most its first
/// [`QUOTED_CHARS`](crate::error::QUOTED_CHARS) characters: see
/// [`quoted_prefix`]) and say what to do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The path would leave the sandbox's root.
    #[error(
        "`{}` is outside the sandbox (an absolute path, a `..`, or a symbolic link leading out); use a path relative to the sandbox's root",
        quoted_prefix(.path)
    )]
    Escape {
        /// The path as given.
        path: String,
    },
    /// Nothing at the path.
    #[error(
        "`{}` does not exist; find what is there with `glob` (e.g. the pattern `**/*`)",
        quoted_prefix(.path)
    )]
    NotFound {
        /// The path as given.
        path: String,
    },
    /// A directory where a file was expected, or the other way round.
    #[error("`{}` is {found}, not {expected}", quoted_prefix(.path))]
    WrongKind {
        /// The path as given.
        path: String,
        /// What the operation needs, e.g. "a file".
        expected: &'static str,
        /// What is there, e.g. "a directory".
        found: &'static str,
    },
    /// The sandbox refuses the request as given: a file it will not touch (a hard link that may
    /// lead outside), or a pattern that is not valid.
    #[error("`{}` {reason}", quoted_prefix(.path))]
    Refused {
        /// The path or pattern as given.
        path: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// The command could not be started, or ran past its limits.
    #[error("the command {0}")]
    Command(String),
    /// Any other I/O failure.
    #[error("`{}`: {message}", quoted_prefix(.path))]
    Io {
        /// The path as given.
        path: String,
        /// The system's message.
        message: String,
    },
}

/// A piece of a file: `data` read from `offset`, and the file's whole size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChunk {
    /// The bytes read.
    pub data: Vec<u8>,
    /// The file's size in bytes.
    pub size: u64,
}

/// What a directory entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (a socket, a device, a pipe).
    Other,
}

/// One entry of a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name (not a path).
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its size in bytes (0 for directories).
    pub size: u64,
}

/// A shell command to run in the sandbox's root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRequest {
    /// The command line, run by `sh -c`.
    pub command: String,
    /// How long it may run; then it and everything it started are killed.
    pub timeout: Duration,
    /// How much of stdout and of stderr is kept, each; the rest is read and dropped.
    pub max_output: usize,
}

impl ExecRequest {
    /// `command` with a 2-minute timeout and 50 KB of each output kept.
    pub fn new(command: impl Into<String>) -> Self {
        ExecRequest {
            command: command.into(),
            timeout: Duration::from_secs(120),
            max_output: 50 * 1024,
        }
    }
}

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its stdout (lossy UTF-8), at most `max_output` bytes.
    pub stdout: String,
    /// Its stderr (lossy UTF-8), at most `max_output` bytes.
    pub stderr: String,
    /// Its exit code; `None` when it was killed (timeout, cancellation, a signal).
    pub exit_code: Option<i32>,
    /// Whether it ran past its timeout and was killed.
    pub timed_out: bool,
    /// Whether stdout or stderr was cut at `max_output`.
    pub truncated: bool,
}

/// A regex search over the sandbox's files (hidden files are skipped, binary files are not
/// searched; ignore files such as `.gitignore` are not read: they could lead outside).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepRequest {
    /// The regular expression (Rust `regex` syntax).
    pub pattern: String,
    /// The file or directory to search (`""`: the root).
    pub path: String,
    /// Only files whose path matches this glob, e.g. `*.rs`.
    pub glob: Option<String>,
    /// Whether case is ignored.
    pub case_insensitive: bool,
    /// At most this many matching lines are returned.
    pub max_matches: usize,
}

/// One matching line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    /// The file, relative to the root.
    pub path: String,
    /// The line number, from 1.
    pub line: u64,
    /// The line's text (lossy UTF-8, without its line break, cut at 500 characters).
    pub text: String,
}

/// Paths found, and whether more were left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found<T> {
    /// What was found, sorted.
    pub items: Vec<T>,
    /// Whether the limit cut the list.
    pub truncated: bool,
}

/// Files and commands in one confined place. Installed by the host on the runtime; reached
/// through `ToolContext::sandbox`.
pub trait Sandbox: Send + Sync + 'static {
    /// Reads at most `limit` bytes of the file `path` from byte `offset`.
    fn read(
        &self,
        path: &str,
        offset: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<FileChunk, SandboxError>>;

    /// Writes `contents` to the file `path`, replacing it, creating missing parent directories.
    fn write(&self, path: &str, contents: Vec<u8>) -> BoxFuture<'_, Result<(), SandboxError>>;

    /// The entries of the directory `path` (`""` or `"."`: the root), sorted by name.
    fn list(&self, path: &str) -> BoxFuture<'_, Result<Vec<DirEntry>, SandboxError>>;

    /// Lines matching `request.pattern` in the files under `request.path`.
    fn grep(&self, request: GrepRequest) -> BoxFuture<'_, Result<Found<GrepMatch>, SandboxError>>;

    /// Files under `path` whose path relative to `path` matches the glob `pattern` (e.g.
    /// `**/*.rs`), at most `max`, skipping hidden files as `grep` does.
    fn glob(
        &self,
        pattern: &str,
        path: &str,
        max: usize,
    ) -> BoxFuture<'_, Result<Found<String>, SandboxError>>;

    /// Removes the file or the directory (with everything in it) at `path`; a symbolic link is
    /// removed, not what it points to. Nothing at the path is
    /// [`SandboxError::NotFound`]. The runtime removes the attachments it kept in the sandbox
    /// with it. The default refuses: a sandbox written before this method keeps compiling, and
    /// its attachments stay until the host removes them.
    fn remove(&self, path: &str) -> BoxFuture<'_, Result<(), SandboxError>> {
        Box::pin(std::future::ready(Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: "cannot be removed: this sandbox does not implement `Sandbox::remove`"
                .to_owned(),
        })))
    }

    /// Runs `request` in the root. When `cancel` fires, the command and everything it started
    /// are killed and the output so far is returned.
    fn exec<'a>(
        &'a self,
        request: ExecRequest,
        cancel: &'a dyn CancelSignal,
    ) -> BoxFuture<'a, Result<ExecOutput, SandboxError>>;
}
