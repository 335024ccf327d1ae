//! The compile-time contract of `#[tool]` lives in this crate's `tests/ui.rs`; the library is
//! empty.
