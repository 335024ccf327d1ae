//! Deleting what finished work leaves behind: one session on request ([`delete_session`]), and
//! sweeps by the runtime's [`Retention`] ([`sweep`]): finished turns past their time or count,
//! then idle sessions whole.

use crate::attachments;
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::options::Retention;
use crate::store::{Deleted, StoreError, TurnRetention};

/// What a sweep deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Swept {
    /// Finished turns (the idle sessions' included).
    pub turns: u64,
    /// Tasks (the idle sessions' included).
    pub tasks: u64,
    /// Idle sessions, deleted whole.
    pub sessions: u64,
}

/// Deletes session `session_id` and everything it holds (see `Session::delete`): ends it
/// first when `end_first` (a host's deletion: it takes no new turns, even if refused; a sweep
/// leaves a session it then finds busy as it was), deletes the store's records in batches, then
/// its attachments in the sandbox.
pub(crate) async fn delete_session(
    engine: &Engine,
    session_id: &str,
    batch: usize,
    end_first: bool,
) -> Result<Deleted, RuntimeError> {
    if end_first {
        match engine
            .update_session(session_id, |record| record.ended = true)
            .await
        {
            Ok(()) => engine.emit(Event::SessionChanged {
                session_id: session_id.to_owned(),
            }),
            // Deleted before, perhaps halfway: what is left goes now.
            Err(RuntimeError::UnknownSession(_)) => {}
            Err(error) => return Err(error),
        }
    }
    let store = engine.store();
    let mut total = Deleted::default();
    loop {
        let deleted = store.delete_session(session_id, batch).await?;
        total.turns += deleted.turns;
        total.tasks += deleted.tasks;
        if deleted.done {
            break;
        }
        tokio::task::yield_now().await;
    }
    if let Err(error) = attachments::remove_from_sandbox(engine, session_id).await {
        return Err(RuntimeError::Sandbox(format!(
            "session `{session_id}` was deleted from the store, but its attachments in the \
             sandbox at `{}` could not be removed ({error}); remove that directory by hand",
            attachments::session_dir(session_id)
        )));
    }
    engine.cache().forget_session(session_id);
    total.done = true;
    Ok(total)
}

/// Sweeps once by `retention`: finished turns, then idle sessions, batch by batch.
pub(crate) async fn sweep(engine: &Engine, retention: &Retention) -> Result<Swept, RuntimeError> {
    let mut swept = Swept::default();
    let rule = TurnRetention {
        older_than: retention.finished_turns,
        keep: retention.turns_per_session,
    };
    if rule.older_than.is_some() || rule.keep.is_some() {
        loop {
            let deleted = engine.store().sweep_turns(rule, retention.batch).await?;
            swept.turns += deleted.turns;
            swept.tasks += deleted.tasks;
            if deleted.done {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    if let Some(idle) = retention.idle_sessions {
        sweep_sessions(engine, idle, retention.batch, &mut swept).await?;
    }
    Ok(swept)
}

/// Deletes the sessions idle for `idle`, `batch` listed at a time, until a listing yields none
/// that could be deleted (one that got busy since it was listed is left for the next sweep).
async fn sweep_sessions(
    engine: &Engine,
    idle: std::time::Duration,
    batch: usize,
    swept: &mut Swept,
) -> Result<(), RuntimeError> {
    loop {
        let ids = engine.store().idle_sessions(idle, batch.max(1)).await?;
        let mut deleted_any = false;
        for id in &ids {
            match delete_session(engine, id, batch, false).await {
                Ok(deleted) => {
                    swept.turns += deleted.turns;
                    swept.tasks += deleted.tasks;
                    swept.sessions += 1;
                    deleted_any = true;
                }
                Err(RuntimeError::Store(StoreError::Busy { .. })) => {}
                Err(error) => return Err(error),
            }
        }
        if ids.len() < batch.max(1) || !deleted_any {
            return Ok(());
        }
    }
}
