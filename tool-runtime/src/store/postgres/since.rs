//! Reads that hand over a record only when its version moved ([`Store::turn_since`],
//! [`Store::session_since`](crate::Store::session_since), and both at once for
//! [`Store::step_since`](crate::Store::step_since)): one statement each, which compares the
//! version on the server and sends the record (for a turn, with the answers recorded beside it)
//! only when it differs, so an unchanged record costs an index lookup and nothing is sent or
//! decoded.
//!
//! [`Store::turn_since`]: crate::Store::turn_since

use sqlx_core::query_as::query_as;

use super::{Failure, PostgresStore};
use crate::record::{SessionRecord, TurnRecord};
use crate::store::rows::{decode, decode_turn};
use crate::store::{Since, StepSince};

/// `known` as the stored version; a version no row can hold when it does not fit (every
/// record then reads as changed).
fn stored(known: u64) -> i64 {
    i64::try_from(known).unwrap_or(-1)
}

impl PostgresStore {
    /// Turn `id` unless it is still at version `known`: the record and its patches are read
    /// in the same statement (one snapshot) only when the version differs.
    pub(super) async fn read_turn_since(
        &self,
        id: &str,
        known: u64,
    ) -> Result<Since<TurnRecord>, Failure> {
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
        turn_answer(id, known, row)
    }

    /// Session `id` unless it is still at version `known`.
    pub(super) async fn read_session_since(
        &self,
        id: &str,
        known: u64,
    ) -> Result<Since<SessionRecord>, Failure> {
        let row: Option<(Option<String>, i64)> = query_as(
            "SELECT CASE WHEN version = $2 THEN NULL ELSE json END, version \
             FROM sessions WHERE id = $1",
        )
        .bind(id)
        .bind(stored(known))
        .fetch_optional(&self.pool)
        .await?;
        session_answer(id, known, row)
    }

    /// Both reads at once, as a step starts ([`crate::Store::step_since`]): one statement,
    /// the turn and the session joined on a one-row select, so one round trip.
    pub(super) async fn read_step_since(
        &self,
        turn: (&str, u64),
        session: (&str, u64),
    ) -> Result<StepSince, Failure> {
        type Row = (
            Option<String>,
            Option<i64>,
            Option<Vec<String>>,
            Option<String>,
            Option<i64>,
        );
        let (json, version, patches, session_json, session_version): Row = query_as(
            "SELECT CASE WHEN t.version = $2 THEN NULL ELSE t.json END, t.version, \
             CASE WHEN t.version = $2 THEN NULL ELSE coalesce((SELECT array_agg(p.json \
             ORDER BY p.seq) FROM turn_patches p WHERE p.turn_id = t.id), '{}') END, \
             CASE WHEN s.version = $4 THEN NULL ELSE s.json END, s.version \
             FROM (SELECT 1) one LEFT JOIN turns t ON t.id = $1 \
             LEFT JOIN sessions s ON s.id = $3",
        )
        .bind(turn.0)
        .bind(stored(turn.1))
        .bind(session.0)
        .bind(stored(session.1))
        .fetch_one(&self.pool)
        .await?;
        let turn_row = version.map(|version| (json, version, patches));
        let session_row = session_version.map(|version| (session_json, version));
        Ok((
            turn_answer(turn.0, turn.1, turn_row)?,
            session_answer(session.0, session.1, session_row)?,
        ))
    }
}

/// What a turn's since-read answers for its row (`None`: no such turn).
fn turn_answer(
    id: &str,
    known: u64,
    row: Option<(Option<String>, i64, Option<Vec<String>>)>,
) -> Result<Since<TurnRecord>, Failure> {
    Ok(match row {
        None => None,
        Some((Some(json), version, patches)) => {
            let (turn, version) = decode_turn(id, &json, version, &patches.unwrap_or_default())?;
            Some((Some(turn), version))
        }
        Some((None, _, _)) => Some((None, known)),
    })
}

/// What a session's since-read answers for its row (`None`: no such session).
fn session_answer(
    id: &str,
    known: u64,
    row: Option<(Option<String>, i64)>,
) -> Result<Since<SessionRecord>, Failure> {
    Ok(match row {
        None => None,
        Some((Some(json), version)) => {
            let (session, version) = decode(id, &json, version)?;
            Some((Some(session), version))
        }
        Some((None, _)) => Some((None, known)),
    })
}
