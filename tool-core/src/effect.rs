//! What kind of thing a tool does, and the MCP annotations derived from it.

use serde::{Deserialize, Serialize};

/// The one kind of thing a tool does. Users grant permissions per effect, and the runtime
/// escalates approvals and taint by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads: balances, lists, searches.
    Read,
    /// Changes state: adds a to-do, follows a post, books a room.
    Write,
    /// Spends money: creates a payment order, recharges a card.
    Money,
    /// Speaks in public: posts or replies where others read it.
    Public,
}

impl Effect {
    /// Every effect, in the order the docs list them.
    pub const ALL: [Effect; 4] = [Effect::Read, Effect::Write, Effect::Money, Effect::Public];

    /// The lowercase name used in attributes, exports and events.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Money => "money",
            Effect::Public => "public",
        }
    }

    /// Whether calls with this effect need confirmation in a tainted turn.
    pub const fn is_guarded_by_taint(self) -> bool {
        !matches!(self, Effect::Read)
    }

    /// The MCP annotation hints this effect implies.
    pub const fn annotations(self) -> Annotations {
        match self {
            Effect::Read => Annotations {
                read_only: Some(true),
                destructive: Some(false),
                idempotent: Some(true),
                open_world: Some(false),
            },
            Effect::Write => Annotations {
                read_only: Some(false),
                destructive: Some(false),
                idempotent: Some(false),
                open_world: Some(false),
            },
            Effect::Money => Annotations {
                read_only: Some(false),
                destructive: Some(true),
                idempotent: Some(false),
                open_world: Some(false),
            },
            Effect::Public => Annotations {
                read_only: Some(false),
                destructive: Some(true),
                idempotent: Some(false),
                open_world: Some(true),
            },
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// MCP tool annotation hints. `None` leaves a hint out (or, in overrides, keeps the derived value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// `readOnlyHint`: the tool does not modify its environment.
    #[serde(rename = "readOnlyHint", skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may perform destructive updates.
    #[serde(rename = "destructiveHint", skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    #[serde(rename = "idempotentHint", skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool reaches entities outside a closed domain.
    #[serde(rename = "openWorldHint", skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl Annotations {
    /// No hints at all; as overrides, keeps every derived value.
    pub const NONE: Annotations = Annotations {
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: None,
    };

    /// `self` with every hint that `overrides` sets replaced.
    pub const fn overridden_by(self, overrides: Annotations) -> Annotations {
        Annotations {
            read_only: or(overrides.read_only, self.read_only),
            destructive: or(overrides.destructive, self.destructive),
            idempotent: or(overrides.idempotent, self.idempotent),
            open_world: or(overrides.open_world, self.open_world),
        }
    }
}

const fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match a {
        Some(v) => Some(v),
        None => b,
    }
}
