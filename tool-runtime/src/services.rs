//! The host's services: application state registered on the runtime builder, by type.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// Application state registered on the runtime, by type.
pub(crate) type States = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;
