//! Leases in the SQLite store: the checks a write's claim must pass, and the new fencing token and
//! lease a taking claim gets, both inside the write's transaction. Lease times are Unix
//! milliseconds by this machine's clock.

use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use super::Failure;
use crate::store::rows::check_token as stale;
use crate::store::{Claim, Lease, LeaseKind, StoreError};

/// A [`Claim`] moved into a blocking task.
pub(super) enum OwnedClaim {
    None,
    Take { owner: String, ttl: Duration },
    TakeOver { owner: String, ttl: Duration },
    Keep(Lease),
}

impl From<Claim<'_>> for OwnedClaim {
    fn from(claim: Claim<'_>) -> Self {
        match claim {
            Claim::None => OwnedClaim::None,
            Claim::Take { owner, ttl } => OwnedClaim::Take {
                owner: owner.to_owned(),
                ttl,
            },
            Claim::TakeOver { owner, ttl } => OwnedClaim::TakeOver {
                owner: owner.to_owned(),
                ttl,
            },
            Claim::Keep(lease) => OwnedClaim::Keep(lease.clone()),
        }
    }
}

fn table(kind: LeaseKind) -> &'static str {
    match kind {
        LeaseKind::Turn => "turns",
        LeaseKind::Task => "tasks",
    }
}

/// Refuses a write whose claim does not hold: a stale [`Claim::Keep`] is fenced, a
/// [`Claim::TakeOver`] of a live lease is a conflict. Runs inside the write's transaction.
pub(super) fn check_claim(
    tx: &rusqlite::Transaction<'_>,
    kind: LeaseKind,
    id: &str,
    claim: &OwnedClaim,
    now: i64,
) -> Result<(), Failure> {
    match claim {
        OwnedClaim::None | OwnedClaim::Take { .. } => Ok(()),
        OwnedClaim::Keep(lease) => check_token(tx, lease),
        OwnedClaim::TakeOver { .. } => {
            let expires: Option<i64> = tx
                .prepare_cached(&format!(
                    "SELECT lease_expires FROM {} WHERE id = ?1",
                    table(kind)
                ))?
                .query_row([id], |row| row.get(0))
                .optional()?;
            match expires {
                Some(expires) if expires >= now => {
                    Err(Failure::Store(StoreError::Conflict(id.to_owned())))
                }
                _ => Ok(()),
            }
        }
    }
}

/// [`check_claim`] against the lease columns of the record (`token`, `expires`; `None` and
/// 0 when there is no record), read by the write itself in one statement with what else it
/// needs of the row.
pub(super) fn claim_holds(
    claim: &OwnedClaim,
    id: &str,
    token: Option<i64>,
    expires: i64,
    now: i64,
) -> Result<(), Failure> {
    match claim {
        OwnedClaim::None | OwnedClaim::Take { .. } => Ok(()),
        OwnedClaim::Keep(lease) => Ok(stale(lease, token)?),
        OwnedClaim::TakeOver { .. } if token.is_some() && expires >= now => {
            Err(Failure::Store(StoreError::Conflict(id.to_owned())))
        }
        OwnedClaim::TakeOver { .. } => Ok(()),
    }
}

/// The lease a taking claim gives a record whose fencing token is `token` now, with its expiry
/// (for the write to store with the record, as [`take_lease`] would); `None` for the others.
pub(super) fn next_lease(
    claim: &OwnedClaim,
    kind: LeaseKind,
    id: &str,
    token: i64,
    now: i64,
) -> Option<(Lease, i64)> {
    let (OwnedClaim::Take { owner, ttl } | OwnedClaim::TakeOver { owner, ttl }) = claim else {
        return None;
    };
    let lease = Lease {
        kind,
        id: id.to_owned(),
        owner: owner.clone(),
        token: u64::try_from(token.saturating_add(1)).unwrap_or(0),
    };
    Some((lease, expiry(now, *ttl)))
}

/// Refuses with [`StoreError::Fenced`] unless the record's token is still `lease`'s.
pub(super) fn check_token(tx: &rusqlite::Transaction<'_>, lease: &Lease) -> Result<(), Failure> {
    let token: Option<i64> = tx
        .prepare_cached(&format!(
            "SELECT lease_token FROM {} WHERE id = ?1",
            table(lease.kind)
        ))?
        .query_row([&lease.id], |row| row.get(0))
        .optional()?;
    Ok(stale(lease, token)?)
}

/// Gives the record a new fencing token and lease for a taking claim; `None` for the others.
pub(super) fn take_lease(
    tx: &rusqlite::Transaction<'_>,
    kind: LeaseKind,
    id: &str,
    claim: &OwnedClaim,
    now: i64,
) -> Result<Option<Lease>, Failure> {
    let (OwnedClaim::Take { owner, ttl } | OwnedClaim::TakeOver { owner, ttl }) = claim else {
        return Ok(None);
    };
    let token: i64 = tx
        .prepare_cached(&format!(
            "UPDATE {} SET lease_owner = ?2, lease_token = lease_token + 1, lease_expires = ?3 \
             WHERE id = ?1 RETURNING lease_token",
            table(kind)
        ))?
        .query_row(params![id, owner, expiry(now, *ttl)], |row| row.get(0))?;
    Ok(Some(Lease {
        kind,
        id: id.to_owned(),
        owner: owner.clone(),
        token: u64::try_from(token).unwrap_or(0),
    }))
}

/// Unix milliseconds by this machine's clock.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn expiry(now: i64, ttl: Duration) -> i64 {
    now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX))
}
