//! A remote server's progress notifications, forwarded to the partial results of the calls
//! that asked for them (`action.partial`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{NumberOrString, ProgressNotificationParam, ProgressToken};
use serde_json::{Map, Value};
use toolwright_core::CallContext;

/// How many progress notifications for tokens no call watches yet are kept, the oldest
/// dropped first.
const EARLY: usize = 64;

/// The calls of one client session that wait for progress, by progress token.
#[derive(Clone, Default)]
pub(crate) struct Progress(Arc<Mutex<Watched>>);

#[derive(Default)]
struct Watched {
    calls: HashMap<ProgressToken, CallContext>,
    /// Progress for tokens no call watches yet, oldest first. rmcp gives a request's token
    /// only once the request is on its way, so a quick server's first notification can come
    /// before its call watches the token; it is delivered when the call does. Only numbers are
    /// kept, the tokens rmcp gives (a string token, which no call of ours has, could be as
    /// large as a message). Tokens are not reused within a session, so what a finished call's
    /// server reports late only waits here until newer notifications push it out.
    early: VecDeque<(ProgressToken, Value)>,
}

impl Progress {
    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forwards one notification to the call watching its token, or keeps it for the call
    /// about to.
    pub(crate) fn report(&self, params: ProgressNotificationParam) {
        let snapshot = snapshot(&params);
        let cx = {
            let mut watched = self.watched();
            match watched.calls.get(&params.progress_token) {
                Some(cx) => cx.clone(),
                None if !matches!(params.progress_token.0, NumberOrString::Number(_)) => return,
                None => {
                    if watched.early.len() == EARLY {
                        watched.early.pop_front();
                    }
                    watched.early.push_back((params.progress_token, snapshot));
                    return;
                }
            }
        };
        cx.host().partial(snapshot);
    }

    /// Forwards the progress reported under `token` to `cx`'s partial results, first what
    /// came before, until the returned guard is dropped (when the call ends, however it ends).
    pub(crate) fn watch(&self, token: ProgressToken, cx: &CallContext) -> Watch<'_> {
        // Until no early progress is left the call is not registered: a notification that
        // comes meanwhile (rmcp handles each on a task of its own) waits with the others
        // instead of overtaking them. Delivered outside the lock: a partial result may run
        // the tool's label function.
        loop {
            let early: Vec<Value> = {
                let mut watched = self.watched();
                let mut early = Vec::new();
                watched.early.retain_mut(|(t, snapshot)| {
                    let mine = *t == token;
                    if mine {
                        early.push(std::mem::take(snapshot));
                    }
                    !mine
                });
                if early.is_empty() {
                    watched.calls.insert(token.clone(), cx.clone());
                    return Watch(self, token);
                }
                early
            };
            for snapshot in early {
                cx.host().partial(snapshot);
            }
        }
    }
}

/// Stops forwarding a call's progress when dropped.
pub(crate) struct Watch<'a>(&'a Progress, ProgressToken);

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.0.watched().calls.remove(&self.1);
    }
}

/// A notification as a partial result: `progress`, `total`, `message`.
fn snapshot(params: &ProgressNotificationParam) -> Value {
    let mut snapshot = Map::new();
    snapshot.insert("progress".into(), params.progress.into());
    if let Some(total) = params.total {
        snapshot.insert("total".into(), total.into());
    }
    if let Some(message) = &params.message {
        // A status line, not a payload: a server may send 16 MiB, and the runtime's event
        // channel keeps its last 1,024 events.
        let message = toolwright_core::error::quoted_prefix(message).into_owned();
        snapshot.insert("message".into(), message.into());
    }
    Value::Object(snapshot)
}

#[cfg(test)]
mod tests {
    use toolwright_core::{DetachedHost, HostEvent};

    use super::*;

    fn notice(token: i64, progress: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(token_of(token), progress)
    }

    fn token_of(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    fn partials(host: &DetachedHost) -> Vec<Value> {
        host.events()
            .into_iter()
            .filter_map(|e| match e {
                HostEvent::Partial(snapshot) => Some(snapshot),
                _ => None,
            })
            .collect()
    }

    // A server may report progress before the call that sent the request watches its token
    // (rmcp gives the token only once the request is on its way): the call still gets it,
    // first, and another call's early progress stays with that call.
    #[test]
    fn progress_reported_before_its_call_watches_reaches_the_call() {
        let progress = Progress::default();
        progress.report(notice(1, 0.25));
        progress.report(notice(2, 0.5));
        let host = Arc::new(DetachedHost::default());
        let cx = CallContext::builder().host(host.clone()).build();
        let watch = progress.watch(token_of(1), &cx);
        progress.report(notice(1, 0.75));
        assert_eq!(
            partials(&host),
            [
                serde_json::json!({"progress": 0.25}),
                serde_json::json!({"progress": 0.75})
            ]
        );
        drop(watch);
        progress.report(notice(1, 1.0));
        assert_eq!(partials(&host).len(), 2, "nothing after the call ended");
    }

    // A string token is none of ours (rmcp gives numbers) and may be as large as a message: no
    // call waits for it, so it is not kept.
    #[test]
    fn early_progress_under_a_string_token_is_not_kept() {
        let progress = Progress::default();
        let token = ProgressToken(NumberOrString::String("x".repeat(1 << 20).into()));
        progress.report(ProgressNotificationParam::new(token, 0.5));
        assert!(progress.watched().early.is_empty());
    }

    // What no call comes for is kept only up to a bound.
    #[test]
    fn early_progress_is_bounded() {
        let progress = Progress::default();
        for token in 0..1_000 {
            progress.report(notice(token, 1.0));
        }
        assert_eq!(progress.watched().early.len(), EARLY);
        let host = Arc::new(DetachedHost::default());
        let cx = CallContext::builder().host(host.clone()).build();
        let _old = progress.watch(token_of(0), &cx);
        let _new = progress.watch(token_of(999), &cx);
        assert_eq!(partials(&host).len(), 1, "only the newest are kept");
    }
}
