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
