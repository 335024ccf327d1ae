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
use std::io;
use std::path::Path;
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use futures_util::future::BoxFuture;
use toolwright_core::{
    CancelSignal, DirEntry, ExecOutput, ExecRequest, FileChunk, Found, GrepMatch, GrepRequest,
    Sandbox, SandboxError,
};

mod exec;
mod fs;
mod search;

use fs::{io_error, list_dir, read_chunk, remove_path, write_file};
use search::{glob_files, grep_files};

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

    fn remove(&self, path: &str) -> BoxFuture<'_, Result<(), SandboxError>> {
        let path = path.to_owned();
        Box::pin(async move {
            let shown = path.clone();
            self.blocking(&shown, move |dir, _| remove_path(dir, &path))
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
