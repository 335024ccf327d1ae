//! The integration tests that can share one binary: one module per area, all on
//! `Registry::from_tools`, none re-running its own executable. Every test binary links the whole
//! facade, so after a change to a library crate one binary here relinks once where 18 did.
//!
//! Files stay separate binaries (at the top of `tests/`) when:
//! - they call `Registry::collect()`, which gathers every `#[tool]` linked into the binary
//!   (`registry`, `validation`, `seed_tools`, `runtime_seeds`, `runtime_seed_workflows`,
//!   `instances_postgres`);
//! - their harness re-runs its own executable or runs the example binaries (`runtime_durable`,
//!   `runtime_processes`, `runtime_crash_harness`, `runtime_task_crashes`, `instances_postgres`,
//!   `example_host`, `example_provision`, `mcp_clients`);
//! - they are a compile test (`ui`) or a crate under strict lints (`lints`).
//!
//! The modules run in one process: none may set environment variables, change the working
//! directory or install a global subscriber. Snapshots live in `snapshots/` here, named
//! `it__<module>__<name>.snap`.

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "agent")]
mod agent_decider;
#[cfg(feature = "agent")]
mod agent_delegation;
#[cfg(feature = "agent")]
mod agent_files;
#[cfg(feature = "agent")]
mod agent_limits;
#[cfg(feature = "agent")]
mod agent_steering;
mod answer_cost;
mod ask_deadlines;
mod attachments;
#[cfg(feature = "console")]
mod console_connections;
mod credentials;
mod dynamic_description;
mod dynamic_tools;
mod exports;
mod guardrails;
mod hooks;
mod i18n;
#[cfg(feature = "postgres")]
mod instances_wakeups;
mod remote_mcp;
mod retention;
mod runtime_approvals;
mod runtime_bad_input;
mod runtime_injection;
mod runtime_leases;
mod runtime_model;
mod runtime_pipeline;
mod runtime_policies;
mod runtime_protocol;
mod runtime_provider;
mod runtime_questions;
mod runtime_robustness;
mod runtime_steering;
mod runtime_tainted_turn;
mod runtime_tasks;
mod runtime_workflows;
mod sandbox_tools;
mod sensitive;
mod serve_revisions;
mod session_delete;
mod session_state;
mod step_cost;
mod store_upgrade;
mod store_upgrade_files;
#[cfg(feature = "postgres")]
mod store_upgrade_pg;
#[cfg(feature = "postgres")]
mod store_upgrade_pg_v1;
#[cfg(feature = "postgres")]
mod store_upgrade_pg_v2;
#[cfg(feature = "postgres")]
mod store_upgrade_pg_v4;
mod store_upgrade_v6;
mod store_upgrade_v7;
mod toolset_context;
mod ui_calls;
mod upgrade_checks;
mod versioned_bodies;
