//! Limits, timeouts and the clock of a runtime.

use std::sync::Arc;
use std::time::Duration;

use crate::sealing::Sealing;

/// The time durable sleeps are measured against (milliseconds since the Unix epoch). Tests
/// install a clock they control.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

impl std::fmt::Debug for dyn Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}

/// Limits and timeouts of the runtime.
#[derive(Clone, Debug)]
pub struct Options {
    /// The clock durable sleeps use (default: the system clock).
    pub clock: Arc<dyn Clock>,
    /// How long one call may run before it fails with `TIMEOUT` and is cancelled.
    pub call_timeout: Duration,
    /// How many calls run at once across the runtime. A call beyond waits for a place; one
    /// whose turn is cancelled (or whose step is steered) meanwhile never starts, and is
    /// settled as cancelled (interrupted). Its timeout counts from when it starts.
    pub concurrency: usize,
    /// How long the `auto` decider may take before the call asks a person instead.
    pub decider_timeout: Duration,
    /// The largest input (serialized) sent to the `auto` decider; larger inputs ask a person.
    pub decider_max_input: usize,
    /// Files sent to the model above this size (decoded) raise a warning event.
    pub file_warning_bytes: usize,
    /// The largest file a call may return (decoded; 32 MiB): a larger one is left out of the
    /// result, a text part saying so in its place, with a warning event. Files within it are
    /// stored once per session as attachments.
    pub attachment_max_bytes: u64,
    /// How long a cancelled workflow task's body may run its cleanup (its token fired) before
    /// it is dropped.
    pub task_cleanup: Duration,
    /// This instance's name in the store's leases: unique per process (default: a random id
    /// with the process id), so that instances sharing a database tell their claims apart.
    pub instance: String,
    /// How long a claim on running work (a turn's step, a workflow task) lasts unless renewed.
    /// The runtime renews its claims every third of it; an instance that stops (killed, frozen,
    /// cut off) loses them when it ends, and another instance running
    /// [`Runtime::run_worker`](crate::Runtime::run_worker) takes the work over. Shorter means faster take-over, longer
    /// tolerates longer pauses.
    pub lease: Duration,
    /// How long a toolset's context provider may take before a turn goes on without it
    /// ([`Turn::context`](crate::Turn::context); 800 ms).
    pub context_deadline: Duration,
    /// The URL the host serves webhooks at (its webhook route, e.g.
    /// `https://api.example.com/hooks`): a webhook's URL is this with its token appended
    /// ([`WorkflowContext::webhook`](toolwright_core::WorkflowContext::webhook)). `None`: no
    /// webhooks, plain hooks only.
    pub webhook_url: Option<String>,
    /// How long finished work is kept (default: forever); see [`Retention`].
    pub retention: Retention,
    /// The keys that seal the sensitive input of calls kept in the store (parked, running,
    /// served by a task) so that they can run later; see [`Sealing`]. Default: a key of this
    /// process only, so such calls resume only in the process that parked them.
    pub sealing: Sealing,
}

/// How long the runtime keeps what finished work leaves behind: finished turns (with their
/// request index rows, answers, journals and the ended tasks they started) and idle sessions
/// (whole: turns, tasks, grants, conversation, attachments). Nothing a parked or running turn,
/// task or timer still needs is deleted. [`Runtime::run_worker`](crate::Runtime::run_worker)
/// sweeps every [`Retention::every`] when a rule is set; [`Runtime::sweep`](crate::Runtime::sweep)
/// sweeps at once. Ages are measured by the store's clock.
///
/// ```
/// use std::time::Duration;
/// use toolwright_runtime::{Options, Retention};
///
/// let options = Options {
///     retention: Retention {
///         finished_turns: Some(Duration::from_secs(7 * 24 * 3600)),
///         turns_per_session: Some(200),
///         idle_sessions: Some(Duration::from_secs(90 * 24 * 3600)),
///         ..Retention::default()
///     },
///     ..Options::default()
/// };
/// assert!(options.retention.is_set());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Finished turns (completed or cancelled) are deleted this long after they finished. The
    /// session's conversation stays: the model loop still reads it.
    pub finished_turns: Option<Duration>,
    /// Each session keeps at most this many finished turns, the newest.
    pub turns_per_session: Option<usize>,
    /// Sessions are deleted whole once idle this long: every turn finished, every task ended
    /// and the session not written since.
    pub idle_sessions: Option<Duration>,
    /// How often the worker sweeps (default: hourly; at least every 10 ms).
    pub every: Duration,
    /// How many turns (or sessions) one store transaction deletes (default: 100): sweeps never
    /// hold a long transaction.
    pub batch: usize,
}

impl Retention {
    /// Whether any rule is set (otherwise nothing is ever deleted).
    pub fn is_set(&self) -> bool {
        self.finished_turns.is_some()
            || self.turns_per_session.is_some()
            || self.idle_sessions.is_some()
    }
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            finished_turns: None,
            turns_per_session: None,
            idle_sessions: None,
            every: Duration::from_secs(3600),
            batch: 100,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            clock: Arc::new(SystemClock),
            call_timeout: Duration::from_secs(300),
            concurrency: 64,
            decider_timeout: Duration::from_secs(30),
            decider_max_input: 64 * 1024,
            file_warning_bytes: 3 * 1024 * 1024,
            attachment_max_bytes: 32 * 1024 * 1024,
            task_cleanup: Duration::from_secs(30),
            instance: format!(
                "{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
            lease: Duration::from_secs(30),
            context_deadline: Duration::from_millis(800),
            webhook_url: None,
            retention: Retention::default(),
            sealing: Sealing::ephemeral(),
        }
    }
}
