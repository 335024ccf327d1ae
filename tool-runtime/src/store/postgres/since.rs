//! Reads that hand over a record only when its version moved ([`Store::turn_since`] and
//! [`Store::session_since`](crate::Store::session_since)): one statement each, which compares the
//! version on the server and sends the record (for a turn, with the answers recorded beside it)
//! only when it differs, so an unchanged record costs an index lookup and nothing is sent or
//! decoded.
//!
//! [`Store::turn_since`]: crate::Store::turn_since

use sqlx_core::query_as::query_as;

use super::{Failure, PostgresStore};
use crate::record::{SessionRecord, TurnRecord};
use crate::store::rows::{decode, decode_turn};

/// `known` as the stored version; a version no row can hold when it does not fit (every
/// record then reads as changed).
fn stored(known: u64) -> i64 {
    i64::try_from(known).unwrap_or(-1)
}

impl PostgresStore {
    /// Turn `id` unless it is still at version `known`: the record and its patches are read
    /// in the same statement (one snapshot) only when the version differs.
    #[allow(clippy::type_complexity)]
    pub(super) async fn read_turn_since(
        &self,
        id: &str,
        known: u64,
    ) -> Result<Option<(Option<TurnRecord>, u64)>, Failure> {
        let row: Option<(Option<String>, i64, Option<Vec<String>>)> = query_as(
            "SELECT CASE WHEN t.version = $2 THEN NULL ELSE t.json END, t.version, \
             CASE WHEN t.version = $2 THEN NULL ELSE coalesce((SELECT array_agg(p.json \
             ORDER BY p.seq) FROM turn_patches p WHERE p.turn_id = t.id), '{}') END \
             FROM turns t WHERE t.id = $1",
        )
        .bind(id)
        .bind(stored(known))
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => None,
            Some((Some(json), version, patches)) => {
                let (turn, version) =
                    decode_turn(id, &json, version, &patches.unwrap_or_default())?;
                Some((Some(turn), version))
            }
            Some((None, _, _)) => Some((None, known)),
        })
    }

    /// Session `id` unless it is still at version `known`.
    #[allow(clippy::type_complexity)]
    pub(super) async fn read_session_since(
        &self,
        id: &str,
        known: u64,
    ) -> Result<Option<(Option<SessionRecord>, u64)>, Failure> {
        let row: Option<(Option<String>, i64)> = query_as(
            "SELECT CASE WHEN version = $2 THEN NULL ELSE json END, version \
             FROM sessions WHERE id = $1",
        )
        .bind(id)
        .bind(stored(known))
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            None => None,
            Some((Some(json), version)) => {
                let (session, version) = decode(id, &json, version)?;
                Some((Some(session), version))
            }
            Some((None, _)) => Some((None, known)),
        })
    }
}
