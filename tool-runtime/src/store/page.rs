//! Bounded listings of a store's records, for consoles and other readers that show many:
//! the page a caller asks for ([`PageRequest`]), the page it gets ([`Page`]), the cursor that
//! leads to the next one ([`Cursor`]), what the listings may be narrowed to ([`TurnFilter`],
//! [`TaskFilter`]) and what they list ([`SessionSummary`], [`TurnSummary`], [`TaskSummary`]:
//! read from the rows' columns, no record decoded).
//!
//! Listings are keyset listings, most recently written first: a cursor is the position of the
//! last item of a page, and the next page starts below it. So a page costs the same however
//! deep the listing goes, and writes between pages move nothing: a record written after a page
//! was read (new, or rewritten, which moves it to the top) may appear on a later page or not,
//! but a record present and unwritten throughout is listed exactly once.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::StoreError;
use crate::record::{TaskStatus, TurnStatus};

/// The most items one page may hold: a [`PageRequest`] asking for more is refused.
pub const MAX_PAGE_LIMIT: usize = 1_000;

/// Where a listing goes on: the position of the last item of a page, as the store that served
/// the page wrote it. Opaque: pass on the [`Page::next`] of the previous page as it came
/// (it may travel as text, e.g. in a URL, through [`Cursor::as_str`] and [`Cursor::new`]).
/// A cursor belongs to the listing that made it: given to another listing, it is refused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cursor(String);

impl Cursor {
    /// A cursor from its text: one a store gave out earlier ([`Cursor::as_str`]), or, in a
    /// store's own implementation of the listings, the position it writes.
    pub fn new(text: impl Into<String>) -> Cursor {
        Cursor(text.into())
    }

    /// The cursor's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which page of a listing to read: the first (`after` is `None`) or the one after the page
/// whose [`Page::next`] is `after`, holding at most `limit` items.
///
/// `limit` must be between 1 and [`MAX_PAGE_LIMIT`]: a store refuses any other with
/// [`StoreError::Invalid`] (see [`PageRequest::checked_limit`]) rather than serving a page of
/// another size than asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRequest {
    /// The [`Page::next`] of the previous page; `None` for the first page.
    pub after: Option<Cursor>,
    /// The most items the page may hold, 1 to [`MAX_PAGE_LIMIT`].
    pub limit: usize,
}

impl PageRequest {
    /// The first page, of at most `limit` items.
    pub fn first(limit: usize) -> PageRequest {
        PageRequest { after: None, limit }
    }

    /// The page after the one whose [`Page::next`] is `cursor`, of at most `limit` items.
    pub fn after(cursor: Cursor, limit: usize) -> PageRequest {
        PageRequest {
            after: Some(cursor),
            limit,
        }
    }

    /// `limit` when it is between 1 and [`MAX_PAGE_LIMIT`], else the [`StoreError::Invalid`]
    /// a store answers (every listing checks it first).
    pub fn checked_limit(&self) -> Result<usize, StoreError> {
        if (1..=MAX_PAGE_LIMIT).contains(&self.limit) {
            Ok(self.limit)
        } else {
            Err(StoreError::Invalid(format!(
                "a page holds 1 to {MAX_PAGE_LIMIT} items, and {} were asked for; ask for a \
                 limit in that range and follow `Page::next` for the rest",
                self.limit
            )))
        }
    }
}

/// One page of a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The items, in the listing's order (most recently written first; a turn's steps,
    /// [`Store::turn_steps`](super::Store::turn_steps), oldest first); at most the request's
    /// limit.
    pub items: Vec<T>,
    /// The cursor of the next page ([`PageRequest::after`]), or `None` when this page is the
    /// listing's last.
    pub next: Option<Cursor>,
}

/// A session as listed by [`Store::list_sessions`](super::Store::list_sessions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// Its version (as [`Store::session`](super::Store::session) returns it).
    pub version: u64,
    /// When the session record was last written, in Unix milliseconds by the writer's clock
    /// (the SQLite store: the writing process's; the Postgres store: the server's); `None`
    /// for a store that does not keep it.
    pub updated_ms: Option<u64>,
}

/// A turn as listed by [`Store::list_turns`](super::Store::list_turns).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnSummary {
    /// The turn's id.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its status.
    pub status: TurnStatus,
    /// Its version (as [`Store::turn`](super::Store::turn) returns it).
    pub version: u64,
    /// Its place in the store's write order: every write of a turn (an answer recorded beside
    /// it too) gives it a position above every other turn's. The listing is ordered by it,
    /// highest first.
    pub position: u64,
}

/// A workflow task as listed by [`Store::list_tasks`](super::Store::list_tasks).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSummary {
    /// The task's id.
    pub id: String,
    /// Its session.
    pub session_id: String,
    /// Its status.
    pub status: TaskStatus,
    /// Its version (as [`Store::task`](super::Store::task) returns it).
    pub version: u64,
}

/// Which turns [`Store::list_turns`](super::Store::list_turns) lists: all of them by default,
/// or those of one session and/or in one status.
///
/// ```
/// use toolwright_runtime::TurnStatus;
/// use toolwright_runtime::store::TurnFilter;
///
/// // A console's inbox: the turns of session `s1` waiting for a person.
/// let inbox = TurnFilter::default().session("s1").status(TurnStatus::Waiting);
/// assert_eq!(inbox.session_id.as_deref(), Some("s1"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TurnFilter {
    /// Only the turns of this session.
    pub session_id: Option<String>,
    /// Only the turns in this status.
    pub status: Option<TurnStatus>,
}

impl TurnFilter {
    /// Only the turns of session `id`.
    pub fn session(mut self, id: impl Into<String>) -> TurnFilter {
        self.session_id = Some(id.into());
        self
    }

    /// Only the turns in `status`.
    pub fn status(self, status: TurnStatus) -> TurnFilter {
        TurnFilter {
            status: Some(status),
            ..self
        }
    }
}

/// Which tasks [`Store::list_tasks`](super::Store::list_tasks) lists: all of them by default,
/// or those of one session and/or only the open ones (not ended: neither `finished` nor
/// `cancelled`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskFilter {
    /// Only the tasks of this session.
    pub session_id: Option<String>,
    /// Only the tasks that have not ended.
    pub open: bool,
}

impl TaskFilter {
    /// Only the tasks of session `id`.
    pub fn session(mut self, id: impl Into<String>) -> TaskFilter {
        self.session_id = Some(id.into());
        self
    }

    /// Only the tasks that have not ended.
    pub fn open(mut self) -> TaskFilter {
        self.open = true;
        self
    }
}

/// What a store that does not implement listing `method` answers.
pub(super) fn not_listed(method: &str) -> StoreError {
    StoreError::Backend(format!(
        "this store does not implement `Store::{method}`, so it cannot list its records page by \
         page; implement it, or use the SQLite or Postgres store"
    ))
}

/// How the SQL stores write their cursors: `<listing>:<position>`, the session listing's
/// position being `<updated_ms>:<id>`.
pub(super) mod sql {
    use super::{Cursor, StoreError};

    /// The cursor of listing `listing` at `position`.
    pub(in crate::store) fn cursor(listing: &str, position: &str) -> Cursor {
        Cursor(format!("{listing}:{position}"))
    }

    /// The position of `cursor` in listing `listing`, refused when it is not one of its.
    pub(in crate::store) fn position<'c>(
        listing: &str,
        cursor: &'c Cursor,
    ) -> Result<&'c str, StoreError> {
        cursor
            .as_str()
            .strip_prefix(listing)
            .and_then(|rest| rest.strip_prefix(':'))
            .ok_or_else(|| foreign(listing, cursor))
    }

    /// A write-order position (turns' `updated`, tasks' `created`) of listing `listing`.
    pub(in crate::store) fn sequence(listing: &str, cursor: &Cursor) -> Result<i64, StoreError> {
        position(listing, cursor)?
            .parse()
            .map_err(|_| foreign(listing, cursor))
    }

    /// The session listing's position: the last session's `updated_ms` and id.
    pub(in crate::store) fn session_position(cursor: &Cursor) -> Result<(i64, &str), StoreError> {
        let rest = position("sessions", cursor)?;
        rest.split_once(':')
            .and_then(|(ms, id)| Some((ms.parse().ok()?, id)))
            .ok_or_else(|| foreign("sessions", cursor))
    }

    /// Where a page of a turn's steps starts: after the step whose index is the cursor's
    /// text (the listing of [`Store::turn_steps`](crate::store::Store::turn_steps), whose
    /// cursor is the index alone), or before every step (`-1`) for the first page.
    pub(in crate::store) fn step_position(after: Option<&Cursor>) -> Result<i64, StoreError> {
        match after {
            None => Ok(-1),
            Some(cursor) => cursor
                .as_str()
                .parse::<u32>()
                .map(i64::from)
                .map_err(|_| foreign("turn steps", cursor)),
        }
    }

    fn foreign(listing: &str, cursor: &Cursor) -> StoreError {
        StoreError::Invalid(format!(
            "cursor `{cursor}` is not a position in this store's listing of {listing}; pass the \
             `next` of a page of the same listing as it came, or none for the first page"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_outside_one_to_the_maximum_are_refused() {
        for limit in [0, MAX_PAGE_LIMIT + 1] {
            let error = PageRequest::first(limit).checked_limit().unwrap_err();
            assert!(
                matches!(&error, StoreError::Invalid(m) if m.contains("1 to 1000")),
                "{error}"
            );
        }
        assert_eq!(PageRequest::first(1).checked_limit().unwrap(), 1);
        assert_eq!(
            PageRequest::first(MAX_PAGE_LIMIT).checked_limit().unwrap(),
            MAX_PAGE_LIMIT
        );
    }

    #[test]
    fn cursors_name_their_listing() {
        let turns = sql::cursor("turns", "42");
        assert_eq!(sql::sequence("turns", &turns).unwrap(), 42);
        assert!(matches!(
            sql::sequence("tasks", &turns),
            Err(StoreError::Invalid(_))
        ));
        assert!(matches!(
            sql::sequence("turns", &Cursor::new("turns:x")),
            Err(StoreError::Invalid(_))
        ));
        let sessions = sql::cursor("sessions", "17:s:1");
        assert_eq!(sql::session_position(&sessions).unwrap(), (17, "s:1"));
        assert!(sql::session_position(&Cursor::new("sessions:17")).is_err());
        assert_eq!(sql::step_position(None).unwrap(), -1);
        assert_eq!(sql::step_position(Some(&Cursor::new("7"))).unwrap(), 7);
        for foreign in ["turns:7", "-1", "x", ""] {
            assert!(matches!(
                sql::step_position(Some(&Cursor::new(foreign))),
                Err(StoreError::Invalid(_))
            ));
        }
    }
}
