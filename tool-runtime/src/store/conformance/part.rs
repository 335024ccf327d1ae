//! [`Part`]: what each part of the suite names itself by in messages, and how it keeps its ids
//! its own.

use std::fmt::Debug;

use crate::store::StoreError;

/// One part of the suite: its name for messages and a prefix that keeps its ids its own.
pub(super) struct Part {
    name: &'static str,
    prefix: String,
}

impl Part {
    pub(super) fn new(name: &'static str) -> Self {
        Part {
            name,
            prefix: format!("conformance-{name}-{}", uuid::Uuid::new_v4()),
        }
    }

    /// An id unique to this run of the part.
    pub(super) fn id(&self, local: &str) -> String {
        format!("{}-{local}", self.prefix)
    }

    #[track_caller]
    pub(super) fn ok<T>(&self, doing: &str, result: Result<T, StoreError>) -> T {
        result.unwrap_or_else(|error| panic!("{self}: {doing} failed: {error}"))
    }

    #[track_caller]
    pub(super) fn refused<T: Debug>(&self, doing: &str, result: Result<T, StoreError>) {
        match result {
            Err(StoreError::Conflict(_)) => {}
            other => {
                panic!("{self}: {doing} must be refused with StoreError::Conflict, got {other:?}")
            }
        }
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "store conformance, part `{}`", self.name)
    }
}

pub(super) fn part_ok<T>(what: &str, result: Result<T, StoreError>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("store conformance: {what} failed: {error}"),
    }
}
