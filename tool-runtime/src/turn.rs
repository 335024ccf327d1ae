//! Turns: the handle that runs steps, lists tools, gives the per-turn context, and completes,
//! cancels or messages a turn. The turn itself lives in the store.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toolwright_core::{Audience, Format, ModelOutput};
use tracing::Instrument;

use crate::attachments;
use crate::call::{InputResponse, RespondOutcome, Steered, StepOptions, StepOutcome, ToolCall};
use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::{CompletionReason, Event};
use crate::input::cancel::cancel_turn;
use crate::input::revoke::revoke;
use crate::input::steer::pending_question;
use crate::pipeline::listing::{StepTools, step_tools};
use crate::record::{ClosedStep, InputRequest, Outcome, TaskRecord, TaskResult, TurnRecord};
use crate::store::StoreError;
use crate::task::results::{cancel_tasks_of_turn, owing, take_results, wait_results};
use crate::toolset::{ContextRequest, TurnContext};

/// A turn handle. The turn itself lives in the store: a handle can be dropped while the turn is
/// parked, and [`crate::Runtime::turn`] gives a new one, in this process or another.
#[derive(Clone, Debug)]
pub struct Turn {
    engine: Arc<Engine>,
    id: String,
    session_id: String,
    token: CancellationToken,
}

impl Turn {
    pub(crate) fn new(
        engine: Arc<Engine>,
        id: String,
        session_id: String,
        token: CancellationToken,
    ) -> Turn {
        Turn {
            engine,
            id,
            session_id,
            token,
        }
    }

    /// The turn id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// `output` with its attachments put back as the file parts they replaced (see
    /// [`Session::resolve_attachments`](crate::Session::resolve_attachments)): what the model
    /// loop sends the model for a recorded result.
    pub async fn resolve_attachments(&self, output: &ModelOutput) -> ModelOutput {
        attachments::resolve(&self.engine, &self.session_id, output).await
    }

    /// The results of the last step that closed, as stored with the close: what a host restarted
    /// after a step (or a resumption, or `wake_due`) hands to the model.
    pub async fn last_results(&self) -> Result<Option<ClosedStep>, RuntimeError> {
        Ok(self.record().await?.last_step)
    }

    /// What the toolsets' context providers say about `query`, the message this turn answers:
    /// call it before sending the model the turn's first request and send
    /// [`TurnContext::render`](TurnContext::render) beside the message (it is
    /// marked as data). Providers run at once, each given the query, the session's state, the
    /// acting principal and the host's services; one that does not answer within
    /// [`crate::Options::context_deadline`], fails or panics is skipped, logged and reported as a
    /// `warning` event, never failing the turn.
    pub async fn context(&self, query: &str) -> Result<TurnContext, RuntimeError> {
        let engine = &self.engine;
        if !engine.toolsets().has_context() {
            return Ok(Default::default());
        }
        let turn = self.record().await?;
        let (session, _) = engine.session(&self.session_id).await?;
        let request = ContextRequest::new(
            query,
            &self.session_id,
            turn.current.clone(),
            session.state,
            Arc::clone(engine.services()),
        );
        let context = engine
            .toolsets()
            .context(
                Audience::of(turn.caller),
                request,
                engine.options().context_deadline,
            )
            .await;
        for skipped in &context.skipped {
            tracing::warn!(
                session = %self.session_id,
                turn = %self.id,
                toolset = %skipped.toolset,
                "context provider skipped: {}",
                skipped.reason
            );
            engine.emit(Event::Warning {
                session_id: self.session_id.clone(),
                turn_id: self.id.clone(),
                call_id: None,
                message: format!(
                    "the context provider of toolset `{}` was skipped this turn: {}",
                    skipped.toolset, skipped.reason
                ),
            });
        }
        Ok(context)
    }

    /// The stored record.
    pub async fn record(&self) -> Result<TurnRecord, RuntimeError> {
        Ok(self.engine.turn(&self.id).await?.0)
    }

    /// Runs one step: the batch of calls from one model response, concurrently.
    ///
    /// Calls that need a person park the turn in the store (the returned
    /// [`StepOutcome::Waiting`] lists the requests); calls that may run, run now.
    ///
    /// Dropping the returned future stops waiting, and what happens to the step depends on
    /// what it had to record: a step with a call that is not a plain `read` (or one that
    /// waits for a person) is recorded before its calls run and runs to its close on a task of
    /// its own, however long nobody waits. A step of plain `read` calls records nothing until
    /// it closes, and runs on the caller's task: stopped before its close is written, it leaves
    /// the turn as it was (its `action.requested` events may have been emitted), and the same
    /// calls can be sent again — reads may run twice, as after a crash.
    pub async fn step(&self, calls: Vec<ToolCall>) -> Result<StepOutcome, RuntimeError> {
        self.step_with(calls, StepOptions::new()).await
    }

    /// [`Turn::step`] with what the host supplies for this step's calls (see
    /// [`StepOptions`]), e.g. the model of the client that sent them.
    pub async fn step_with(
        &self,
        calls: Vec<ToolCall>,
        options: StepOptions,
    ) -> Result<StepOutcome, RuntimeError> {
        let begun = crate::pipeline::begin_step(
            &self.engine,
            (&self.id, &self.session_id),
            &self.token,
            calls,
            options,
        )
        .await?;
        let ready = match begun {
            crate::pipeline::Begun::Refused(outcome) => return Ok(outcome),
            crate::pipeline::Begun::Ready(ready) => ready,
        };
        if !ready.must_finish() {
            // Plain reads: nothing is written before the close, so a caller that stops
            // waiting leaves the turn as it was, and the step runs here, without a hand-off.
            return ready.finish().await;
        }
        // On its own task: once the step is recorded as running, a caller that stops waiting (a
        // client that disconnects) must not abandon its calls halfway and leave the turn stuck.
        let engine = Arc::clone(&self.engine);
        // The step's spans stay inside the caller's (a model loop's run).
        let step = async move {
            let outcome = ready.finish().await;
            if let Ok(StepOutcome::Waiting { requests, .. }) = &outcome {
                crate::input::settle::recheck(&engine, requests);
            }
            outcome
        };
        tokio::spawn(step.instrument(tracing::Span::current()))
            .await
            .map_err(|error| RuntimeError::Task(error.to_string()))?
    }

    /// Parks the turn on a [`RequestKind::SessionLimit`](crate::RequestKind::SessionLimit) request: the turn reached a limit
    /// of its budget (steps, tool calls, tokens, cost — counted by the host's model loop).
    /// `prompt` says which limit to the person who answers; `details` is what a client shows
    /// (e.g. the limits and what was used). The conversation `options` carries is appended in
    /// the same write.
    ///
    /// The request is answered like an approval, with [`Runtime::respond`](crate::Runtime::respond)
    /// from any process: approving it resumes the turn (active again; the host extends its
    /// budget); cancelling it, or revoking it with a message, stops the turn (completed with
    /// [`CompletionReason::SessionLimit`], or left active while workflow tasks still owe it
    /// results, for the host to cancel). Either way [`ClosedStep::session_limit`] of the turn's
    /// last step says how it was answered. Cancelling the turn itself cancels it as usual.
    /// Only an active turn can park so.
    pub async fn park_on_limit(
        &self,
        prompt: impl Into<String>,
        details: serde_json::Value,
        options: StepOptions,
    ) -> Result<InputRequest, RuntimeError> {
        crate::pipeline::limit::park_on_limit(
            &self.engine,
            &self.id,
            prompt.into(),
            details,
            options,
        )
        .await
    }

    /// The model-facing tool list for the next model call of this turn, in `format`: the cached
    /// list of the turn's audience (an MCP list's titles in the session's locale) without the conditional tools whose predicate is now false
    /// and the tools a `prepare` fn hides, and with the descriptions `prepare` fns give for
    /// this step (only those tools' entries are exported again).
    pub async fn tool_list(&self, format: Format) -> Result<String, RuntimeError> {
        let engine = &self.engine;
        let registry = engine.registry();
        let turn = self.record().await?;
        let audience = Audience::of(turn.caller);
        // The session is read whatever the tools: it may limit them (a subagent's subset), and
        // its locale picks the titles of an MCP list.
        let (session, _) = engine.session(&turn.session_id).await?;
        let list = match &session.locale {
            Some(locale) => registry.list_in(audience, format, locale),
            None => registry.list(audience, format),
        };
        if session.tools.is_none() && !StepTools::may_differ(engine, &registry) {
            return Ok(list.json().to_owned());
        }
        let StepTools { hidden, described } = step_tools(engine, &registry, &session, &turn);
        if hidden.is_empty() && described.is_empty() {
            return Ok(list.json().to_owned());
        }
        let mut json = String::from("[");
        for entry in list
            .entries()
            .iter()
            .filter(|e| e.tool.is_none_or(|i| !hidden.contains(&i)))
        {
            if json.len() > 1 {
                json.push(',');
            }
            let changed = entry
                .tool
                .and_then(|i| described.iter().find(|(d, _)| *d == i))
                .and_then(|(i, text)| {
                    let tool = registry.tools()[*i].described_for_step(text);
                    // In the session's locale, as the rest of the list is.
                    let locale = (
                        session
                            .locale
                            .as_deref()
                            .unwrap_or(registry.default_locale()),
                        registry.default_locale(),
                    );
                    toolwright_core::export::export_in(&tool, audience, format, locale).0
                });
            match changed {
                Some(value) => json.push_str(&value.to_string()),
                None => json.push_str(entry.json.get()),
            }
        }
        json.push(']');
        Ok(json)
    }

    /// Names of the tools this turn's next step does not offer: tools outside its session's
    /// subset ([`crate::SessionSpec::tools`]), conditional tools (`enabled = ...`) whose
    /// predicate is false and tools a `prepare` fn hides — what [`Turn::tool_list`] leaves out.
    pub async fn unavailable_tools(&self) -> Result<Vec<String>, RuntimeError> {
        let engine = &self.engine;
        let registry = engine.registry();
        let turn = self.record().await?;
        let (session, _) = engine.session(&turn.session_id).await?;
        if session.tools.is_none() && !StepTools::may_differ(engine, &registry) {
            return Ok(Vec::new());
        }
        let mut names: Vec<String> = step_tools(engine, &registry, &session, &turn)
            .hidden
            .into_iter()
            .map(|i| registry.tools()[i].name().to_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Ends the turn (the host's model answered without calling tools).
    ///
    /// Refused with [`RuntimeError::TasksOpen`] while workflow tasks owe the turn results (not
    /// produced yet, or not taken with [`Turn::task_results`]). A host whose turns can be
    /// steered ([`Turn::steer`]) ends them with [`Turn::complete_after`] instead, so that a
    /// message arriving as the turn ends is either delivered or refused, never dropped.
    pub async fn complete(&self) -> Result<(), RuntimeError> {
        self.refuse_while_owed().await?;
        self.write_completed().await
    }

    /// Ends the turn unless messages were steered into it ([`Turn::steer`]) beyond the first
    /// `delivered`, which the host has handed to its model: those are returned, the turn stays
    /// active, and the host sends them to its model and goes on. Returns an empty list once
    /// the turn is completed; from then on [`Turn::steer`] refuses new messages (a message and
    /// this call race for one place in the steering log, and exactly one wins).
    ///
    /// Refused like [`Turn::complete`] while workflow tasks owe the turn results, before
    /// anything is written.
    ///
    /// ```no_run
    /// # async fn demo(turn: toolwright_runtime::Turn) -> Result<(), toolwright_runtime::RuntimeError> {
    /// let mut delivered = 0;
    /// loop {
    ///     let waiting = turn.complete_after(delivered).await?;
    ///     if waiting.is_empty() {
    ///         break; // completed
    ///     }
    ///     delivered += waiting.len();
    ///     // ... send `waiting` to the model as the user's messages and handle its answer ...
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn complete_after(&self, delivered: usize) -> Result<Vec<String>, RuntimeError> {
        self.refuse_while_owed().await?;
        let turn = self.record().await?;
        if turn.status != crate::record::TurnStatus::Active {
            return Err(RuntimeError::TurnState {
                turn: self.id.clone(),
                status: turn.status,
                what: "only an active turn can be completed",
            });
        }
        let waiting =
            crate::steering::close(self.engine.store().as_ref(), &self.id, delivered).await?;
        if !waiting.is_empty() {
            return Ok(waiting);
        }
        self.write_completed().await?;
        Ok(Vec::new())
    }

    /// Refuses to end the turn while workflow tasks owe it results.
    async fn refuse_while_owed(&self) -> Result<(), RuntimeError> {
        let owing = owing(&self.engine, &self.session_id, &self.id).await?;
        if owing.is_empty() {
            return Ok(());
        }
        Err(RuntimeError::TasksOpen {
            turn: self.id.clone(),
            tasks: owing
                .iter()
                .map(|t| format!("{} ({})", t.id, t.status.describe()))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Writes the turn completed by its host.
    async fn write_completed(&self) -> Result<(), RuntimeError> {
        let engine = &self.engine;
        loop {
            let (mut turn, version) = engine.turn(&self.id).await?;
            if let Err(status) = turn.complete() {
                return Err(RuntimeError::TurnState {
                    turn: self.id.clone(),
                    status,
                    what: "only an active turn can be completed",
                });
            }
            match engine.store().put_turn(&turn, Some(version)).await {
                Ok(_) => break,
                Err(StoreError::Conflict(_)) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        engine.emit(Event::TurnCompleted {
            session_id: self.session_id.clone(),
            turn_id: self.id.clone(),
            reason: CompletionReason::Host,
        });
        Ok(())
    }

    /// Cancels the turn: running calls see their cancellation token fire, pending requests are
    /// revoked (`cancelled`), and a later answer to them approves nothing.
    ///
    /// Workflow tasks the turn started are cancelled too, in the background: each body gets its
    /// cleanup window ([`crate::Options::task_cleanup`]).
    pub async fn cancel(&self) -> Result<(), RuntimeError> {
        self.token.cancel();
        let engine = &self.engine;
        cancel_turn(engine, &self.id).await?;
        cancel_tasks_of_turn(engine, &self.session_id, &self.id).await;
        Ok(())
    }

    /// A plain message from the turn's caller while the turn waits: it answers the first
    /// unanswered question; with no question pending, it revokes pending approvals (`ignored`),
    /// and calls of the batch that were already approved still run.
    ///
    /// The message itself is not recorded for the model; [`Turn::steer`] does the same and
    /// records it, and also takes messages while the turn's calls run.
    pub async fn message(&self, text: &str) -> Result<RespondOutcome, RuntimeError> {
        // A plain message answers the first unanswered question, in the turn's caller's name.
        let record = self.record().await?;
        if let Some(question) = pending_question(&record) {
            let response =
                InputResponse::answer(&question.request_id, record.current.clone(), text);
            return crate::input::settle::respond(&self.engine, response, StepOptions::new()).await;
        }
        revoke(&self.engine, &self.id, Outcome::Ignored, text).await
    }

    /// A new message from the user while the turn goes on (steering): it reaches the model
    /// next, and work the model started for the old request stops.
    ///
    /// - While a step runs in this process, the cancellation tokens of its running plain
    ///   calls (durable ones too) and `workflow = execute` bodies fire, and each ends with an
    ///   [`ErrorCode::Interrupted`](toolwright_core::ErrorCode::Interrupted) result for the
    ///   model. `task` and `serve` bodies keep running (they run on tasks of their own, like
    ///   `task_wait`, which keeps waiting); calls that finished keep their results. The step
    ///   closes as usual, without ending the turn: it is not cancelled
    ///   ([`Steered::Interrupted`]). A durable call's journal stays as it was recorded; a new
    ///   call the model makes is a new run.
    /// - While the host asks its model (the turn is active between steps), nothing runs to
    ///   stop ([`Steered::Queued`]).
    /// - While the turn waits, the message answers its first unanswered question
    ///   ([`Steered::Answered`]); else pending approvals are revoked (`ignored`) and calls of
    ///   the batch that were approved already run ([`Steered::Revoked`]), as with
    ///   [`Turn::message`].
    ///
    /// Except when it answers a question (or stops a turn parked on its budget), the message
    /// is recorded in the store before this returns, in the turn's steering log: the host
    /// lists it with [`Turn::steering`] and hands it to its model after the step's results,
    /// from this process or any other (a `turn.steered` event announces it). A host that
    /// steers tells each step how many it delivered ([`StepOptions::steering`]) and ends the
    /// turn with [`Turn::complete_after`]: a message then never arrives as the turn ends
    /// unseen; it keeps the turn going, or it is refused.
    ///
    /// Refused ([`RuntimeError::TurnState`], nothing recorded) when the turn has ended, when
    /// its host gave the final answer already, and when its step runs in another process:
    /// only that process holds its calls' tokens (steer through it, or once the step closed).
    pub async fn steer(&self, text: &str) -> Result<Steered, RuntimeError> {
        crate::input::steer::steer(&self.engine, &self.id, text).await
    }

    /// Every message steered into the turn ([`Turn::steer`]), in the order they were recorded
    /// (one store read). A host delivers those beyond the ones it handed to its model already.
    pub async fn steering(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(
            crate::steering::read(self.engine.store().as_ref(), &self.id)
                .await?
                .messages,
        )
    }

    /// Results of this turn's task calls that have not reached the model yet, marked delivered
    /// as they are returned. Add each [`TaskResult::message`] to the model's history.
    pub async fn task_results(&self) -> Result<Vec<TaskResult>, RuntimeError> {
        take_results(&self.engine, &self.session_id, &self.id, None).await
    }

    /// Like [`Turn::task_results`], for task `task_id` alone (a host that hands each task's
    /// result over on its own, e.g. through the MCP tasks extension).
    pub async fn task_results_of(&self, task_id: &str) -> Result<Vec<TaskResult>, RuntimeError> {
        take_results(&self.engine, &self.session_id, &self.id, Some(task_id)).await
    }

    /// Waits up to `timeout` for task results of this turn and takes them (see
    /// [`Turn::task_results`]). Returns an empty list at the timeout, or at once when no task
    /// owes the turn anything. `Duration::MAX` waits as long as it takes.
    pub async fn wait_task_results(
        &self,
        timeout: Duration,
    ) -> Result<Vec<TaskResult>, RuntimeError> {
        wait_results(
            &self.engine,
            &self.session_id,
            &self.id,
            None,
            timeout,
            &self.token,
        )
        .await
    }

    /// Tasks that still owe this turn a result: while there are any, the turn cannot end.
    pub async fn open_tasks(&self) -> Result<Vec<TaskRecord>, RuntimeError> {
        owing(&self.engine, &self.session_id, &self.id).await
    }
}
