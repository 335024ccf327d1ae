//! The store test suite, written once for every backend.
//!
//! A backend's tests call [`run`] on a store (or one part, to see at once which contract
//! breaks). Failures panic like test assertions, naming the part and the broken expectation.
//!
//! ```no_run
//! use toolwright_runtime::SqliteStore;
//! use toolwright_runtime::store::conformance;
//!
//! # async fn demo() {
//! let store = SqliteStore::in_memory().expect("a memory store");
//! conformance::run(&store).await;
//! # }
//! ```
//!
//! Every part writes under ids unique to the call and reads back only what it wrote, so the
//! suite runs on a store shared with other data, and twice on the same store.
//!
//! Besides the [`Store`] docs, the suite holds every backend to these rules:
//!
//! - a versioned write (`expected = Some(v)`) of a record that does not exist is a conflict;
//! - a refused write changes nothing: not the record, not its version, not the request index,
//!   not the order of waiting turns;
//! - a request id belongs to the turn whose write last added it (a write need not index again
//!   the requests its turn held already), and stays resolvable to it after the turn drops it;
//! - `waiting_turns` lists turns least recently written first (an answer recorded with
//!   `settle_request` is a write);
//! - approvals need no session record, and are kept per session and per requester;
//! - a session's conversation is appended at free positions only, all of an append or none;
//! - an attachment is stored once per session and id, and deleted with its session's;
//! - deleting a session is refused while a turn or task of it is not over, goes in batches,
//!   and takes every record of the session (journals of its turns' runs, hooks and steering
//!   logs included) and nothing of another's;
//! - a retention sweep takes finished turns only, never one a task still needs (part
//!   [`retention`], which sweeps store-wide and so runs on a store of its own, not in [`run`]);
//! - the listings ([`listings`]) are newest first, bounded, refuse limits out of range and
//!   cursors of other listings, and list a record left alone between pages exactly once;
//! - a turn's closed steps ([`steps`]) are kept one per index in the form the turn's write last
//!   carried, written with the turn or not at all, listed oldest first a page at a time, and
//!   deleted with the turn (by deleting its session, or by a retention sweep);
//! - records come back equal to what was written, including any text (a NUL character too).

use crate::store::Store;

mod answers;
mod approvals;
mod attachments;
mod conversation;
mod delete;
pub(in crate::store) mod fixtures;
mod leases;
mod listings;
mod part;
mod pins;
mod races;
mod requests;
mod retention;
mod round_trip;
mod sessions;
mod steps;
mod tasks;
mod timers;
mod turns;
mod waiting;

pub use answers::answers;
pub use approvals::approvals;
pub use attachments::attachments;
pub use conversation::conversation;
pub use delete::delete;
pub use leases::leases;
pub use listings::listings;
pub use pins::pins;
pub use races::races;
pub use requests::requests;
pub use retention::retention;
pub use round_trip::round_trip;
pub use sessions::sessions;
pub use steps::steps;
pub use tasks::tasks;
pub use timers::timers;
pub use turns::turns;
pub use waiting::waiting;

/// Runs every part of the suite on `store`, in order.
pub async fn run(store: &dyn Store) {
    sessions(store).await;
    turns(store).await;
    answers(store).await;
    requests(store).await;
    waiting(store).await;
    approvals(store).await;
    round_trip(store).await;
    races(store).await;
    tasks(store).await;
    leases(store).await;
    timers(store).await;
    pins(store).await;
    conversation(store).await;
    attachments(store).await;
    delete(store).await;
    listings(store).await;
    steps(store).await;
}
