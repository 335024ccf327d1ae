//! Limits, timeouts and the clock of a runtime.

use std::sync::Arc;
use std::time::Duration;

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
    /// How many calls run at once across the runtime.
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
        }
    }
}
