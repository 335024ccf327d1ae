//! The tokio runtime of toolwright: sessions, turns and steps, the call pipeline, approvals and
//! input requests, taint, workflow and durable execution, stores and MCP serving.
//!
//! It discovers tools through [`toolwright_core::Registry`]; generated code never depends on it.
//! The pipeline lands with the runtime issue; this crate currently re-exports the registry it
//! builds on.

#![warn(missing_docs)]

pub use toolwright_core::Registry;
