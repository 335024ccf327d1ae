//! A call's cancellation token, made only when something asks for it.
//!
//! Every call is cancelled with its turn (or its step, when the user steers), and on its own
//! when it times out. A child token of the turn's would say both, but making one takes the
//! parent's lock (to register the child) and dropping it takes it again: on every call, for
//! bodies that mostly never look. [`CallToken`] reads the parent until a body, a task call or a
//! timeout needs a token of the call's own, and makes the child then.

use std::sync::OnceLock;

use tokio_util::sync::CancellationToken;

/// The token a call's body sees ([`CallHost::cancelled`](toolwright_core::CallHost::cancelled)).
pub(crate) struct CallToken {
    /// What cancels the call from outside: its turn's (or step's) token.
    parent: CancellationToken,
    /// The call's own: a child of `parent`, made on first use.
    own: OnceLock<CancellationToken>,
}

impl CallToken {
    /// A token of the call's own below `parent`, made when first asked for.
    pub(crate) fn child_of(parent: &CancellationToken) -> Self {
        CallToken {
            parent: parent.clone(),
            own: OnceLock::new(),
        }
    }

    /// `token` itself as the call's own (a task's body: the token is the task's already).
    pub(crate) fn given(token: CancellationToken) -> Self {
        CallToken {
            parent: token.clone(),
            own: OnceLock::from(token),
        }
    }

    /// The call's own token, made now if nothing asked before.
    pub(crate) fn token(&self) -> &CancellationToken {
        self.own.get_or_init(|| self.parent.child_token())
    }

    /// Cancels the call (not its parent).
    pub(crate) fn cancel(&self) {
        self.token().cancel();
    }

    /// Whether the call was cancelled, on its own or with its parent. Makes no token: until one
    /// is made, only the parent can have fired.
    pub(crate) fn is_cancelled(&self) -> bool {
        match self.own.get() {
            Some(own) => own.is_cancelled(),
            None => self.parent.is_cancelled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_fired_before_the_token_is_made_is_seen() {
        let parent = CancellationToken::new();
        let call = CallToken::child_of(&parent);
        assert!(!call.is_cancelled());
        parent.cancel();
        assert!(call.is_cancelled(), "read through the parent");
        assert!(
            call.token().is_cancelled(),
            "a child made after its parent fired is fired"
        );
    }

    #[test]
    fn cancelling_the_call_leaves_its_parent_running() {
        let parent = CancellationToken::new();
        let call = CallToken::child_of(&parent);
        call.cancel();
        assert!(call.is_cancelled());
        assert!(call.token().is_cancelled());
        assert!(!parent.is_cancelled());
    }

    #[test]
    fn a_made_token_fires_with_its_parent() {
        let parent = CancellationToken::new();
        let call = CallToken::child_of(&parent);
        let own = call.token().clone();
        parent.cancel();
        assert!(own.is_cancelled());
        assert!(call.is_cancelled());
    }

    #[test]
    fn a_given_token_is_the_calls_own() {
        let token = CancellationToken::new();
        let call = CallToken::given(token.clone());
        call.cancel();
        assert!(
            token.is_cancelled(),
            "cancelling the call fires the given token"
        );
    }
}
