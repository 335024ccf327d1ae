//! Versioned bodies: a `durable` or `workflow` body whose code changes while runs are parked
//! branches on a version marker recorded in its journal, so runs recorded before the change
//! replay the old path and new runs take the new one (Temporal's `patched`).

use super::{DurableContext, WorkflowContext};
use crate::error::{ErrorCode, ToolError};

/// A marker must be named, and stay the same on every run.
fn check_marker(marker: &str) -> Result<(), ToolError> {
    if marker.trim().is_empty() {
        return Err(ToolError::with_code(
            ErrorCode::Journal,
            "a version marker needs a name, e.g. `ctx.patched(\"fix-retry\")`",
        ));
    }
    Ok(())
}

macro_rules! versioned {
    ($($context:ty),*) => {$(
        impl $context {
            /// Whether this run takes the code added under version marker `marker`: `true` for
            /// a run that reaches the marker as new work (the marker is recorded in its
            /// journal, so its replays say `true` again), `false` for a run whose journal was
            /// recorded before the marker existed (it replays the old path). Write a change to
            /// a body as `if ctx.patched("fix-retry").await? { new } else { old }`; once no run
            /// recorded before the change is left, drop the old branch (keep the call while
            /// runs recorded with the marker may replay).
            ///
            /// Outside the runtime (a detached host) there is no journal: always `true`.
            pub async fn patched(&self, marker: impl AsRef<str>) -> Result<bool, ToolError> {
                let marker = marker.as_ref();
                check_marker(marker)?;
                self.cx.host().patched(marker).await
            }
        }
    )*};
}

versioned!(DurableContext, WorkflowContext);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::context::{CallContext, DetachedHost, DurableParam};

    #[test]
    fn a_detached_body_takes_the_new_path_and_a_marker_needs_a_name() {
        futures_executor::block_on(async {
            let cx = CallContext::builder()
                .host(Arc::new(DetachedHost::default()))
                .build();
            let ctx = <DurableContext as DurableParam>::from_call(&cx).unwrap();
            assert!(ctx.patched("fix-retry").await.unwrap());
            let error = ctx.patched(" ").await.unwrap_err();
            assert_eq!(error.code(), ErrorCode::Journal);
        })
    }
}
