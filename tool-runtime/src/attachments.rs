//! Files tools return, stored once per session: a file part of a call's result (in what the
//! model sees, or anywhere in the raw output) is stored in the store, or in the sandbox when
//! the runtime has one, before the result is recorded, and replaced by a reference
//! ([`ContentPart::Attachment`]). Recorded results, events and conversations then carry the
//! reference; the bytes are put back (`resolve`) only where they leave the process: a model
//! request, an MCP response.
//!
//! The id is the digest of the bytes, so the same file returned twice in a session is stored
//! once, and a resolved file is the same bytes every time (a provider's prompt cache holds).

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use sha2::Digest as _;
use toolwright_core::{ContentPart, ModelOutput, SandboxError};

use crate::engine::Engine;
use crate::error::RuntimeError;
use crate::event::Event;
use crate::record::{AttachmentPlace, AttachmentRecord, CallResult};

/// Where the runtime keeps attachments in its sandbox: one directory per session below this.
pub const SANDBOX_DIR: &str = ".toolwright/attachments";

/// A stored attachment: its bytes and what they are.
#[derive(Clone, PartialEq, Eq)]
pub struct Attachment {
    /// `sha256:` and the hex digest of the bytes.
    pub id: String,
    /// The media type, e.g. `image/png`.
    pub media_type: String,
    /// The bytes.
    pub data: Vec<u8>,
}

impl Attachment {
    /// The bytes as base64, as a file part carries them.
    pub fn base64(&self) -> String {
        STANDARD.encode(&self.data)
    }

    /// The attachment as the file part it replaced.
    pub fn to_part(&self) -> ContentPart {
        ContentPart::file(self.base64(), self.media_type.clone())
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("id", &self.id)
            .field("media_type", &self.media_type)
            .field("size", &self.data.len())
            .finish()
    }
}

/// The call whose result holds the files: where warnings about them are addressed.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'a> {
    pub session_id: &'a str,
    pub turn_id: &'a str,
    pub call_id: &'a str,
}

impl Origin<'_> {
    fn warn(&self, engine: &Engine, message: String) {
        tracing::warn!(call_id = self.call_id, "{message}");
        engine.emit(Event::Warning {
            session_id: self.session_id.to_owned(),
            turn_id: self.turn_id.to_owned(),
            call_id: Some(self.call_id.to_owned()),
            message,
        });
    }
}

/// Whether `result` holds a file part to keep: in what the model sees, or anywhere in the raw
/// output. Most results hold none: they are walked once, without allocating, and [`keep`]
/// (whose future is large: it writes to the store) is not entered.
pub(crate) fn holds_files(result: &CallResult) -> bool {
    let in_view = matches!(&result.projection, Some(ModelOutput::Content(parts))
        if parts.iter().any(|part| matches!(part, ContentPart::File { .. })));
    in_view || contains_file_part(&result.output)
}

/// Stores the files of `result` once and puts references in their place: the file parts of
/// what the model sees, and every file part (`{"type": "file", "data", "mediaType"}`) in the raw
/// output. A file over [`Options::attachment_max_bytes`](crate::Options::attachment_max_bytes)
/// is left out (a text part says so); one that is not base64, or that the store cannot keep,
/// stays inline; each with a warning.
pub(crate) async fn keep(engine: &Engine, origin: Origin<'_>, result: &mut CallResult) {
    let mut kept = Kept::default();
    if let Some(ModelOutput::Content(parts)) = &mut result.projection {
        for part in parts.iter_mut() {
            if let ContentPart::File { data, media_type } = part
                && let Some(replacement) = kept.file(engine, origin, data, media_type, true).await
            {
                *part = replacement;
            }
        }
    }
    if !contains_file_part(&result.output) {
        return;
    }
    for pointer in file_pointers(&result.output) {
        let Some(slot) = result.output.pointer_mut(&pointer) else {
            continue;
        };
        let (Some(data), Some(media_type)) = (
            slot.get("data").and_then(Value::as_str),
            slot.get("mediaType").and_then(Value::as_str),
        ) else {
            continue;
        };
        let (data, media_type) = (data.to_owned(), media_type.to_owned());
        if let Some(replacement) = kept.file(engine, origin, &data, &media_type, false).await {
            *slot = serde_json::to_value(replacement).unwrap_or(Value::Null);
        }
    }
}

/// Whether `value` holds a file part anywhere.
fn contains_file_part(value: &Value) -> bool {
    match value {
        Value::Object(map) => is_file_part(map) || map.values().any(contains_file_part),
        Value::Array(items) => items.iter().any(contains_file_part),
        _ => false,
    }
}

/// JSON pointers of the file parts in `value`, outermost first (a file part holds no other).
fn file_pointers(value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![(String::new(), value)];
    while let Some((pointer, value)) = stack.pop() {
        match value {
            Value::Object(map) if is_file_part(map) => found.push(pointer),
            Value::Object(map) => stack.extend(
                map.iter()
                    .map(|(key, v)| (format!("{pointer}/{}", escape(key)), v)),
            ),
            Value::Array(items) => stack.extend(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{pointer}/{i}"), v)),
            ),
            _ => {}
        }
    }
    found
}

/// Whether `map` is a serialized [`ContentPart::File`]: exactly its three keys.
fn is_file_part(map: &serde_json::Map<String, Value>) -> bool {
    map.len() == 3
        && map.get("type").and_then(Value::as_str) == Some("file")
        && map.get("data").is_some_and(Value::is_string)
        && map.get("mediaType").is_some_and(Value::is_string)
}

/// A key as a JSON pointer token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The files of one result already handled, by id: a file returned twice is stored (and
/// warned about) once.
#[derive(Default)]
struct Kept {
    parts: HashMap<String, ContentPart>,
}

impl Kept {
    /// What replaces the file part `data` of `media_type`, `None` to leave it inline. `model`:
    /// the part is in what the model sees (only those are warned about when not base64, as
    /// the raw output may hold any string).
    async fn file(
        &mut self,
        engine: &Engine,
        origin: Origin<'_>,
        data: &str,
        media_type: &str,
        model: bool,
    ) -> Option<ContentPart> {
        let Some(bytes) = decode(data) else {
            if model {
                origin.warn(
                    engine,
                    format!(
                        "a `{media_type}` file for the model is not base64; encode the bytes as base64"
                    ),
                );
            }
            return None;
        };
        let id = id_of(&bytes);
        if let Some(part) = self.parts.get(&id) {
            return Some(part.clone());
        }
        let replacement = store(engine, origin, &id, bytes, media_type).await;
        if let Some(part) = &replacement {
            self.parts.insert(id, part.clone());
        }
        replacement
    }
}

/// `data` decoded as base64 (line breaks allowed), `None` when it is not base64.
fn decode(data: &str) -> Option<Vec<u8>> {
    if data.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        return STANDARD.decode(compact).ok();
    }
    STANDARD.decode(data).ok()
}

/// The id of `bytes` as an attachment: `sha256:` and their hex digest.
///
/// ```
/// use toolwright_runtime::attachments::id_of;
/// assert!(id_of(b"hello").starts_with("sha256:2cf24dba"));
/// ```
pub fn id_of(bytes: &[u8]) -> String {
    let digest = sha2::Sha256::digest(bytes);
    let mut id = String::with_capacity(7 + 64);
    id.push_str("sha256:");
    for byte in digest {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// Stores `bytes` as attachment `id` of the origin's session; the part that replaces the file,
/// or `None` to leave it inline.
async fn store(
    engine: &Engine,
    origin: Origin<'_>,
    id: &str,
    bytes: Vec<u8>,
    media_type: &str,
) -> Option<ContentPart> {
    let size = bytes.len() as u64;
    let options = engine.options();
    if size > options.attachment_max_bytes {
        let message = format!(
            "a `{media_type}` file of {} KiB was left out of the result: it is over the \
             runtime's limit of {} KiB for a returned file (`Options::attachment_max_bytes`); \
             return a smaller file, or a link to it",
            size / 1024,
            options.attachment_max_bytes / 1024
        );
        origin.warn(engine, message.clone());
        return Some(ContentPart::text(format!("[{message}]")));
    }
    if size > options.file_warning_bytes as u64 {
        origin.warn(
            engine,
            format!(
                "a `{media_type}` file of about {} KiB is sent to the model (over {} KiB)",
                size / 1024,
                options.file_warning_bytes / 1024
            ),
        );
    }
    let store = engine.store();
    if !store.keeps_attachments() {
        return None;
    }
    let (place, path) = place(engine, origin, id, bytes, media_type).await;
    let record = AttachmentRecord {
        session_id: origin.session_id.to_owned(),
        id: id.to_owned(),
        media_type: media_type.to_owned(),
        size,
        place,
    };
    match store.put_attachment(&record).await {
        Ok(()) => Some(ContentPart::Attachment {
            id: id.to_owned(),
            media_type: media_type.to_owned(),
            size,
            path,
        }),
        Err(error) => {
            origin.warn(
                engine,
                format!(
                    "a `{media_type}` file could not be stored once ({error}); it stays inline \
                     in the result"
                ),
            );
            None
        }
    }
}

/// Where the bytes go: into the sandbox when the runtime has one (and the write succeeds),
/// otherwise into the store. The path is the sandbox's, for the reference.
async fn place(
    engine: &Engine,
    origin: Origin<'_>,
    id: &str,
    bytes: Vec<u8>,
    media_type: &str,
) -> (AttachmentPlace, Option<String>) {
    let Some(sandbox) = engine.sandbox() else {
        return (AttachmentPlace::Stored(bytes), None);
    };
    let path = sandbox_path(origin.session_id, id, media_type);
    match sandbox.write(&path, bytes.clone()).await {
        Ok(()) => (AttachmentPlace::Sandbox(path.clone()), Some(path)),
        Err(error) => {
            origin.warn(
                engine,
                format!(
                    "a `{media_type}` file could not be written to the sandbox ({error}); it is \
                     kept in the store instead"
                ),
            );
            (AttachmentPlace::Stored(bytes), None)
        }
    }
}

/// The sandbox directory of session `session_id`'s attachments: named by a digest of the id,
/// which may hold any character.
pub(crate) fn session_dir(session_id: &str) -> String {
    let digest = id_of(session_id.as_bytes());
    format!("{SANDBOX_DIR}/{}", &digest["sha256:".len()..][..32])
}

/// The sandbox path of attachment `id`: the session's directory, the digest, an extension of
/// the media type (`image/png` → `.png`) so that programs in the sandbox know what it is.
fn sandbox_path(session_id: &str, id: &str, media_type: &str) -> String {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    format!(
        "{}/{hex}.{}",
        session_dir(session_id),
        extension(media_type)
    )
}

/// A file extension for `media_type`: its subtype up to a `+` or `;`, when that is a plain
/// short name (`image/svg+xml` → `svg`), else `bin`.
fn extension(media_type: &str) -> &str {
    let subtype = media_type.split_once('/').map_or("", |(_, s)| s);
    let name = subtype.split(['+', ';']).next().unwrap_or("").trim();
    let plain =
        !name.is_empty() && name.len() <= 10 && name.bytes().all(|b| b.is_ascii_alphanumeric());
    match name {
        "jpeg" => "jpg",
        "plain" => "txt",
        _ if plain => name,
        _ => "bin",
    }
}

/// The attachment `id` of session `session_id`, with its bytes; `None` when the session has
/// none of that id, or its file in the sandbox is gone.
pub(crate) async fn load(
    engine: &Engine,
    session_id: &str,
    id: &str,
) -> Result<Option<Attachment>, RuntimeError> {
    let Some(record) = engine.store().attachment(session_id, id).await? else {
        return Ok(None);
    };
    let data = match record.place {
        AttachmentPlace::Stored(bytes) => bytes,
        AttachmentPlace::Sandbox(path) => {
            let Some(sandbox) = engine.sandbox() else {
                return Err(RuntimeError::Sandbox(format!(
                    "attachment `{id}` of session `{session_id}` is kept in the sandbox at \
                     `{path}`, and this runtime has none; install the sandbox it was stored \
                     with (`RuntimeBuilder::sandbox`)"
                )));
            };
            let limit = usize::try_from(record.size)
                .unwrap_or(usize::MAX)
                .saturating_add(1);
            match sandbox.read(&path, 0, limit).await {
                Ok(chunk) => chunk.data,
                Err(SandboxError::NotFound { .. }) => return Ok(None),
                Err(error) => return Err(RuntimeError::Sandbox(error.to_string())),
            }
        }
    };
    // A file in the sandbox can be changed by whatever runs there: the id promises its bytes.
    if id_of(&data) != record.id {
        return Err(RuntimeError::Sandbox(format!(
            "attachment `{id}` of session `{session_id}` was changed in the sandbox after it was \
             stored; its bytes no longer match its id, so it is not sent"
        )));
    }
    Ok(Some(Attachment {
        id: record.id,
        media_type: record.media_type,
        data,
    }))
}

/// `output` with each attachment put back as the file part it replaced; one that cannot be
/// read becomes a text part saying why (the model and clients learn the file is gone, and
/// nothing fails).
pub(crate) async fn resolve(
    engine: &Engine,
    session_id: &str,
    output: &ModelOutput,
) -> ModelOutput {
    let ModelOutput::Content(parts) = output else {
        return output.clone();
    };
    if !parts
        .iter()
        .any(|part| matches!(part, ContentPart::Attachment { .. }))
    {
        return output.clone();
    }
    let mut resolved = Vec::with_capacity(parts.len());
    for part in parts {
        let ContentPart::Attachment { id, media_type, .. } = part else {
            resolved.push(part.clone());
            continue;
        };
        resolved.push(match load(engine, session_id, id).await {
            Ok(Some(attachment)) => attachment.to_part(),
            Ok(None) => ContentPart::text(format!(
                "[a `{media_type}` file that is no longer available (attachment `{id}` was deleted)]"
            )),
            Err(error) => ContentPart::text(format!(
                "[a `{media_type}` file that cannot be read: {error}]"
            )),
        });
    }
    ModelOutput::Content(resolved)
}

/// Deletes the attachments of session `session_id`: their directory in the sandbox, then their
/// records. Returns how many records there were.
pub(crate) async fn delete(engine: &Engine, session_id: &str) -> Result<u64, RuntimeError> {
    remove_from_sandbox(engine, session_id).await?;
    Ok(engine.store().delete_attachments(session_id).await?)
}

/// Removes the sandbox directory of session `session_id`'s attachments, if the runtime has a
/// sandbox and the directory is there.
pub(crate) async fn remove_from_sandbox(
    engine: &Engine,
    session_id: &str,
) -> Result<(), RuntimeError> {
    if let Some(sandbox) = engine.sandbox() {
        match sandbox.remove(&session_dir(session_id)).await {
            Ok(()) | Err(SandboxError::NotFound { .. }) => {}
            Err(error) => {
                return Err(RuntimeError::Sandbox(format!(
                    "the attachments of session `{session_id}` could not be removed from the \
                     sandbox ({error}); nothing was deleted, try again"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn file_parts_are_found_anywhere_in_an_output_and_nothing_else_is() {
        let output = json!({
            "chart": { "type": "file", "data": "aGk=", "mediaType": "image/png" },
            "a/b": [1, { "type": "file", "data": "aGk=", "mediaType": "text/plain" }],
            "not": { "type": "file", "data": "aGk=", "mediaType": "image/png", "extra": 1 },
            "text": { "type": "text", "text": "hi" },
        });
        assert!(contains_file_part(&output));
        assert!(!contains_file_part(&json!({ "a": [{ "type": "file" }] })));
        let mut found = file_pointers(&output);
        found.sort();
        assert_eq!(found, ["/a~1b/1", "/chart"]);
        assert_eq!(file_pointers(&json!("aGk=")), Vec::<String>::new());
    }

    #[test]
    fn ids_are_the_digest_of_the_bytes() {
        assert_eq!(
            id_of(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn base64_with_line_breaks_decodes_and_other_text_does_not() {
        assert_eq!(decode("aGVs\nbG8=").as_deref(), Some(&b"hello"[..]));
        assert_eq!(decode("aGVsbG8="), Some(b"hello".to_vec()));
        assert_eq!(decode("not base64!"), None);
    }

    #[test]
    fn extensions_come_from_plain_subtypes() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("image/svg+xml"), "svg");
        assert_eq!(extension("image/jpeg"), "jpg");
        assert_eq!(extension("text/plain; charset=utf-8"), "txt");
        assert_eq!(extension("application/vnd.ms-excel"), "bin");
        assert_eq!(extension("nonsense"), "bin");
    }

    #[test]
    fn sandbox_paths_stay_in_the_attachments_directory_whatever_the_session_id() {
        let path = sandbox_path("../../etc", &id_of(b"x"), "image/png");
        assert!(path.starts_with(".toolwright/attachments/"), "{path}");
        assert!(!path.contains(".."), "{path}");
        assert!(path.ends_with(".png"), "{path}");
    }
}
