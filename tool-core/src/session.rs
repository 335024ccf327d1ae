//! Who is calling: principals, the caller kind and the session a call belongs to.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// An authenticated identity: a user, the application runtime, a service.
///
/// Two principals are the same only when authenticator, issuer, type and id all match: two
/// authentication systems may both have a `u_42`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    /// The system that authenticated this principal (`"oidc"`, `"slack"`, `"app"`).
    pub authenticator: String,
    /// The issuer within that system, when it has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// What kind of principal this is.
    pub principal_type: PrincipalType,
    /// The id within the issuer.
    pub principal_id: String,
    /// Free-form attributes the host attaches (tenant id, roles, ...).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub attributes: Map<String, Value>,
}

/// The kind of a [`Principal`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalType {
    /// A person.
    User,
    /// The application itself (schedules, internal runs).
    Runtime,
    /// Another service acting on its own behalf.
    Service,
}

impl Principal {
    /// A user principal from `authenticator` with id `id`.
    pub fn user(authenticator: impl Into<String>, id: impl Into<String>) -> Self {
        Principal {
            authenticator: authenticator.into(),
            issuer: None,
            principal_type: PrincipalType::User,
            principal_id: id.into(),
            attributes: Map::new(),
        }
    }

    /// The application identity that schedules run as.
    pub fn app() -> Self {
        Principal {
            authenticator: "app".into(),
            issuer: None,
            principal_type: PrincipalType::Runtime,
            principal_id: "toolwright:app".into(),
            attributes: Map::new(),
        }
    }

    /// `self` with attribute `key` set to `value`.
    pub fn with_attribute(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.attributes.insert(key.into(), value.into());
        self
    }

    /// Whether `self` and `other` are the same identity (authenticator, issuer, type and id).
    pub fn same_as(&self, other: &Principal) -> bool {
        self.authenticator == other.authenticator
            && self.issuer == other.issuer
            && self.principal_type == other.principal_type
            && self.principal_id == other.principal_id
    }

    /// Whether this is the application identity schedules run as.
    pub fn is_app(&self) -> bool {
        self.same_as(&Principal::app())
    }

    /// The string attribute `key`, if present.
    pub fn attribute_str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }

    /// Whether the array attribute `key` contains the string `value` (e.g. a role).
    pub fn has_in(&self, key: &str, value: &str) -> bool {
        self.attributes
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(|item| item.as_str() == Some(value)))
    }
}

/// Who issued a call: the audience a tool must be visible to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Caller {
    /// The model of a top-level session.
    Model,
    /// The model of a delegated (subagent) session.
    Subagent,
    /// A person through the user interface (a page, a widget). Calls in a turn with this
    /// caller are the person's own actions: no approval is asked for them (a custom policy's
    /// denial, and a response policy that would not let this person approve, still stop them).
    User,
    /// A schedule, running as the application identity.
    Schedule,
}

impl Caller {
    /// Whether this caller is a model (top-level or subagent).
    pub const fn is_model(self) -> bool {
        matches!(self, Caller::Model | Caller::Subagent)
    }
}

/// The session a call belongs to: ids, lineage and identities.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// The current turn id; unchanged across a park and resume.
    pub turn_id: String,
    /// The parent session, in a delegated (subagent) session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Who created the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initiator: Option<Principal>,
    /// Who is acting in the current turn (may differ from the initiator in a shared thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Principal>,
    /// Whether a person can be asked for input (false for schedules).
    pub interactive: bool,
}

impl SessionInfo {
    /// A session with ids `id` and `turn_id`, interactive, with no identities.
    pub fn new(id: impl Into<String>, turn_id: impl Into<String>) -> Self {
        SessionInfo {
            id: id.into(),
            turn_id: turn_id.into(),
            parent: None,
            initiator: None,
            current: None,
            interactive: true,
        }
    }
}

/// A typed key of a session's persistent state: the name it is stored under and the type of
/// its value. Declare it once as a constant and share it between the tool that writes it
/// (`ctx.set_session_state(&KEY, &value)`), the `enabled` predicate that reads it
/// ([`EnabledContext::get`](crate::EnabledContext::get)) and the host
/// ([`Session::set_state`] in the runtime takes its [`name`](StateKey::name)).
///
/// ```
/// use toolwright_core::session::StateKey;
/// const RELEASE_APPROVED: StateKey<bool> = StateKey::new("release_approved");
/// assert_eq!(RELEASE_APPROVED.name(), "release_approved");
/// ```
///
/// Names starting with `toolwright.` are the runtime's own: a tool writing one is refused.
///
/// [`Session::set_state`]: https://docs.rs/toolwright/latest/toolwright/runtime/struct.Session.html#method.set_state
pub struct StateKey<T> {
    name: &'static str,
    value: std::marker::PhantomData<fn() -> T>,
}

impl<T> StateKey<T> {
    /// The key stored under `name`, holding a `T` (as JSON).
    pub const fn new(name: &'static str) -> Self {
        StateKey {
            name,
            value: std::marker::PhantomData,
        }
    }

    /// The name the value is stored under.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<T> Clone for StateKey<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for StateKey<T> {}

impl<T> std::fmt::Debug for StateKey<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StateKey<{}>({:?})",
            std::any::type_name::<T>(),
            self.name
        )
    }
}

/// The prefix of the state keys the runtime keeps for itself.
pub const RESERVED_STATE_PREFIX: &str = "toolwright.";
