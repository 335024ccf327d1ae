//! The part `attachments`.

use super::part::Part;
use crate::record::{AttachmentPlace, AttachmentRecord};
use crate::store::Store;

/// An attachment of `session`: `bytes` under an id made of them (the suite does not recompute
/// digests: the store only keys by id).
fn record(session: &str, id: &str, place: AttachmentPlace) -> AttachmentRecord {
    let size = match &place {
        AttachmentPlace::Stored(bytes) => bytes.len() as u64,
        AttachmentPlace::Sandbox(_) => 3,
    };
    AttachmentRecord {
        session_id: session.to_owned(),
        id: id.to_owned(),
        media_type: "image/png".to_owned(),
        size,
        place,
    }
}

/// Attachments: stored once per session and id (a second store of an id is a no-op, not an
/// error), read back byte for byte (any byte, a NUL too), kept per session, and deleted with
/// their session's attachments and only those. A store that keeps none
/// ([`Store::keeps_attachments`] is `false`) is not held to this part.
pub async fn attachments(store: &dyn Store) {
    if !store.keeps_attachments() {
        return;
    }
    let part = Part::new("attachments");
    let (s1, s2) = (part.id("s1"), part.id("s2"));
    let bytes: Vec<u8> = (0..=255).chain([0, 0, 255]).collect();
    let png = record(&s1, "sha256:aa", AttachmentPlace::Stored(bytes.clone()));
    part.ok("storing an attachment", store.put_attachment(&png).await);
    let again = record(&s1, "sha256:aa", AttachmentPlace::Stored(vec![9]));
    part.ok(
        "storing the same id again",
        store.put_attachment(&again).await,
    );
    let read = |session: String, id: &'static str| {
        let part = &part;
        async move {
            part.ok(
                "reading an attachment",
                store.attachment(&session, id).await,
            )
        }
    };
    assert_eq!(
        read(s1.clone(), "sha256:aa").await,
        Some(png.clone()),
        "{part}: an attachment comes back as first stored, byte for byte"
    );
    assert_eq!(
        read(s2.clone(), "sha256:aa").await,
        None,
        "{part}: attachments are per session"
    );
    assert_eq!(
        read(s1.clone(), "sha256:bb").await,
        None,
        "{part}: an id never stored is not there"
    );

    let in_sandbox = record(
        &s1,
        "sha256:bb",
        AttachmentPlace::Sandbox(".toolwright/attachments/x/bb.png".to_owned()),
    );
    part.ok(
        "storing an attachment kept in the sandbox",
        store.put_attachment(&in_sandbox).await,
    );
    assert_eq!(
        read(s1.clone(), "sha256:bb").await,
        Some(in_sandbox),
        "{part}: an attachment kept in the sandbox comes back with its path"
    );
    // Bytes kept in the store replace a sandbox path (its file may be gone), never the
    // other way round.
    let kept = record(&s1, "sha256:bb", AttachmentPlace::Stored(vec![4, 5, 6]));
    part.ok(
        "storing the bytes of an attachment kept in the sandbox",
        store.put_attachment(&kept).await,
    );
    assert_eq!(
        read(s1.clone(), "sha256:bb").await.map(|r| r.place),
        Some(AttachmentPlace::Stored(vec![4, 5, 6])),
        "{part}: stored bytes replace a sandbox path"
    );
    let back = record(
        &s1,
        "sha256:bb",
        AttachmentPlace::Sandbox(".toolwright/attachments/x/bb.png".to_owned()),
    );
    part.ok(
        "storing a sandbox path again",
        store.put_attachment(&back).await,
    );
    assert_eq!(
        read(s1.clone(), "sha256:bb").await.map(|r| r.place),
        Some(AttachmentPlace::Stored(vec![4, 5, 6])),
        "{part}: a sandbox path never replaces stored bytes"
    );
    let other = record(&s2, "sha256:aa", AttachmentPlace::Stored(vec![1, 2, 3]));
    part.ok(
        "storing the same id in another session",
        store.put_attachment(&other).await,
    );

    assert_eq!(
        part.ok(
            "deleting a session's attachments",
            store.delete_attachments(&s1).await
        ),
        2,
        "{part}: deleting counts the session's attachments"
    );
    assert_eq!(read(s1.clone(), "sha256:aa").await, None, "{part}: deleted");
    assert_eq!(read(s1.clone(), "sha256:bb").await, None, "{part}: deleted");
    assert_eq!(
        read(s2.clone(), "sha256:aa").await,
        Some(other),
        "{part}: another session's attachments stay"
    );
    assert_eq!(
        part.ok("deleting again", store.delete_attachments(&s1).await),
        0,
        "{part}: nothing is left to delete"
    );
}
