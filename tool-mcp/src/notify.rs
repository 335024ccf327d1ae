//! What a running call tells the client besides its result: its partial snapshots as
//! `notifications/progress` (when the request carries a progress token) and its log lines as
//! `notifications/message` at the level the client set with `logging/setLevel`. Neither ever
//! reaches the model.

#![allow(deprecated)] // MCP logging: deprecated by the 2026-07-28 revision, served to older peers.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use toolwright_core::LogLevel;
use toolwright_runtime::{Event, Runtime};

/// The lowest level of log lines a client wants; `None` until it sets one with
/// `logging/setLevel`. Until then no line is sent, and a call that has no progress token needs no
/// forwarder (no task, no subscription to the runtime's events per call).
#[derive(Default)]
pub(crate) struct LogThreshold(Mutex<Option<LoggingLevel>>);

impl LogThreshold {
    /// Sets the level (`logging/setLevel`).
    pub(crate) fn set(&self, level: LoggingLevel) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(level);
    }

    /// Whether the client asked for log lines at all.
    pub(crate) fn is_set(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Whether a line at `level` goes to the client.
    fn admits(&self, level: LoggingLevel) -> bool {
        let threshold = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        threshold.is_some_and(|threshold| rank(level) >= rank(threshold))
    }
}

/// MCP's severity order (syslog's), low to high.
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A tool's log level as MCP's.
fn level_of(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Warn => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
    }
}

/// The task forwarding one call's notifications (see [`forward`]).
pub(crate) struct Forwarding {
    task: tokio::task::JoinHandle<()>,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Forwarding {
    /// Sends what the call reported up to now, then stops: every notification of a finished
    /// call reaches the client before its result does.
    pub(crate) async fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }

    /// Stops at once (the call waits for input; nothing more will come from this request).
    pub(crate) fn abort(self) {
        self.task.abort();
    }
}

/// Forwards what call `call_id` of turn `turn_id` reports until it is finished: partial
/// snapshots as progress when the request carries a progress token, log lines when `logs`
/// admits them. `None` when there is nothing to forward (no progress token, and no log level
/// set: a 2026-07-28 request, whose revision has no logging, or a client that never set one).
pub(crate) fn forward(
    runtime: &Runtime,
    cx: &RequestContext<RoleServer>,
    logs: Option<Arc<LogThreshold>>,
    turn_id: &str,
    call_id: &str,
) -> Option<Forwarding> {
    let token = cx.meta.get_progress_token();
    if token.is_none() && logs.is_none() {
        return None;
    }
    let mut events = runtime.subscribe();
    let mut forwarder = Forwarder {
        peer: cx.peer.clone(),
        token,
        logs,
        count: 0.0,
        sent: 0.0,
        turn_id: turn_id.to_owned(),
        call_id: call_id.to_owned(),
    };
    let (stop, mut stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Ok(event) => {
                        if !forwarder.send(event).await {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(_) => return,
                },
                _ = &mut stopped => break,
            }
        }
        // The call is finished: everything it reported was sent to the channel before; drain it.
        while let Ok(event) = events.try_recv() {
            if !forwarder.send(event).await {
                return;
            }
        }
    });
    Some(Forwarding { task, stop })
}

/// Sends one call's notifications to its client.
struct Forwarder {
    peer: Peer<RoleServer>,
    token: Option<rmcp::model::ProgressToken>,
    logs: Option<Arc<LogThreshold>>,
    count: f64,
    /// The last progress value sent.
    sent: f64,
    turn_id: String,
    call_id: String,
}

impl Forwarder {
    /// Sends what `event` says of this call, if anything. `false` when the client is gone.
    async fn send(&mut self, event: Event) -> bool {
        match event {
            Event::ActionPartial {
                turn_id,
                call_id,
                snapshot,
                label,
                ..
            } if turn_id == self.turn_id && call_id == self.call_id => {
                self.progress(&snapshot, label).await
            }
            Event::ActionLog {
                turn_id,
                call_id,
                tool,
                level,
                message,
                ..
            } if turn_id == self.turn_id && call_id == self.call_id => {
                self.log(tool, level, message).await
            }
            Event::ActionStep {
                turn_id,
                call_id,
                label,
                ..
            } if turn_id == self.turn_id && call_id == self.call_id => self.step(label).await,
            _ => true,
        }
    }

    /// A partial snapshot as progress: its own `progress` (and `total`) when it has them, else
    /// the count of snapshots so far; its label (or the snapshot) as the message. `false` when
    /// the client is gone.
    async fn progress(&mut self, snapshot: &Value, label: Option<String>) -> bool {
        let Some(token) = self.token.clone() else {
            return true;
        };
        self.count += 1.0;
        let reported = snapshot.get("progress").and_then(Value::as_f64);
        let value = self.increasing(reported.unwrap_or(self.count));
        let mut param = ProgressNotificationParam::new(token, value);
        if reported.is_some() {
            param.total = snapshot.get("total").and_then(Value::as_f64);
        }
        param.message = Some(label.unwrap_or_else(|| snapshot.to_string()));
        self.peer.notify_progress(param).await.is_ok()
    }

    /// `wanted`, or just above the last value sent when it is not above it: MCP progress
    /// only ever increases, and partials (their own `progress`) and steps (a count) mix.
    fn increasing(&mut self, wanted: f64) -> f64 {
        let value = if wanted > self.sent {
            wanted
        } else {
            self.sent + 1.0
        };
        self.sent = value;
        value
    }

    /// A journaled step's progress as a progress notification: the count of notifications so
    /// far, the step's label as the message. `false` when the client is gone.
    async fn step(&mut self, label: String) -> bool {
        let Some(token) = self.token.clone() else {
            return true;
        };
        self.count += 1.0;
        let value = self.increasing(self.count);
        let mut param = ProgressNotificationParam::new(token, value);
        param.message = Some(label);
        self.peer.notify_progress(param).await.is_ok()
    }

    /// A log line as `notifications/message`, from the logger named after the tool. `false`
    /// when the client is gone.
    async fn log(&self, tool: String, level: LogLevel, message: String) -> bool {
        let Some(logs) = &self.logs else {
            return true;
        };
        let level = level_of(level);
        if !logs.admits(level) {
            return true;
        }
        let mut param = LoggingMessageNotificationParam::new(level, json!(message));
        param.logger = Some(tool);
        self.peer.notify_logging_message(param).await.is_ok()
    }
}
