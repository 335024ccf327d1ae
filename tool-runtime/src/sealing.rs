//! Sealed sensitive input: what the runtime keeps of a call's sensitive values (see
//! [`toolwright_core::sensitive`]) so that it can run the call later, in this or another process.
//!
//! A call that parks (on an approval, a question, a timer), a call recorded as running (so a
//! crash can be recovered) and a task's calls keep their input in the store. Each sensitive
//! value in it is stored sealed: encrypted and authenticated with XChaCha20-Poly1305 under a key
//! the runtime holds ([`Options::sealing`](crate::Options::sealing)), bound to the tool and
//! the session, as `{"$sealed": "v1.<key id>.<nonce and ciphertext, base64url>"}`. Whatever reads a record
//! (a person, an export, a console) sees only that; the call, when it runs, gets the value.
//!
//! The default key is made when the options are and lives as long as the process: a call
//! parked in one process and resumed in another (after a restart, or on another instance)
//! cannot be opened there and fails with a message that asks the model to call again, which
//! asks the person again. Give every instance the same key (and keep older ones with
//! [`Sealing::with_previous`] while records sealed with them may still be resumed) to resume
//! anywhere.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toolwright_core::Registry;
use toolwright_core::sensitive::SensitivePaths;

/// The key a sealed value names is written with this prefix and version.
const VERSION: &str = "v1";
/// The field of a sealed value.
const SEALED: &str = "$sealed";
const NONCE_BYTES: usize = 24;

/// The keys that seal the sensitive input the runtime stores: the first seals, every one opens.
///
/// ```
/// use toolwright_runtime::{Options, Sealing};
///
/// // 32 bytes, e.g. from a secret manager, the same on every instance.
/// let key = [7u8; 32];
/// let options = Options { sealing: Sealing::new(key), ..Options::default() };
/// assert!(!options.sealing.is_ephemeral());
/// assert!(Sealing::from_base64("not a key").is_err());
/// ```
#[derive(Clone)]
pub struct Sealing {
    keys: Arc<[SealKey]>,
    ephemeral: bool,
}

struct SealKey {
    /// The first 8 bytes of the key's SHA-256, hex: which key sealed a value.
    id: String,
    cipher: XChaCha20Poly1305,
}

impl SealKey {
    fn new(key: &[u8; 32]) -> SealKey {
        let digest = Sha256::digest(key);
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        SealKey {
            id,
            cipher: XChaCha20Poly1305::new(key.into()),
        }
    }
}

impl std::fmt::Debug for Sealing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealing")
            .field("keys", &self.keys.iter().map(|k| &k.id).collect::<Vec<_>>())
            .field("ephemeral", &self.ephemeral)
            .finish()
    }
}

impl Default for Sealing {
    fn default() -> Self {
        Sealing::ephemeral()
    }
}

/// A key that cannot seal: not 32 bytes of base64.
#[derive(Debug, thiserror::Error)]
#[error(
    "a sealing key is 32 random bytes in base64 (e.g. `openssl rand -base64 32`); this one {0}"
)]
pub struct SealingKeyError(String);

impl Sealing {
    /// Seals with `key` (32 random bytes, the same on every instance that shares the store).
    pub fn new(key: [u8; 32]) -> Sealing {
        Sealing {
            keys: Arc::from([SealKey::new(&key)]),
            ephemeral: false,
        }
    }

    /// Seals with the key `text` holds in base64 (standard or URL-safe, padded or not).
    pub fn from_base64(text: &str) -> Result<Sealing, SealingKeyError> {
        decode_key(text).map(Sealing::new)
    }

    /// A random key of this process only (the default): parked calls with sensitive input
    /// resume only in the process that parked them.
    pub fn ephemeral() -> Sealing {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system's random source");
        Sealing {
            ephemeral: true,
            ..Sealing::new(key)
        }
    }

    /// Also opens values sealed with `key` (a key being rotated out); sealing still uses the
    /// first key.
    pub fn with_previous(self, key: [u8; 32]) -> Sealing {
        let mut keys: Vec<SealKey> = self
            .keys
            .iter()
            .map(|k| SealKey {
                id: k.id.clone(),
                cipher: k.cipher.clone(),
            })
            .collect();
        keys.push(SealKey::new(&key));
        Sealing {
            keys: keys.into(),
            ephemeral: self.ephemeral,
        }
    }

    /// Whether the key lives only as long as this process.
    pub fn is_ephemeral(&self) -> bool {
        self.ephemeral
    }

    /// Seals every sensitive value of `input`, a call in `scope`, in place.
    pub(crate) fn seal(&self, paths: &SensitivePaths, scope: SealScope<'_>, input: &mut Value) {
        if paths.is_empty() {
            return;
        }
        paths.for_each(input, &mut |leaf| {
            if !is_sealed(leaf) {
                *leaf = self.sealed(leaf, scope);
            }
        });
    }

    /// `value` sealed whole, for a call in `scope`.
    pub(crate) fn sealed(&self, value: &Value, scope: SealScope<'_>) -> Value {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).expect("the operating system's random source");
        let plain = serde_json::to_vec(value).unwrap_or_default();
        let aad = scope.aad(&key.id);
        let payload = Payload {
            msg: &plain,
            aad: aad.as_bytes(),
        };
        // Encryption of a buffer in memory does not fail; should it, nothing is kept.
        let Ok(sealed) = key.cipher.encrypt(XNonce::from_slice(&nonce), payload) else {
            return Value::String(toolwright_core::sensitive::REDACTED.to_owned());
        };
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        let text = format!("{VERSION}.{}.{}", key.id, URL_SAFE_NO_PAD.encode(bytes));
        Value::Object(Map::from_iter([(SEALED.to_owned(), Value::String(text))]))
    }

    /// Opens the sealed values of `input`, a call in `scope`, in place: wherever they are (the
    /// tool's schema may have changed since they were sealed), for a tool with sensitive input;
    /// for any tool, input sealed whole. Values stored plainly (by a release before sealing)
    /// are left as they are. Fails naming the first value it cannot open.
    pub(crate) fn open(
        &self,
        paths: &SensitivePaths,
        scope: SealScope<'_>,
        input: &mut Value,
    ) -> Result<(), Unsealable> {
        if is_sealed(input) {
            *input = self.open_one(input, scope)?;
        }
        if paths.is_empty() {
            return Ok(());
        }
        self.open_within(input, scope)
    }

    fn open_within(&self, value: &mut Value, scope: SealScope<'_>) -> Result<(), Unsealable> {
        match value {
            Value::Object(_) if is_sealed(value) => {
                *value = self.open_one(value, scope)?;
                Ok(())
            }
            Value::Object(map) => map
                .values_mut()
                .try_for_each(|v| self.open_within(v, scope)),
            Value::Array(items) => items
                .iter_mut()
                .try_for_each(|v| self.open_within(v, scope)),
            _ => Ok(()),
        }
    }

    fn open_one(&self, leaf: &Value, scope: SealScope<'_>) -> Result<Value, Unsealable> {
        let text = leaf[SEALED].as_str().unwrap_or_default();
        let mut parts = text.splitn(3, '.');
        let (Some(VERSION), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(Unsealable::Corrupt);
        };
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| Unsealable::UnknownKey(id.to_owned()))?;
        let bytes = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| Unsealable::Corrupt)?;
        if bytes.len() < NONCE_BYTES {
            return Err(Unsealable::Corrupt);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let aad = scope.aad(&key.id);
        let payload = Payload {
            msg: sealed,
            aad: aad.as_bytes(),
        };
        let plain = key
            .cipher
            .decrypt(XNonce::from_slice(nonce), payload)
            .map_err(|_| Unsealable::Corrupt)?;
        serde_json::from_slice(&plain).map_err(|_| Unsealable::Corrupt)
    }
}

/// A model's call as read before routing: the tool it names (the one a `tool_call` wraps)
/// and its arguments, parsed when they are JSON. What `Runtime::seal_arguments` and the
/// `action.requested` event of a refused call both need.
pub(crate) struct CalledTool {
    /// The tool's name.
    pub(crate) name: String,
    arguments: Option<Value>,
    wrapped: bool,
}

impl CalledTool {
    pub(crate) fn parse(name: &str, arguments: &str) -> CalledTool {
        let arguments = serde_json::from_str::<Value>(arguments).ok();
        let wrapped = name == "tool_call";
        let named = wrapped
            .then(|| arguments.as_ref()?.get("name")?.as_str())
            .flatten();
        CalledTool {
            name: named.unwrap_or(name).to_owned(),
            wrapped: named.is_some(),
            arguments,
        }
    }

    /// The tool's input in the arguments (under `input` for a `tool_call`); `None` when the
    /// arguments are not JSON or a `tool_call` carries no input.
    pub(crate) fn input_mut(&mut self) -> Option<&mut Value> {
        let arguments = self.arguments.as_mut()?;
        if self.wrapped {
            arguments.get_mut("input")
        } else {
            Some(arguments)
        }
    }

    /// The arguments as JSON text again.
    pub(crate) fn text(&self) -> String {
        self.arguments
            .as_ref()
            .map_or_else(String::new, Value::to_string)
    }
}

/// What [`Runtime::seal_arguments`](crate::Runtime::seal_arguments) returns: `arguments` of
/// tool `name` with their sensitive values sealed. Arguments of a tool with sensitive input (or
/// of a tool this runtime does not know) that hold no input it can read are not kept.
pub(crate) fn seal_arguments(
    registry: &Registry,
    sealing: &Sealing,
    session: &str,
    name: &str,
    arguments: &str,
) -> String {
    let mut called = CalledTool::parse(name, arguments);
    let tool = registry.get(&called.name);
    if tool.is_some_and(|t| t.sensitivity().input.is_empty()) {
        return arguments.to_owned();
    }
    let tool_name = called.name.clone();
    let scope = SealScope {
        tool: &tool_name,
        session,
    };
    let Some(input) = called.input_mut() else {
        return "{}".to_owned();
    };
    match tool {
        Some(tool) => sealing.seal(&tool.sensitivity().input, scope, input),
        // A tool this runtime does not know now (a connection down): which values are
        // sensitive is unknown, so the input is sealed whole.
        None => *input = sealing.sealed(input, scope),
    }
    called.text()
}

/// What a sealed value is bound to: it opens only for a call of this tool in this session,
/// so a value copied from one session's records into another's call does not open.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SealScope<'a> {
    /// The tool's model-facing name.
    pub(crate) tool: &'a str,
    /// The session.
    pub(crate) session: &'a str,
}

impl SealScope<'_> {
    /// The associated data authenticated with the value: the format, the key, the tool, the
    /// session.
    fn aad(&self, key_id: &str) -> String {
        format!("{VERSION}\n{key_id}\n{}\n{}", self.tool, self.session)
    }
}

/// Why a sealed value could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsealable {
    /// Sealed with a key this runtime does not hold (its id).
    UnknownKey(String),
    /// Not a value this runtime sealed, or changed since.
    Corrupt,
}

impl Unsealable {
    /// What the model (and the host) read when a call cannot run because of it.
    pub(crate) fn message(&self, tool: &str) -> String {
        match self {
            Unsealable::UnknownKey(id) => format!(
                "`{tool}` did not run: its sensitive input was sealed by another process (key {id}) and this one cannot open it, so it is gone; call the tool again with the input (ask the user for it again if you need to). Operators: give every instance the same `Options::sealing` key to resume such calls anywhere"
            ),
            Unsealable::Corrupt => format!(
                "`{tool}` did not run: its stored sensitive input does not open here (it was sealed for another tool or session, or changed since); call the tool again with the input"
            ),
        }
    }
}

fn is_sealed(value: &Value) -> bool {
    matches!(value, Value::Object(map) if map.len() == 1 && map.get(SEALED).is_some_and(Value::is_string))
}

fn decode_key(text: &str) -> Result<[u8; 32], SealingKeyError> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE};
    let text = text.trim();
    let bytes = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| SealingKeyError("is not base64".into()))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| SealingKeyError(format!("has {} bytes", bytes.len())))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn paths() -> SensitivePaths {
        SensitivePaths::of_schema(&json!({"type": "object", "properties": {
            "user": {"type": "string"},
            "pin": {"type": "integer", "writeOnly": true},
            "cards": {"type": "array", "items": {"type": "string", "writeOnly": true}}}}))
    }

    fn scope<'a>(tool: &'a str, session: &'a str) -> SealScope<'a> {
        SealScope { tool, session }
    }

    #[test]
    fn sealed_input_opens_with_the_key_the_tool_and_the_session_only() {
        let sealing = Sealing::new([1; 32]);
        let input = json!({"user": "ada", "pin": 4711, "cards": ["4242 4242"]});
        let mut stored = input.clone();
        sealing.seal(&paths(), scope("pay", "s1"), &mut stored);
        let text = stored.to_string();
        assert!(!text.contains("4711") && !text.contains("4242"), "{text}");
        assert_eq!(stored["user"], "ada");

        let mut opened = stored.clone();
        sealing
            .open(&paths(), scope("pay", "s1"), &mut opened)
            .unwrap();
        assert_eq!(opened, input);

        let rotated = Sealing::new([2; 32]).with_previous([1; 32]);
        let mut opened = stored.clone();
        rotated
            .open(&paths(), scope("pay", "s1"), &mut opened)
            .unwrap();
        assert_eq!(opened, input);

        let mut other_tool = stored.clone();
        assert_eq!(
            sealing.open(&paths(), scope("refund", "s1"), &mut other_tool),
            Err(Unsealable::Corrupt)
        );
        let mut other_session = stored.clone();
        assert_eq!(
            sealing.open(&paths(), scope("pay", "s2"), &mut other_session),
            Err(Unsealable::Corrupt)
        );
        // Opened wherever it is, even where the schema no longer marks it.
        let mut moved = json!({"user": stored["cards"][0].clone()});
        sealing
            .open(&paths(), scope("pay", "s1"), &mut moved)
            .unwrap();
        assert_eq!(moved, json!({"user": "4242 4242"}));
        let mut other_key = stored.clone();
        assert!(matches!(
            Sealing::ephemeral().open(&paths(), scope("pay", "s1"), &mut other_key),
            Err(Unsealable::UnknownKey(_))
        ));
    }

    #[test]
    fn plain_values_from_before_sealing_are_kept() {
        let mut old = json!({"user": "ada", "pin": 4711});
        Sealing::ephemeral()
            .open(&paths(), scope("pay", "s1"), &mut old)
            .unwrap();
        assert_eq!(old["pin"], 4711);
    }

    #[test]
    fn keys_decode_from_base64() {
        let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
        assert!(!Sealing::from_base64(&key).unwrap().is_ephemeral());
        let short = Sealing::from_base64("AAAA").unwrap_err().to_string();
        assert!(short.contains("has 3 bytes"), "{short}");
    }
}
