//! Leases on turn and task rows, judged by the database server's clock: the check a write's
//! claim must pass and the new token a taking claim gets (both on the row the write locks), the
//! fence of journal records, renewal, and the listing of expired work.

use std::time::Duration;

use sqlx_core::query_as::query_as;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::PgTransaction;

use super::tables::RecordSql;
use super::{Failure, PostgresStore};
use crate::store::rows::check_token as stale;
use crate::store::{Claim, Lease, LeaseKind, StoreError};

/// The longest lease written, so that the server's `now + ttl` cannot overflow a `bigint`: a
/// longer time to live is as good as forever.
const MAX_TTL_MS: i64 = i64::MAX / 4;

impl PostgresStore {
    /// [`Store::renew_leases`](crate::store::Store::renew_leases).
    pub(super) async fn renew(&self, held: &[Lease], ttl: Duration) -> Result<Vec<Lease>, Failure> {
        let ttl = ttl_ms(ttl);
        let mut renewed = Vec::new();
        // One statement per kind, each its own transaction: the rows are locked one at
        // a time and only for the update, and the holder's writes wait at most for it.
        for (kind, sql) in [
            (
                LeaseKind::Turn,
                concat!(
                    "UPDATE turns AS t SET lease_expires = ",
                    now_ms!(),
                    " + $4 FROM unnest($1::text[], $2::bigint[]) AS h(id, token) \
                     WHERE t.id = h.id AND t.lease_token = h.token \
                     AND t.lease_owner = $3 AND t.status = 'running' \
                     RETURNING t.id, t.lease_token"
                ),
            ),
            (
                LeaseKind::Task,
                concat!(
                    "UPDATE tasks AS t SET lease_expires = ",
                    now_ms!(),
                    " + $4 FROM unnest($1::text[], $2::bigint[]) AS h(id, token) \
                     WHERE t.id = h.id AND t.lease_token = h.token \
                     AND t.lease_owner = $3 AND t.status IN ('running', 'cancelling') \
                     RETURNING t.id, t.lease_token"
                ),
            ),
        ] {
            // Leases of one owner per call in practice; group by owner to be exact.
            let mut owners: Vec<&str> = held
                .iter()
                .filter(|l| l.kind == kind)
                .map(|l| l.owner.as_str())
                .collect();
            owners.sort_unstable();
            owners.dedup();
            for owner in owners {
                let (ids, tokens): (Vec<&str>, Vec<i64>) = held
                    .iter()
                    .filter(|l| l.kind == kind && l.owner == owner)
                    .map(|l| (l.id.as_str(), i64::try_from(l.token).unwrap_or(i64::MAX)))
                    .unzip();
                let rows: Vec<(String, i64)> = query_as(sql)
                    .bind(&ids)
                    .bind(&tokens)
                    .bind(owner)
                    .bind(ttl)
                    .fetch_all(&self.pool)
                    .await?;
                renewed.extend(rows.into_iter().map(|(id, token)| Lease {
                    kind,
                    id,
                    owner: owner.to_owned(),
                    token: u64::try_from(token).unwrap_or(0),
                }));
            }
        }
        Ok(renewed)
    }

    /// [`Store::expired_leases`](crate::store::Store::expired_leases).
    pub(super) async fn expired(&self) -> Result<Vec<(LeaseKind, String)>, Failure> {
        let mut found = Vec::new();
        // Plain reads through the partial indexes of running work: a take-over is made
        // exclusive by its own versioned write, not by this listing.
        for (kind, sql) in [
            (
                LeaseKind::Turn,
                concat!(
                    "SELECT id FROM turns WHERE status = 'running' AND lease_expires < ",
                    now_ms!(),
                    " ORDER BY updated"
                ),
            ),
            (
                LeaseKind::Task,
                concat!(
                    "SELECT id FROM tasks WHERE status IN ('running', 'cancelling') \
                     AND lease_expires < ",
                    now_ms!(),
                    " ORDER BY created"
                ),
            ),
        ] {
            let ids = self.ids(sql, None).await?;
            found.extend(ids.into_iter().map(|id| (kind, id)));
        }
        Ok(found)
    }
}

/// Refuses a write whose claim does not hold: a stale [`Claim::Keep`] is fenced, a
/// [`Claim::TakeOver`] of a live lease is a conflict. The row stays locked until the write's
/// transaction ends, so the check still holds when the write lands.
pub(super) async fn check_claim(
    tx: &mut PgTransaction<'_>,
    sql: &RecordSql,
    id: &str,
    claim: Claim<'_>,
) -> Result<(), Failure> {
    if matches!(claim, Claim::None | Claim::Take { .. }) {
        return Ok(());
    }
    let row: Option<(i64, i64, i64)> = query_as(sql.lock)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    match claim {
        Claim::Keep(lease) => check_token(lease, row.map(|(token, _, _)| token)),
        Claim::TakeOver { .. } => match row {
            Some((_, expires, now)) if expires >= now => {
                Err(Failure::Store(StoreError::Conflict(id.to_owned())))
            }
            _ => Ok(()),
        },
        Claim::None | Claim::Take { .. } => Ok(()),
    }
}

/// [`crate::store::rows::check_token`] inside a Postgres operation.
fn check_token(lease: &Lease, token: Option<i64>) -> Result<(), Failure> {
    Ok(stale(lease, token)?)
}

/// Gives the record a new fencing token and lease for a taking claim; `None` for the others.
pub(super) async fn take_lease(
    tx: &mut PgTransaction<'_>,
    sql: &RecordSql,
    id: &str,
    claim: Claim<'_>,
) -> Result<Option<Lease>, Failure> {
    let (Claim::Take { owner, ttl } | Claim::TakeOver { owner, ttl }) = claim else {
        return Ok(None);
    };
    let token: i64 = query_scalar(sql.take)
        .bind(id)
        .bind(owner)
        .bind(ttl_ms(ttl))
        .fetch_one(&mut **tx)
        .await?;
    Ok(Some(Lease {
        kind: sql.kind,
        id: id.to_owned(),
        owner: owner.to_owned(),
        token: u64::try_from(token).unwrap_or(0),
    }))
}

/// Refuses a journal record under `lease` (with [`StoreError::Fenced`]) unless the record's token
/// is still the lease's. `FOR SHARE` holds off a take-over (an UPDATE of the row) until this
/// transaction ends, while the holder's other journal records go ahead.
pub(super) async fn check_fence(tx: &mut PgTransaction<'_>, lease: &Lease) -> Result<(), Failure> {
    let token: Option<i64> = query_scalar(table_sql(
        lease.kind,
        "SELECT lease_token FROM turns WHERE id = $1 FOR SHARE",
        "SELECT lease_token FROM tasks WHERE id = $1 FOR SHARE",
    ))
    .bind(&lease.id)
    .fetch_optional(&mut **tx)
    .await?;
    check_token(lease, token)
}

fn table_sql(kind: LeaseKind, turns: &'static str, tasks: &'static str) -> &'static str {
    match kind {
        LeaseKind::Turn => turns,
        LeaseKind::Task => tasks,
    }
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).map_or(MAX_TTL_MS, |ms| ms.min(MAX_TTL_MS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_time_to_live_saturates() {
        assert_eq!(ttl_ms(Duration::MAX), MAX_TTL_MS);
        assert_eq!(ttl_ms(Duration::from_secs(2)), 2000);
    }
}
