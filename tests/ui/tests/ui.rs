//! The compile-time contract of `#[tool]` and `#[derive(ToolInput)]`: every rule C1–C26 has a
//! failing case in `fail/<rule>_<slug>.rs` whose `.stderr` is the message a user sees, and
//! `pass/` uses every key of the attribute. The cases build on the lean core
//! (`default-features = false`), as a user's crate without the runtime would. Snapshots are
//! made by the toolchain pinned in `rust-toolchain.toml`; regenerate with
//! `TRYBUILD=overwrite cargo test -p toolwright-ui` and read the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("pass/*.rs");
    cases.compile_fail("fail/*.rs");
}
