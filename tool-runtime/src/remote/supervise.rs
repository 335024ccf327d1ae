//! The task that keeps one connection up for the life of the runtime: it connects, lists the
//! server's tools, refreshes them when the server says they changed, checks that the server
//! still answers, and reconnects with backoff when the server goes away or stops answering.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use toolwright_core::RemoteDefinition;

use super::links::{Link, Live, Shared, rebuild};
use super::{Allow, ConnectionState, RemoteSession};

/// Keeps one connection up for the life of the runtime.
pub(super) async fn supervise(link: Arc<Link>, shared: Arc<Shared>, shutdown: CancellationToken) {
    let mut attempts: u32 = 0;
    loop {
        let attempt = async {
            let session = tokio::time::timeout(
                link.decl.connect_timeout,
                link.decl.connector.connect(link.changed.clone()),
            )
            .await
            .map_err(|_| {
                Failure::Down(format!(
                    "the server did not answer within {:?}",
                    link.decl.connect_timeout
                ))
            })?
            .map_err(Failure::Down)?;
            let listing = tokio::time::timeout(link.decl.connect_timeout, session.list_tools())
                .await
                .map_err(|_| {
                    Failure::Down(format!(
                        "the server did not list its tools within {:?}",
                        link.decl.connect_timeout
                    ))
                })?
                .map_err(|error| Failure::Down(format!("listing its tools failed: {error}")))?;
            refresh(&link, &shared, listing).await?;
            Ok(session)
        };
        let outcome = tokio::select! {
            () = shutdown.cancelled() => return,
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(session) => {
                let up_since = tokio::time::Instant::now();
                let ended = CancellationToken::new();
                // However serving ends (shutdown included), calls still waiting fail at once.
                let _end = ended.clone().drop_guard();
                link.lock().session = Some(Live {
                    session: Arc::clone(&session),
                    ended,
                });
                link.set_state(&shared, ConnectionState::Up);
                link.settled.send_replace(true);
                let Some(ended) = serve(&link, &shared, &*session, &shutdown).await else {
                    return;
                };
                link.lock().session = None;
                drop(session);
                // A server that dies right after each listing must still back off.
                attempts = if up_since.elapsed() > link.decl.backoff.1 {
                    0
                } else {
                    attempts.saturating_add(1)
                };
                tracing::warn!(connection = %link.decl.name, error = %ended, "connection ended");
                link.set_state(
                    &shared,
                    ConnectionState::Down {
                        error: ended,
                        attempts,
                    },
                );
            }
            Err(Failure::Refused(error)) => {
                link.set_state(&shared, ConnectionState::Refused { error });
                link.settled.send_replace(true);
                return;
            }
            Err(Failure::Down(error)) => {
                attempts = attempts.saturating_add(1);
                tracing::warn!(connection = %link.decl.name, attempts, %error, "connection failed");
                link.set_state(&shared, ConnectionState::Down { error, attempts });
                link.settled.send_replace(true);
            }
        }
        let wait = backoff(link.decl.backoff, attempts);
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// The least time between two listings of a server's tools on its list changes: a server that
/// announces changes without pause is listed at most this often (a change within it is seen at
/// its end), not again and again back to back.
const RELIST_EVERY: Duration = Duration::from_secs(1);

/// Serves an open session until it ends: refreshes the tools on every list change, and checks
/// every liveness interval that the server still answers. Returns why it ended, or `None` on
/// shutdown. A listing that fails or hangs ends the session too: the server said its tools
/// changed, so the old ones must not stay callable; reconnecting lists them afresh.
async fn serve(
    link: &Arc<Link>,
    shared: &Shared,
    session: &dyn RemoteSession,
    shutdown: &CancellationToken,
) -> Option<String> {
    let (every, deadline) = link.decl.liveness;
    let closed = || "the server closed the connection".to_owned();
    // The session was listed when it opened.
    let mut listed_at = Instant::now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = session.closed() => return Some(closed()),
            () = link.changed.0.notified() => {
                tokio::select! {
                    () = shutdown.cancelled() => return None,
                    () = session.closed() => return Some(closed()),
                    () = tokio::time::sleep(RELIST_EVERY.saturating_sub(listed_at.elapsed())) => {}
                }
                listed_at = Instant::now();
                let listing = tokio::select! {
                    () = shutdown.cancelled() => return None,
                    () = session.closed() => return Some(closed()),
                    listing = tokio::time::timeout(link.decl.connect_timeout, session.list_tools()) => listing,
                };
                let listing = match listing {
                    Ok(Ok(listing)) => listing,
                    Ok(Err(error)) => return Some(format!("listing its tools again failed: {error}")),
                    Err(_) => return Some(format!("listing its tools again took over {:?}", link.decl.connect_timeout)),
                };
                if let Err(Failure::Down(error) | Failure::Refused(error)) =
                    refresh(link, shared, listing).await
                {
                    return Some(error);
                }
            }
            () = tokio::time::sleep(every) => {
                let answer = tokio::select! {
                    () = shutdown.cancelled() => return None,
                    () = session.closed() => return Some(closed()),
                    answer = tokio::time::timeout(deadline, session.ping()) => answer,
                };
                match answer {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => return Some(format!("it did not answer a ping: {error}")),
                    Err(_) => {
                        return Some(format!(
                            "it stopped answering (no answer to a ping within {deadline:?})"
                        ));
                    }
                }
            }
        }
    }
}

/// The wait before reconnection attempt `attempts`: doubling from the first wait up to the
/// longest, with up to a quarter of jitter so that instances do not reconnect in lockstep.
fn backoff((first, longest): (Duration, Duration), attempts: u32) -> Duration {
    let doubled = first.saturating_mul(1u32 << attempts.saturating_sub(1).min(16));
    let base = doubled.min(longest);
    let jitter = uuid::Uuid::new_v4().as_u128() as u64 % (base.as_millis() as u64 / 4 + 1);
    base + Duration::from_millis(jitter)
}

enum Failure {
    /// Worth retrying.
    Down(String),
    /// The declaration does not fit the server: retrying cannot help.
    Refused(String),
}

/// Checks a listing against the allowlist and rebuilds the connection's tools from it.
async fn refresh(
    link: &Arc<Link>,
    shared: &Shared,
    listing: Vec<RemoteDefinition>,
) -> Result<(), Failure> {
    let first = !link.lock().listed;
    let definitions: Vec<RemoteDefinition> = match &link.decl.allow {
        Allow::Only(allowed) => {
            let missing: Vec<&String> = allowed
                .iter()
                .filter(|name| !listing.iter().any(|d| &&d.name == name))
                .collect();
            if first && !missing.is_empty() {
                let mut available: Vec<&str> = listing.iter().map(|d| d.name.as_str()).collect();
                available.sort_unstable();
                return Err(Failure::Refused(format!(
                    "its allowlist names {} that the server does not expose; the server lists: {}. Fix `.allow([...])` of connection `{}`",
                    missing
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if available.is_empty() {
                        "no tools".to_owned()
                    } else {
                        available.join(", ")
                    },
                    link.decl.name
                )));
            }
            listing
                .into_iter()
                .filter(|d| allowed.contains(&d.name))
                .collect()
        }
        Allow::All | Allow::Unset => listing,
    };
    rebuild(link, shared, Some(definitions))
        .await
        .map_err(|error| Failure::Down(format!("its pins could not be read: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_longest_wait_with_bounded_jitter() {
        let plan = (Duration::from_millis(100), Duration::from_secs(2));
        for (attempts, base) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (5, 1600),
            (6, 2000),
            (40, 2000),
        ] {
            let wait = backoff(plan, attempts).as_millis() as u64;
            assert!(
                (base..=base + base / 4).contains(&wait),
                "attempt {attempts}: {wait} ms"
            );
        }
    }
}
