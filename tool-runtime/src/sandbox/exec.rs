//! `exec`: a command run by `sh -c` in the root, in a process group of its own, with a scrubbed
//! environment, its output read to the end and kept up to a limit.

use std::io;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{ChildStderr, ChildStdout};
use tokio::time::Instant;
use toolwright_core::{CancelSignal, ExecOutput, ExecRequest, SandboxError};

use super::LocalSandbox;

/// The `PATH` commands get: the system's directories only, never the host process's `PATH`.
const COMMAND_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How much of a pipe one read takes; large so that a command writing gigabytes is drained at
/// the pipe's speed.
const PIPE_CHUNK: usize = 64 * 1024;

/// How long the output pipes get to reach end of file once the shell has exited or the process
/// group was killed. Only a background process holds them open past the shell, and it is killed
/// with the group; after a kill, only a process that left the group (`setsid`) can.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How long the killed shell gets to be reaped; past that it is left to tokio's orphan reaper.
const REAP_GRACE: Duration = Duration::from_secs(5);

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

/// One output pipe of the command, read in chunks into its capture until it closes.
struct Stream<R> {
    /// `None` once the pipe reached end of file or failed.
    pipe: Option<R>,
    buffer: Vec<u8>,
    capture: Capture,
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(pipe: Option<R>, max: usize) -> Self {
        Stream {
            pipe,
            buffer: vec![0; PIPE_CHUNK],
            capture: Capture::new(max),
        }
    }

    fn is_open(&self) -> bool {
        self.pipe.is_some()
    }

    /// Reads one chunk from a pipe still open; pends forever once it is closed, so that
    /// `select!` stops polling it.
    async fn read(&mut self) -> io::Result<usize> {
        match &mut self.pipe {
            Some(pipe) => pipe.read(&mut self.buffer).await,
            None => std::future::pending().await,
        }
    }

    /// Takes a read's result: the data into the capture, end of file or a failure closes the
    /// pipe.
    fn take(&mut self, result: io::Result<usize>) {
        match result {
            Ok(0) | Err(_) => self.pipe = None,
            Ok(read) => self.capture.push(&self.buffer[..read]),
        }
    }
}

/// The command's stdout and stderr, each kept in a capture of its own.
struct Output {
    stdout: Stream<ChildStdout>,
    stderr: Stream<ChildStderr>,
}

impl Output {
    fn is_open(&self) -> bool {
        self.stdout.is_open() || self.stderr.is_open()
    }

    /// Reads the next chunk of whichever pipe has one; pends forever once both are closed.
    async fn read(&mut self) {
        tokio::select! {
            read = self.stdout.read() => self.stdout.take(read),
            read = self.stderr.read() => self.stderr.take(read),
        }
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

impl Group {
    /// Reads `output` until the shell has exited and no one holds the pipes, or until the
    /// timeout or a cancellation stops the command first. Returns the shell's exit status, if
    /// it exited, and what stopped it.
    async fn watch(
        &mut self,
        output: &mut Output,
        timeout: Duration,
        cancel: &dyn CancelSignal,
    ) -> Result<(Option<ExitStatus>, Option<Stop>), SandboxError> {
        let deadline = Instant::now().checked_add(timeout);
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
        // Both pipes are read to their end even past `max_output`: a command blocked on a full
        // pipe would never exit. Done when the shell has exited and no one holds the pipes.
        while status.is_none() || output.is_open() {
            tokio::select! {
                () = output.read() => {}
                waited = self.0.wait(), if status.is_none() => {
                    let waited = waited
                        .map_err(|error| command_error("could not be waited for", &error))?;
                    status = Some(waited);
                    linger.as_mut().reset(Instant::now() + DRAIN_GRACE);
                }
                () = &mut linger, if status.is_some() => break,
                () = &mut expired => return Ok((status, Some(Stop::TimedOut))),
                () = &mut cancelled => return Ok((status, Some(Stop::Cancelled))),
            }
        }
        Ok((status, None))
    }

    /// Kills the whole group, reaps the shell if it has not exited yet, and takes what the
    /// killed processes wrote before dying. Returns the shell's exit status, if it is known.
    async fn kill(
        &mut self,
        mut status: Option<ExitStatus>,
        output: &mut Output,
    ) -> Option<ExitStatus> {
        // The whole group, before the shell is reaped: while it is unreaped its process
        // group ID cannot be reused, so the signal reaches this group and no other.
        let _ = self.0.start_kill();
        if status.is_none()
            && let Ok(Ok(waited)) = tokio::time::timeout(REAP_GRACE, self.0.wait()).await
        {
            status = Some(waited);
        }
        // What the killed processes wrote before dying is still in the pipes.
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            while output.is_open() {
                output.read().await;
            }
        });
        let _ = drained.await;
        status
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

    /// Starts `sh -c command` in the root, with the scrubbed environment and empty stdin, as
    /// the leader of a process group of its own.
    fn spawn(&self, command: &str) -> Result<Group, SandboxError> {
        let mut shell = tokio::process::Command::new("/bin/sh");
        shell
            .arg("-c")
            .arg(command)
            .current_dir(&*self.root)
            .env_clear()
            .env("PATH", COMMAND_PATH)
            .env("HOME", &*self.root)
            .env("LANG", "C.UTF-8")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut shell = CommandWrap::from(shell);
        shell.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let child = shell
            .spawn()
            .map_err(|error| command_error("could not be started", &error))?;
        Ok(Group(child))
    }

    pub(super) async fn run(
        &self,
        request: ExecRequest,
        cancel: &dyn CancelSignal,
    ) -> Result<ExecOutput, SandboxError> {
        self.check_env()?;
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
        let mut group = self.spawn(&request.command)?;
        let mut output = Output {
            stdout: Stream::new(group.0.stdout().take(), request.max_output),
            stderr: Stream::new(group.0.stderr().take(), request.max_output),
        };
        let (mut status, stop) = group.watch(&mut output, request.timeout, cancel).await?;
        if stop.is_some() {
            status = group.kill(status, &mut output).await;
        }
        drop(group);

        Ok(ExecOutput {
            stdout: output.stdout.capture.text(),
            stderr: output.stderr.capture.text(),
            exit_code: status.and_then(|status| status.code()),
            timed_out: stop == Some(Stop::TimedOut),
            truncated: output.stdout.capture.cut || output.stderr.capture.cut,
        })
    }
}
