//! Attachments in the SQLite file: one row per file of a session, its bytes in the row (or its
//! path in the sandbox), written once and never rewritten.

use rusqlite::{Connection, OptionalExtension, params};

use super::Failure;
use crate::record::AttachmentRecord;
use crate::store::rows::{decode_attachment, split};

/// Stores `record` unless the session has that id already (the same bytes); bytes kept in
/// the store replace a sandbox path (whose file may be gone), never the other way round.
pub(super) fn put(conn: &mut Connection, record: &AttachmentRecord) -> Result<(), Failure> {
    let (data, path) = split(&record.place);
    conn.prepare_cached(
        "INSERT INTO attachments (session_id, id, media_type, size, data, path) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
         ON CONFLICT (session_id, id) DO UPDATE SET data = excluded.data, path = NULL \
         WHERE excluded.data IS NOT NULL AND attachments.data IS NULL",
    )?
    .execute(params![
        record.session_id,
        record.id,
        record.media_type,
        record.size as i64,
        data,
        path
    ])?;
    Ok(())
}

/// The attachment `id` of session `session_id`.
pub(super) fn read(
    conn: &mut Connection,
    session_id: &str,
    id: &str,
) -> Result<Option<AttachmentRecord>, Failure> {
    let row = conn
        .prepare_cached(
            "SELECT media_type, size, data, path FROM attachments \
             WHERE session_id = ?1 AND id = ?2",
        )?
        .query_row(params![session_id, id], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, Option<Vec<u8>>>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    Ok(row
        .map(|row| decode_attachment(session_id, id, row))
        .transpose()?)
}

/// Deletes the attachments of session `session_id`; returns how many there were.
pub(super) fn delete(conn: &mut Connection, session_id: &str) -> Result<u64, Failure> {
    let deleted = conn
        .prepare_cached("DELETE FROM attachments WHERE session_id = ?1")?
        .execute([session_id])?;
    Ok(deleted as u64)
}
