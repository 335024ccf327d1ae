//! The compile-time contract of `#[tool]` and `#[derive(ToolInput)]`: every rule C1–C20 has a
//! failing case in `tests/ui/fail/<rule>_<slug>.rs` whose `.stderr` is the message a user sees,
//! and `tests/ui/pass/` uses every key of the attribute. Snapshots are made by the toolchain
//! pinned in `rust-toolchain.toml`; regenerate with `TRYBUILD=overwrite cargo test --test ui`
//! and read the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
