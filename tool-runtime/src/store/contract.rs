//! The store contract: the [`Store`] trait every backend implements, and the types of its
//! writes, claims and errors.

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::future::BoxFuture;

use toolwright_core::{Principal, PrincipalType};

use super::error::{LeaseKind, StoreError};
use super::page::{
    Page, PageRequest, SessionSummary, TaskFilter, TaskSummary, TurnFilter, TurnSummary, not_listed,
};
use crate::record::{
    AttachmentRecord, ClosedStep, ConversationEntry, JournalEntry, PinRecord, SessionRecord,
    StepPatch, TaskRecord, TurnRecord,
};

/// The requester of calls made on behalf of nobody in particular (a turn without a `current`
/// principal): such calls share their grants with each other, and with nobody else.
pub const ANONYMOUS_REQUESTER: &str = "anonymous";

/// The requester of `once` grants remembered by a toolwright that did not record requesters
/// (SQLite schema 4 and older, Postgres schema 2 and older) in a session where more than one
/// requester acted, or none did. It matches no call: those grants cover nobody, and each
/// requester is asked again once. (In a session where exactly one requester acted, the
/// migration gives that requester the session's grants: they were given for their calls.)
pub const UNKNOWN_REQUESTER: &str = "unknown";

/// The key under which a store remembers the `once` grants of `requester` (see
/// [`Store::remember_approval`]): its type, authenticator, issuer and id, the way
/// [`Principal::same_as`] compares them (attributes are not part of an identity), or
/// [`ANONYMOUS_REQUESTER`] for `None`. `%`, `:` and `@` inside a part are written `%25`, `%3A`
/// and `%40`, so two different identities never share a key.
///
/// ```
/// use toolwright_core::Principal;
/// use toolwright_runtime::store::requester_key;
///
/// assert_eq!(requester_key(Some(&Principal::user("oidc", "alice"))), "user:oidc:alice");
/// assert_eq!(requester_key(None), "anonymous");
/// ```
pub fn requester_key(requester: Option<&Principal>) -> String {
    let Some(principal) = requester else {
        return ANONYMOUS_REQUESTER.to_owned();
    };
    let escape = |part: &str| {
        part.replace('%', "%25")
            .replace(':', "%3A")
            .replace('@', "%40")
    };
    let kind = match principal.principal_type {
        PrincipalType::User => "user",
        PrincipalType::Runtime => "runtime",
        PrincipalType::Service => "service",
    };
    let issuer = principal
        .issuer
        .as_deref()
        .map(|issuer| format!("@{}", escape(issuer)))
        .unwrap_or_default();
    format!(
        "{kind}:{}{issuer}:{}",
        escape(&principal.authenticator),
        escape(&principal.principal_id)
    )
}

/// The error for a patch that does not fit the turn it was written for: no parked step of its
/// index, or no such request in it.
pub(crate) fn unpatchable(turn_id: &str, patch: &StepPatch) -> StoreError {
    StoreError::Corrupt {
        id: turn_id.to_owned(),
        error: format!(
            "the answer to request `{}` belongs to step {}, which the turn does not hold parked",
            patch.request.request_id, patch.step
        ),
    }
}

/// One instance's claim on the running work of a record, with its fencing token.
///
/// A claim write ([`Claim::Take`], [`Claim::TakeOver`]) gives the record a new token, one more
/// than the last; writes and journal records made under the lease carry it, and the store
/// refuses them with [`StoreError::Fenced`] once another claim has replaced it. The holder
/// renews the lease ([`Store::renew_leases`]); one that is not renewed within its time to live
/// expires, and another instance may take the work over.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    /// A turn or a task.
    pub kind: LeaseKind,
    /// The record's id.
    pub id: String,
    /// The instance holding it (see [`crate::Options::instance`]).
    pub owner: String,
    /// The fencing token: grows by one at every claim of the record.
    pub token: u64,
}

/// What a record write does with the record's lease.
#[derive(Debug, Clone, Copy)]
pub enum Claim<'a> {
    /// A plain versioned write: the lease, if any, stays as it is.
    None,
    /// The write claims the record's work for `owner`: in the same transaction the record gets
    /// a new fencing token and a lease expiring after `ttl`. The versioned write is what makes
    /// the claim exclusive (only one writer of version `v` wins).
    Take {
        /// The claiming instance.
        owner: &'a str,
        /// How long the lease lasts unless renewed.
        ttl: Duration,
    },
    /// Like [`Claim::Take`], but only when the record's current lease has expired (or it has
    /// none): how an instance takes over the work of one that stopped renewing. Otherwise the
    /// write is refused with [`StoreError::Conflict`] and changes nothing.
    TakeOver {
        /// The claiming instance.
        owner: &'a str,
        /// How long the lease lasts unless renewed.
        ttl: Duration,
    },
    /// A write by the holder of `lease`: refused with [`StoreError::Fenced`] (changing nothing)
    /// when the record's token is no longer the lease's.
    Keep(&'a Lease),
}

/// What [`Store::turn_since`] and [`Store::session_since`] answer for a record the caller
/// holds at a version: `None` when the record is gone; otherwise its version now, with the
/// record as stored when that version is not the caller's (`None` when it is: nothing to read).
pub type Since<T> = Option<(Option<T>, u64)>;

/// What [`Store::step_since`] answers: [`Since`] for the turn and for its session.
pub type StepSince = (Since<TurnRecord>, Since<SessionRecord>);

/// What a record write stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The record's new version.
    pub version: u64,
    /// The lease the write took, for [`Claim::Take`] and [`Claim::TakeOver`].
    pub lease: Option<Lease>,
}

/// Messages a turn write appends to its session's conversation (see
/// [`Store::write_turn_appending`]): at positions `first`, `first + 1`, ...
#[derive(Clone, Copy, Debug, Default)]
pub struct Appended<'a> {
    /// The position of the first message.
    pub first: u64,
    /// The messages, as the model loop encoded them.
    pub messages: &'a [serde_json::Value],
}

/// What a full read (`read`: a record with its version, or none) tells a reader holding
/// version `known`: the version, with the record unless it is the known one (see
/// [`Store::turn_since`]).
pub(crate) fn since<T>(read: Option<(T, u64)>, known: u64) -> Since<T> {
    read.map(|(record, version)| ((version != known).then_some(record), version))
}

/// What one call of [`Store::delete_session`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deleted {
    /// Turns, each with its request index rows, recorded answers and journals (its durable and
    /// workflow calls', its steering log, the hooks its calls made).
    pub turns: u64,
    /// Workflow tasks, each with its request index rows.
    pub tasks: u64,
    /// Whether the session is gone: its last records (grants, conversation, attachments and the
    /// session itself) went with this call.
    pub done: bool,
}

/// Which finished turns a retention sweep deletes ([`Store::sweep_turns`]): those that finished
/// more than `older_than` ago by the store's clock, and those beyond the newest `keep` finished
/// turns of their session. `None` for both selects nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TurnRetention {
    /// How long a finished turn is kept.
    pub older_than: Option<Duration>,
    /// How many finished turns each session keeps, the newest.
    pub keep: Option<usize>,
}

/// What a store that keeps no conversation answers the model loop.
fn keeps_no_conversation(session_id: &str) -> StoreError {
    StoreError::Backend(format!(
        "this store keeps no conversations (it does not implement `Store::append_conversation` \
         and `Store::write_turn_appending`), so session `{session_id}` cannot be driven by the \
         model loop; use the SQLite or Postgres store"
    ))
}

/// A durable backend for the runtime. Implementations: [`SqliteStore`](super::SqliteStore) (embedded, one file) and,
/// for several instances, Postgres. [`conformance::run`](super::conformance::run) checks an implementation.
///
/// Versions: a record read with version `v` is written back with `expected = Some(v)`; the store
/// refuses the write with [`StoreError::Conflict`] if the stored version is not `v`, and stores it
/// with version `v + 1`. `expected = None` inserts and fails with a conflict if the record exists;
/// a versioned write to a record that does not exist is a conflict too. A refused write changes
/// nothing (record, version, request index, order of waiting turns). `waiting_turns` lists turns
/// oldest-written first. A request id belongs to the turn whose write last added it (a write
/// that keeps a request the turn held already does not index it again: answering one request
/// of a step costs the same however many the step holds).
pub trait Store: Send + Sync + 'static {
    /// The session `id`, with its version.
    fn session(&self, id: &str) -> BoxFuture<'_, Result<Option<(SessionRecord, u64)>, StoreError>>;

    /// Writes a session (see the trait docs for `expected`). Returns the new version.
    fn put_session<'a>(
        &'a self,
        record: &'a SessionRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// The turn `id`, with its version.
    fn turn(&self, id: &str) -> BoxFuture<'_, Result<Option<(TurnRecord, u64)>, StoreError>>;

    /// The version of turn `id` and, unless it is `known` (the version of a copy the caller
    /// holds, which is then the turn), the turn; `None` when there is no such turn. A backend
    /// that can compare the version without decoding the record should. The runtime keeps the
    /// turns it stepped and checks its copy so at the start of the next step. The default
    /// reads the turn and compares.
    // The answer is spelt with the types of `Store::turn`, so the public surface gains no type.
    fn turn_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<TurnRecord>, StoreError>> {
        let read = self.turn(id);
        Box::pin(async move { Ok(since(read.await?, known)) })
    }

    /// [`Store::turn_since`] for session `id`. The default reads the session and compares.
    fn session_since(
        &self,
        id: &str,
        known: u64,
    ) -> BoxFuture<'_, Result<Since<SessionRecord>, StoreError>> {
        let read = self.session(id);
        Box::pin(async move { Ok(since(read.await?, known)) })
    }

    /// [`Store::turn_since`] for turn `turn.0` at version `turn.1` and
    /// [`Store::session_since`] for session `session.0` at version `session.1`, as a step
    /// starts from the copies the runtime kept. A backend that can ask both in one round trip
    /// (one hop to its connection, one query) should. The default asks both at once.
    fn step_since(
        &self,
        turn: (&str, u64),
        session: (&str, u64),
    ) -> BoxFuture<'_, Result<StepSince, StoreError>> {
        let turn = self.turn_since(turn.0, turn.1);
        let session = self.session_since(session.0, session.1);
        Box::pin(async move {
            let (turn, session) = futures_util::future::join(turn, session).await;
            Ok((turn?, session?))
        })
    }

    /// Writes a turn and indexes the requests it adds by id, doing `claim` with its lease in the
    /// same transaction. The index only grows: a request id stays resolvable to its turn after
    /// its step closes.
    fn write_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>>;

    /// [`Store::write_turn`] without a lease: returns the new version.
    fn put_turn<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            Ok(self
                .write_turn(record, expected, Claim::None)
                .await?
                .version)
        })
    }

    /// Records what answering one request changed in turn `turn_id`'s parked step, if the turn
    /// is still at version `expected`: the store keeps `patch` beside the turn and gives the
    /// turn version `expected + 1` (and a new place in the write order of
    /// [`Store::waiting_turns`]) without writing the turn again, so the cost of an answer does
    /// not grow with the step. A turn at another version, or none, is a
    /// [`StoreError::Conflict`] and nothing changes.
    ///
    /// Reading the turn ([`Store::turn`]) returns it with its patches applied
    /// ([`TurnRecord::apply`]) in the order they were recorded; the next [`Store::write_turn`]
    /// replaces the turn with a record that holds them, and the patches are dropped in the same
    /// transaction. The default reads the turn, applies the patch and writes it back: correct,
    /// and as costly as the step is big.
    fn settle_request<'a>(
        &'a self,
        turn_id: &'a str,
        patch: &'a StepPatch,
        expected: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let Some((mut turn, version)) = self.turn(turn_id).await? else {
                return Err(StoreError::Conflict(turn_id.to_owned()));
            };
            if version != expected {
                return Err(StoreError::Conflict(turn_id.to_owned()));
            }
            if !turn.apply(patch) {
                return Err(unpatchable(turn_id, patch));
            }
            self.put_turn(&turn, Some(expected)).await
        })
    }

    /// The id of the turn that holds request `request_id`.
    fn turn_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// Ids of turns waiting for input, oldest first.
    fn waiting_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Ids of turns whose parked step was claimed for execution (`running`), oldest first. After
    /// a crash these are the calls whose result is unknown.
    fn running_turns(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// The journal of durable run `run_id`, in position order.
    fn journal(&self, run_id: &str) -> BoxFuture<'_, Result<Vec<JournalEntry>, StoreError>>;

    /// Appends `entry` to run `run_id`'s journal. A position already recorded is a
    /// [`StoreError::Conflict`] (another process recorded it first; read the journal again and
    /// use its value), so a position is recorded exactly once. With a `fence`, the entry is
    /// recorded only while the fenced record's token is still the lease's, checked in the same
    /// transaction ([`StoreError::Fenced`] otherwise): an instance whose work was taken over
    /// cannot add to the journal.
    fn record_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
        fence: Option<&'a Lease>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Runs `work` inside a transaction of this store's database and, in the same transaction,
    /// records its value as step `name` at `position` of run `run_id` (under `fence`, as
    /// [`Store::record_journal`]): the work's writes and the record commit together or not at
    /// all. A position already recorded is a [`StoreError::Conflict`] and `work` does not run
    /// (or its writes roll back). When `work` fails, the transaction rolls back and its error
    /// is returned inside `Ok`. Stores without such transactions refuse (the default).
    fn journal_in_transaction<'a>(
        &'a self,
        run_id: &'a str,
        position: u32,
        name: &'a str,
        fence: Option<&'a Lease>,
        work: toolwright_core::StoreWork,
    ) -> BoxFuture<'a, Result<Result<serde_json::Value, toolwright_core::ToolError>, StoreError>>
    {
        let _ = (run_id, position, fence);
        drop(work);
        Box::pin(std::future::ready(Err(StoreError::Backend(format!(
            "step `{name}` must commit with the store's own transaction, and this store cannot \
             run work inside its transactions; use the Postgres store for such steps"
        )))))
    }

    /// [`Store::record_journal`] without a fence.
    fn append_journal<'a>(
        &'a self,
        run_id: &'a str,
        entry: &'a JournalEntry,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.record_journal(run_id, entry, None)
    }

    /// Records that `key` is approved in session `session_id` for the calls made on behalf of
    /// `requester` (what `once` remembers). `requester` is [`requester_key`] of the principal
    /// the approved call ran for: one person's grant never covers another person's call.
    fn remember_approval<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The approval keys remembered in session `session_id` for `requester` (a
    /// [`requester_key`]), and only those: another requester's grants are not listed.
    fn approvals<'a>(
        &'a self,
        session_id: &'a str,
        requester: &'a str,
    ) -> BoxFuture<'a, Result<BTreeSet<String>, StoreError>>;

    /// The conversation of session `session_id` (what the model loop stored), in position
    /// order; empty for a session without one.
    ///
    /// The default is empty: a store that keeps no conversation (it does not override
    /// [`Store::append_conversation`]) never has one to return.
    fn conversation(
        &self,
        session_id: &str,
    ) -> BoxFuture<'_, Result<Vec<ConversationEntry>, StoreError>> {
        let _ = session_id;
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Appends `messages` to session `session_id`'s conversation at positions `first`,
    /// `first + 1`, ..., as added by turn `turn_id`, in one transaction. Rows are only ever
    /// appended, never rewritten: a position already recorded is a [`StoreError::Conflict`] and
    /// nothing is written (another process appended first; read the conversation again).
    ///
    /// The default refuses (as [`Store::write_turn_appending`] does with messages): a store
    /// written before the model loop keeps compiling and serves everything but the loop, which
    /// fails with this error instead of losing its conversation.
    fn append_conversation<'a>(
        &'a self,
        session_id: &'a str,
        turn_id: &'a str,
        first: u64,
        messages: &'a [serde_json::Value],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (turn_id, first, messages);
        Box::pin(std::future::ready(Err(keeps_no_conversation(session_id))))
    }

    /// [`Store::write_turn`] that also appends `appended`'s messages to the conversation of the
    /// turn's session, as added by the turn, in the same transaction: the write and the
    /// messages commit together or not at all. A position already recorded is a
    /// [`StoreError::Conflict`], like a stale `expected`, and nothing is written. The runtime
    /// writes a step's first record with it, so a turn whose step is recorded has the
    /// messages that asked for the step (the model's calls), and one whose step is not has
    /// neither.
    ///
    /// The default writes the turn when there is nothing to append and refuses otherwise (see
    /// [`Store::append_conversation`]): two separate writes would break that guarantee.
    fn write_turn_appending<'a>(
        &'a self,
        record: &'a TurnRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
        appended: Appended<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>> {
        if appended.messages.is_empty() {
            return self.write_turn(record, expected, claim);
        }
        Box::pin(std::future::ready(Err(keeps_no_conversation(
            &record.session_id,
        ))))
    }

    /// Whether this store keeps attachments ([`Store::put_attachment`]). The default is
    /// `false`: the runtime then leaves files inline in results, as a store written before
    /// attachments expects.
    fn keeps_attachments(&self) -> bool {
        false
    }

    /// Stores `record`, keyed by its session and id. Storing an id the session has already is
    /// a no-op (the id is the digest of the bytes: it is the same file), so two calls that
    /// return the same file, or two instances racing, store it once.
    ///
    /// The default refuses: see [`Store::keeps_attachments`].
    fn put_attachment<'a>(
        &'a self,
        record: &'a AttachmentRecord,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(Err(StoreError::Backend(format!(
            "this store keeps no attachments (it does not implement `Store::put_attachment`),              so `{}` of session `{}` cannot be stored; use the SQLite or Postgres store",
            record.id, record.session_id
        )))))
    }

    /// The attachment `id` of session `session_id`, if it is stored. The default has none.
    fn attachment<'a>(
        &'a self,
        session_id: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<AttachmentRecord>, StoreError>> {
        let _ = (session_id, id);
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Deletes every attachment record of session `session_id` (with the bytes kept in the
    /// store); returns how many there were. The default has none to delete.
    fn delete_attachments<'a>(
        &'a self,
        session_id: &'a str,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let _ = session_id;
        Box::pin(std::future::ready(Ok(0)))
    }

    /// Deletes session `session_id` and everything it holds, at most `batch` turns and `batch`
    /// tasks per transaction: call it again until [`Deleted::done`]. The session's own record
    /// goes last, with its grants, conversation and attachment records, so a deletion cut short
    /// (a crash, an error) is finished by calling again. A session that is not stored is done at
    /// once.
    ///
    /// Refused with [`StoreError::Busy`], deleting nothing, while the session has a turn that is
    /// active, waiting or running, or a task that has not ended: they still need it.
    ///
    /// The default refuses: a store written before deletion keeps everything.
    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        batch: usize,
    ) -> BoxFuture<'a, Result<Deleted, StoreError>> {
        let _ = batch;
        Box::pin(std::future::ready(Err(StoreError::Backend(format!(
            "this store cannot delete sessions (it does not implement `Store::delete_session`), \
             so session `{session_id}` is kept; use the SQLite or Postgres store"
        )))))
    }

    /// One batch of retention: deletes at most `batch` finished turns (completed or cancelled)
    /// that `rule` selects, oldest first, each with its request index rows, answers and
    /// journals (as [`Store::delete_session`] does), and the tasks they started once those have
    /// ended. A turn a task still needs is kept: one whose task (started by the turn, or holding
    /// a call of it) has not ended, or has a result not yet delivered. The session's
    /// conversation, grants and attachments stay: they are the session's, and go with it.
    /// Returns what was deleted, `done` when the batch was not full.
    ///
    /// The default deletes nothing.
    fn sweep_turns(
        &self,
        rule: TurnRetention,
        batch: usize,
    ) -> BoxFuture<'_, Result<Deleted, StoreError>> {
        let _ = (rule, batch);
        Box::pin(std::future::ready(Ok(Deleted {
            done: true,
            ..Deleted::default()
        })))
    }

    /// At most `limit` sessions, least recently active first, that have been idle for more
    /// than `older_than` by the store's clock: every turn finished and every task ended before
    /// then, and the session record not written since. What [`Store::delete_session`] then
    /// deletes. The default lists none.
    fn idle_sessions(
        &self,
        older_than: Duration,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<String>, StoreError>> {
        let _ = (older_than, limit);
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// The pinned definitions of connection `connection`'s tools.
    fn pins(&self, connection: &str) -> BoxFuture<'_, Result<Vec<PinRecord>, StoreError>>;

    /// Pins `pin` if the tool's stored pin has digest `replacing` (`None`: it has no pin yet).
    /// Returns whether it was written: `false` when another pin is there (a concurrent approval,
    /// or a first pin by another instance); read the pins again.
    fn pin<'a>(
        &'a self,
        pin: &'a PinRecord,
        replacing: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The task `id`, with its version.
    fn task(&self, id: &str) -> BoxFuture<'_, Result<Option<(TaskRecord, u64)>, StoreError>>;

    /// Writes a task (versions and claims as for turns) and indexes its requests by id, like
    /// [`Store::write_turn`].
    fn write_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
        claim: Claim<'a>,
    ) -> BoxFuture<'a, Result<Written, StoreError>>;

    /// [`Store::write_task`] without a lease: returns the new version.
    fn put_task<'a>(
        &'a self,
        record: &'a TaskRecord,
        expected: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            Ok(self
                .write_task(record, expected, Claim::None)
                .await?
                .version)
        })
    }

    /// The id of the task that holds request `request_id`.
    fn task_of_request(
        &self,
        request_id: &str,
    ) -> BoxFuture<'_, Result<Option<String>, StoreError>>;

    /// Ids of the tasks of session `session_id`, oldest first.
    fn session_tasks(&self, session_id: &str) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Ids of the tasks that have not ended (neither `finished` nor `cancelled`), oldest first:
    /// what recovery and timers look at.
    fn open_tasks(&self) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// One page of the store's sessions, most recently written first (by the time of the last
    /// write of the session record, [`SessionSummary::updated_ms`]; sessions written in the
    /// same millisecond by their id, highest first). See [`PageRequest`] for the limits and
    /// [`super::page`] for what writes between pages do.
    ///
    /// The default refuses with [`StoreError::Backend`] naming the method: a store written
    /// before the listings keeps compiling, and lists nothing.
    fn list_sessions<'a>(
        &'a self,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<SessionSummary>, StoreError>> {
        let _ = page;
        Box::pin(std::future::ready(Err(not_listed("list_sessions"))))
    }

    /// One page of the store's turns that `filter` selects (of one session, in one status),
    /// most recently written first: by [`TurnSummary::position`], highest first (an answer
    /// recorded with [`Store::settle_request`] is a write). The inbox of a console lists the
    /// `waiting` ones. Limits and cursors as [`Store::list_sessions`]'s.
    ///
    /// The default refuses, as [`Store::list_sessions`]'s.
    fn list_turns<'a>(
        &'a self,
        filter: &'a TurnFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TurnSummary>, StoreError>> {
        let _ = (filter, page);
        Box::pin(std::future::ready(Err(not_listed("list_turns"))))
    }

    /// The closed steps of turn `turn_id`, oldest first (by [`ClosedStep::index`]), a page at
    /// a time: a turn's timeline, as a console shows it. A [`TurnRecord`] holds only its last
    /// closed step ([`TurnRecord::last_step`]); the store keeps every one.
    ///
    /// What is kept: each [`ClosedStep`] a turn write carried as `last_step`, one per index. It
    /// is written by [`Store::write_turn`] (and [`Store::write_turn_appending`], and
    /// [`Store::put_turn`]) in the same transaction as the turn, so a turn whose write
    /// committed has its step listed and one whose write was refused (a conflict, a claim
    /// that does not hold) has nothing new. A write that carries a step of an index already
    /// kept replaces it: the history holds each step in the form the turn last wrote it
    /// (a step closed again, e.g. by a cancel that won the write, keeps its latest results).
    /// A write without a `last_step`, or with the one the previous write carried unchanged,
    /// adds nothing. Answers recorded with [`Store::settle_request`] change no closed step.
    ///
    /// A page holds at most [`PageRequest::limit`] steps (the limit checked with
    /// [`PageRequest::checked_limit`]: 0 or above [`MAX_PAGE_LIMIT`](super::MAX_PAGE_LIMIT) is
    /// a [`StoreError::Invalid`]); [`Page::next`] is the last step's index as the cursor's
    /// text, and the next page starts after it. A turn that is not stored, or has no closed
    /// step, gives an empty page.
    ///
    /// The steps are deleted with their turn: by [`Store::delete_session`] and by the sweeps
    /// of [`Store::sweep_turns`], in the transaction that deletes the turn.
    ///
    /// The default refuses, as [`Store::list_sessions`]'s: a store written before the history
    /// keeps compiling, and lists no steps.
    fn turn_steps<'a>(
        &'a self,
        turn_id: &'a str,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<ClosedStep>, StoreError>> {
        let _ = (turn_id, page);
        Box::pin(std::future::ready(Err(not_listed("turn_steps"))))
    }

    /// One page of the store's workflow tasks that `filter` selects (of one session, only the
    /// open ones), most recently created first: a task keeps its place, the one it was
    /// created at, however often it is written. Limits and cursors as
    /// [`Store::list_sessions`]'s.
    ///
    /// The default refuses, as [`Store::list_sessions`]'s.
    fn list_tasks<'a>(
        &'a self,
        filter: &'a TaskFilter,
        page: &'a PageRequest,
    ) -> BoxFuture<'a, Result<Page<TaskSummary>, StoreError>> {
        let _ = (filter, page);
        Box::pin(std::future::ready(Err(not_listed("list_tasks"))))
    }

    /// Extends each lease of `held` that is still current (the record still running, with the
    /// lease's owner and token) to expire `ttl` from now, and returns those. A lease missing
    /// from the answer was taken over by another instance, or its work left the running state.
    /// Only the leases named are renewed: work a crashed runner left behind under the same
    /// owner expires, and another instance (or this one's worker) takes it over.
    fn renew_leases<'a>(
        &'a self,
        held: &'a [Lease],
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>>;

    /// Running work whose lease has expired (or that has none): turns `running` and tasks
    /// `running` or `cancelling` that no live instance renews, oldest first. Another instance
    /// takes each over with [`Claim::TakeOver`].
    fn expired_leases(&self) -> BoxFuture<'_, Result<Vec<(LeaseKind, String)>, StoreError>>;

    /// Turns waiting on a durable timer due at `now_ms` (Unix milliseconds) or earlier, soonest
    /// first. A turn is due when one of its parked step's calls sleeps until then
    /// ([`TurnRecord::wake_at`]).
    fn due_turns(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Tasks sleeping until `now_ms` or earlier ([`TaskRecord::wake_at`]), soonest first.
    fn due_tasks(&self, now_ms: u64) -> BoxFuture<'_, Result<Vec<String>, StoreError>>;

    /// Resolves when another process may have changed a record this one waits for (a task's
    /// result or end, a wake-up time coming due: Postgres delivers these with `LISTEN/NOTIFY`),
    /// or after `timeout` at the latest. Nothing may depend on the early wake-up: a backend without
    /// notifications just sleeps, and callers poll.
    ///
    /// The callers of `changed` share what they have seen: a change that ends one call does not
    /// end the next, whoever makes it. A waiter that reads the store between waits, beside other
    /// waiters, keeps a [`ChangeMark`] of its own with [`Store::changed_since`] instead.
    fn changed(&self, timeout: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(timeout))
    }

    /// Where the store's change notices are now: the mark a waiter takes before its first read
    /// of what it waits for, for [`Store::changed_since`]. The default knows no notices.
    fn change_mark(&self) -> ChangeMark {
        ChangeMark::default()
    }

    /// As [`Store::changed`], for one waiter that keeps its own `mark` (taken with
    /// [`Store::change_mark`] before its first read): resolves at once when a change was heard,
    /// or a wake-up time came, after `mark`, even when it woke another waiter of the store
    /// meanwhile; else when one is, or after `timeout`. Then `mark` holds what the waiter has
    /// seen, and the waiter reads the store. Dropped before it resolves, it leaves `mark` as it
    /// was. The default is [`Store::changed`]; a store that wraps another delegates both this
    /// and [`Store::change_mark`], or neither.
    fn changed_since<'a>(
        &'a self,
        mark: &'a mut ChangeMark,
        timeout: Duration,
    ) -> BoxFuture<'a, ()> {
        let _ = mark;
        self.changed(timeout)
    }
}

/// What one waiter has seen of a store's change notices ([`Store::changed_since`]): each waiter
/// keeps its own, so a notice that wakes one waiter is not lost to another that was busy
/// reading when it came. A store that sends notices counts them; a mark is how many the waiter
/// has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChangeMark {
    seen: u64,
}

impl ChangeMark {
    /// A mark of `seen` changes of the store's count.
    pub const fn new(seen: u64) -> Self {
        ChangeMark { seen }
    }

    /// How many of the store's changes the waiter has seen.
    pub const fn seen(self) -> u64 {
        self.seen
    }
}

/// Applies `change` to session `id`'s record and writes it, reading and applying it again when
/// another writer got there first, until one write holds. `false` when there is no such
/// session.
pub(crate) async fn update_session(
    store: &dyn Store,
    id: &str,
    change: impl Fn(&mut SessionRecord),
) -> Result<bool, StoreError> {
    loop {
        let Some((mut record, version)) = store.session(id).await? else {
            return Ok(false);
        };
        change(&mut record);
        match store.put_session(&record, Some(version)).await {
            Ok(_) => return Ok(true),
            Err(StoreError::Conflict(_)) => continue,
            Err(error) => return Err(error),
        }
    }
}
