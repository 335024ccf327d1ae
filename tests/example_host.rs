//! The README's host-integration examples run as real processes and say what the README says:
//! `examples/sandbox.rs` (the built-in tools over a temporary directory) and `examples/host.rs`
//! (toolset instructions and context, a computed description, calls from a page).

use std::process::Command;

mod support;

use support::programs::example;

fn run(name: &str, args: &[&str]) -> String {
    let output = Command::new(example(name)).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{name} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn the_sandbox_example_drives_every_built_in_tool() {
    let dir = tempfile::tempdir().unwrap();
    let out = run("sandbox", &["--dir", dir.path().to_str().unwrap()]);
    for line in [
        "[write ok] Wrote 43 bytes to `notes/plan.md`.",
        "[edit ok] Replaced the text in `notes/plan.md`.",
        "[edit error] the text to replace was not found in `notes/plan.md`",
        "- send it to Ana on Friday",
        "[grep ok] notes/plan.md:2: - draft the report",
        "[glob ok] notes/plan.md",
        "[read error] `../../etc/passwd` is outside the sandbox",
        "approval requested: Run the command \"wc -l notes/plan.md && echo done\" in the sandbox?",
        "3 notes/plan.md",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes/plan.md")).unwrap(),
        "# Plan\n- draft the report\n- send it to Ana on Friday\n"
    );
}

#[test]
fn the_host_example_shows_instructions_context_descriptions_and_page_calls() {
    let out = run("host", &[]);
    for line in [
        "## Tools `focus__*`\nFocus minutes come from the timer; never estimate them.",
        "`genui__show` as the model sees it: Show a native UI card in the chat. Components: chart, timer, map.",
        "page invoked focus.start: \"started `calculus` for Some(\\\"alice\\\"), as User\"",
        "widget reads focus__today: 25",
        "focus__today ran 1 time(s) for the three views",
        "<data toolset=\"focus\">\nThe user focused 25 minutes today.\n</data>",
        "skipped `genui`: the provider did not answer within 800 ms",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}
