//! What a description fn (`#[tool(description = path)]`) sees of the host: the application
//! state the runtime was built with, read-only.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// The host's services, by type: what the runtime builder was given with `.state(...)`.
///
/// A tool whose description depends on the host (the components a device can show, the
/// accounts a deployment serves) names a fn `fn(&Services<'_>) -> String` with
/// `#[tool(description = path)]`. The registry calls it with [`Services::none`] when it collects
/// the tools, and again with the host's services when the runtime is built
/// ([`crate::Registry::describe`]); each tool list is then built once and cached as usual.
///
/// ```
/// use std::any::{Any, TypeId};
/// use std::collections::HashMap;
/// use std::sync::Arc;
/// use toolwright_core::Services;
///
/// struct Catalog {
///     components: Vec<&'static str>,
/// }
///
/// fn describe(services: &Services<'_>) -> String {
///     match services.get::<Catalog>() {
///         Some(catalog) => format!("Show a native UI. Components: {}.", catalog.components.join(", ")),
///         None => "Show a native UI.".to_owned(),
///     }
/// }
///
/// assert_eq!(describe(&Services::none()), "Show a native UI.");
///
/// let mut states: HashMap<TypeId, Arc<dyn Any + Send + Sync>> = HashMap::new();
/// let catalog = Catalog { components: vec!["card", "list"] };
/// states.insert(TypeId::of::<Catalog>(), Arc::new(catalog));
/// assert_eq!(describe(&Services::new(&states)), "Show a native UI. Components: card, list.");
/// ```
#[derive(Clone, Copy)]
pub struct Services<'a> {
    states: Option<&'a HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Services<'static> {
    /// No services: what description fns see when the registry collects the tools, before any
    /// host exists.
    pub const fn none() -> Services<'static> {
        Services { states: None }
    }
}

impl<'a> Services<'a> {
    /// The services in `states`, the map of application state the runtime keeps: each value
    /// is an `Arc<T>` under `TypeId::of::<T>()`.
    pub const fn new(states: &'a HashMap<TypeId, Arc<dyn Any + Send + Sync>>) -> Self {
        Services {
            states: Some(states),
        }
    }

    /// The service of type `T`, if the host has one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&'a T> {
        self.states?.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }

    /// Whether these are [`Services::none`]: no host at all, as opposed to a host without
    /// services.
    pub(crate) fn is_none(&self) -> bool {
        self.states.is_none()
    }
}

impl std::fmt::Debug for Services<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("count", &self.states.map_or(0, HashMap::len))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_found_by_type() {
        let mut states: HashMap<TypeId, Arc<dyn Any + Send + Sync>> = HashMap::new();
        states.insert(TypeId::of::<u32>(), Arc::new(7_u32));
        let services = Services::new(&states);
        assert_eq!(services.get::<u32>(), Some(&7));
        assert_eq!(services.get::<u64>(), None);
        assert_eq!(Services::none().get::<u32>(), None);
        assert_eq!(format!("{services:?}"), "Services { count: 1 }");
    }

    #[test]
    fn a_value_under_the_wrong_type_id_is_not_returned() {
        let mut states: HashMap<TypeId, Arc<dyn Any + Send + Sync>> = HashMap::new();
        states.insert(TypeId::of::<u32>(), Arc::new("seven"));
        assert_eq!(Services::new(&states).get::<u32>(), None);
    }
}
