//! Attachments in the database: one row per file of a session, its bytes in the row (or its
//! path in the sandbox), written once and never rewritten.

use sqlx_core::query::query;
use sqlx_core::query_as::query_as;
use sqlx_postgres::PgPool;

use super::errors::Failure;
use crate::record::AttachmentRecord;
use crate::store::rows::{decode_attachment, split};

/// A row of `attachments` without its keys: media type, size, bytes, sandbox path.
type Row = (String, i64, Option<Vec<u8>>, Option<String>);

/// Stores `record` unless the session has that id already (the same bytes); bytes kept in
/// the store replace a sandbox path (whose file may be gone), never the other way round.
pub(super) async fn put(pool: &PgPool, record: &AttachmentRecord) -> Result<(), Failure> {
    let (data, path) = split(&record.place);
    query(
        "INSERT INTO attachments (session_id, id, media_type, size, data, path) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data, path = NULL \
         WHERE excluded.data IS NOT NULL AND attachments.data IS NULL",
    )
    .bind(&record.session_id)
    .bind(&record.id)
    .bind(&record.media_type)
    .bind(record.size as i64)
    .bind(data)
    .bind(path)
    .execute(pool)
    .await?;
    Ok(())
}

/// The attachment `id` of session `session_id`.
pub(super) async fn read(
    pool: &PgPool,
    session_id: &str,
    id: &str,
) -> Result<Option<AttachmentRecord>, Failure> {
    let row: Option<Row> = query_as(
        "SELECT media_type, size, data, path FROM attachments \
         WHERE session_id = $1 AND id = $2",
    )
    .bind(session_id)
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row
        .map(|row| decode_attachment(session_id, id, row))
        .transpose()?)
}

/// Deletes the attachments of session `session_id`; returns how many there were.
pub(super) async fn delete(pool: &PgPool, session_id: &str) -> Result<u64, Failure> {
    let deleted = query("DELETE FROM attachments WHERE session_id = $1")
        .bind(session_id)
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected())
}
