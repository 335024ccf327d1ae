//! Workflow tasks: the bodies of `workflow = task` and `workflow = serve` tools run as tasks of
//! their own, outside the step that started them.
//!
//! A task is a [`TaskRecord`](crate::record::TaskRecord) in the store. Its body replays from its
//! journal like any workflow body; when it waits (a question, a durable sleep, a `serve` task
//! between calls) the body is dropped and the record says what it waits on, so a waiting task
//! holds no tokio task and survives a restart. Results go to the turn that made the call: as
//! `task.result` events, through [`crate::Turn::task_results`] (the `task_result` messages for
//! the model) and through the `task_wait` meta-tool ([`meta`]).

pub(crate) mod answer;
pub(crate) mod meta;
pub(crate) mod recover;
pub(crate) mod results;
pub(crate) mod runner;
pub(crate) mod start;

/// Right after task `id` parked on `request`: a wait on a hook whose delivery arrived between
/// the body's check and the park is settled now, in the background. (A delivery after the
/// park finds the request itself.)
pub(crate) fn recheck(
    engine: &std::sync::Arc<crate::engine::Engine>,
    id: &str,
    request: &crate::record::InputRequest,
) {
    let Some(hook) = crate::transition::HookRef::of(request) else {
        return;
    };
    let (engine, id, request_id) = (
        std::sync::Arc::clone(engine),
        id.to_owned(),
        request.request_id.clone(),
    );
    tokio::spawn(async move {
        let delivered = crate::host::hook::delivery(engine.store().as_ref(), &hook.id).await;
        let payload = match delivered {
            Ok(Some(payload)) => payload,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(hook = %hook.id, "checking a hook's delivery failed: {error}");
                return;
            }
        };
        let response = crate::call::InputResponse::fill(request_id, None, payload);
        if let Err(error) = answer::settle_task(
            &engine,
            &id,
            response,
            crate::transition::answer::Settler::Hook,
        )
        .await
        {
            tracing::warn!(hook = %hook.id, "settling a delivered hook failed: {error}");
        }
    });
}
