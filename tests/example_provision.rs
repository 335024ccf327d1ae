//! The README's interruptible example: `examples/provision.rs` is interrupted with Ctrl-C (a real
//! SIGINT to a real process) mid-way, run again, and resumes from its journal.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

mod support;

use support::programs::example;

#[test]
fn ctrl_c_mid_way_then_a_second_run_resumes_without_repeating_steps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("provision.db");
    let mut first = Command::new(example("provision"))
        .args(["--db", db.to_str().unwrap(), "--step-ms", "800"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let done = line == "ran seed:docs";
        seen.push(line);
        if done {
            break;
        }
    }
    // Ctrl-C while `seed:billing` runs: a moment after `seed:docs` printed, so that its journal
    // record (written right after the print) has landed; `seed:billing` sleeps 800 ms first.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    seen.extend(lines.map(Result::unwrap));
    let exit = first.wait().unwrap();
    assert!(!exit.success(), "the first run was interrupted: {seen:?}");
    assert_eq!(
        seen,
        [
            "provisioning (press Ctrl-C to interrupt, then run again)",
            "ran create-tenant",
            "ran seed:docs"
        ]
    );

    let second = Command::new(example("provision"))
        .args(["--db", db.to_str().unwrap(), "--step-ms", "10"])
        .output()
        .unwrap();
    assert!(second.status.success());
    let text = String::from_utf8(second.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[..2],
        ["ran seed:billing", "ran seed:analytics"],
        "{text}"
    );
    assert!(
        lines[2].starts_with("resumed the interrupted call of turn_"),
        "{text}"
    );
    assert_eq!(
        lines[3],
        r#"done: {"projects":["tn_acme/docs","tn_acme/billing","tn_acme/analytics"],"tenant":"tn_acme"}"#
    );
}
