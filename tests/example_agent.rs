//! `examples/agent.rs` as a person runs it, against a loopback provider: the first process
//! sends a message whose answer calls `restart_service`, is asked to approve it, and leaves the
//! turn waiting when its input ends; a second process started with `--resume` asks again, runs
//! the restart once approved, and prints the model's final text. Each run goes through the
//! `--provider` the example maps to the loopback's wire. A turn past `--max-steps` asks whether
//! it may go on, and a `n` stops it.

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::json;
use toolwright::agent::{LoopbackProvider, Reply, Wire};

mod support;

use support::programs::example;

/// The variables the example reads; every run sets what it needs and nothing leaks in.
const PROVIDER_VARS: &[&str] = &[
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
];

/// A run of the example whose output is read line by line.
struct Run {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
}

impl Run {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut command = Command::new(example("agent"));
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in PROVIDER_VARS {
            command.env_remove(var);
        }
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Run {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Types `line`.
    fn type_line(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("the input is open");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Ends the input (Ctrl-D).
    fn close_input(&mut self) {
        drop(self.child.stdin.take());
    }

    /// The first line printed from now on that holds `marker`.
    fn until(&mut self, marker: &str) -> String {
        for line in self.lines.by_ref() {
            let line = line.unwrap();
            self.seen.push(line.clone());
            if line.contains(marker) {
                return line;
            }
        }
        panic!(
            "the example ended without printing {marker:?}:\n{}\nstderr:\n{}",
            self.seen.join("\n"),
            std::io::read_to_string(self.child.stderr.take().unwrap()).unwrap()
        );
    }

    /// Everything printed so far and until the process exits; it must exit successfully.
    fn finish(mut self) -> String {
        self.seen.extend(self.lines.by_ref().map(Result::unwrap));
        let status = self.child.wait().unwrap();
        let out = self.seen.join("\n");
        assert!(status.success(), "the example failed ({status}):\n{out}");
        out
    }
}

/// The flags of a run against `provider` on the store `db`, with the example's `--provider`.
fn flags<'a>(provider: &'a str, base_url: &'a str, db: &'a Path) -> Vec<&'a str> {
    vec![
        "--provider",
        provider,
        "--model",
        "loopback-model",
        "--base-url",
        base_url,
        "--db",
        db.to_str().unwrap(),
    ]
}

async fn a_turn_left_waiting_is_approved_from_a_new_process(wire: Wire, provider_flag: &str) {
    let provider = LoopbackProvider::start(
        wire,
        [
            Reply::call(
                "restart_service",
                json!({ "service": "payment-api", "reason": "p99 latency doubled since the deploy" }),
            )
            .saying("I'll restart payment-api."),
            Reply::text("Restarted payment-api; latency should settle in a minute."),
        ],
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agent.db");
    let base_url = provider.base_url();
    let args = flags(provider_flag, &base_url, &db);
    let keys = [
        ("OPENAI_API_KEY", "sk-loopback"),
        ("ANTHROPIC_API_KEY", "sk-ant-loopback"),
    ];

    // The first process asks for the approval; the input ends before anyone answers.
    let mut first = Run::start(&args, &keys);
    first.type_line("payment-api is slow, restart it");
    first.until("approve?");
    let asked = first.seen.join("\n");
    assert!(asked.contains("I'll restart payment-api."), "{asked}");
    assert!(asked.contains("? Restart payment-api?"), "{asked}");
    assert!(asked.contains("restart_service {"), "{asked}");
    first.close_input();
    let waiting = first.until("waiting: turn ");
    let turn_id = waiting
        .split("waiting: turn ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_owned();
    let out = first.finish();
    assert!(!out.contains("✓ restart_service"), "nothing ran: {out}");
    assert_eq!(provider.requests().len(), 1);

    // A second process asks again and, approved, runs the restart and goes on.
    let mut resume = args.clone();
    resume.push("--resume");
    let mut second = Run::start(&resume, &keys);
    second.until("approve?");
    second.type_line("y");
    let ran = second.until("✓ restart_service");
    assert!(ran.contains(r#""change":{"id":"chg-0001""#), "{ran}");
    second.until("Restarted payment-api; latency should settle in a minute.");
    second.close_input();
    let out = second.finish();
    assert!(out.contains("? Restart payment-api?"), "{out}");

    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "one request per process");
    let last = requests[1].to_string();
    assert!(
        last.contains("payment-api is slow, restart it") && last.contains("restarted"),
        "the resumed request has the conversation and the restart's result: {last}"
    );
    assert!(
        !turn_id.is_empty() && waiting.contains(&format!("--resume {turn_id}")),
        "{waiting}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_compatible_a_turn_left_waiting_is_approved_from_a_new_process() {
    a_turn_left_waiting_is_approved_from_a_new_process(Wire::ChatCompletions, "openai-compatible")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_a_turn_left_waiting_is_approved_from_a_new_process() {
    a_turn_left_waiting_is_approved_from_a_new_process(Wire::Responses, "openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_a_turn_left_waiting_is_approved_from_a_new_process() {
    a_turn_left_waiting_is_approved_from_a_new_process(Wire::Anthropic, "anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_its_rounds_asks_and_a_no_stops_it() {
    let provider = LoopbackProvider::start(
        Wire::ChatCompletions,
        [
            Reply::call("get_service_status", json!({ "service": "payment-api" })),
            Reply::text("never asked"),
        ],
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agent.db");
    let base_url = provider.base_url();
    let mut args = flags("openai-compatible", &base_url, &db);
    args.extend(["--max-steps", "1"]);
    let mut run = Run::start(&args, &[]);
    run.type_line("how is payment-api?");
    let asked = run.until("reached its limit of 1 model rounds");
    assert!(asked.starts_with("? "), "asked like an approval: {asked}");
    run.until("approve?");
    run.type_line("n");
    run.until("the turn stopped at its budget");
    run.close_input();
    let out = run.finish();
    assert!(
        out.contains("get_service_status"),
        "the first round ran: {out}"
    );
    assert_eq!(provider.requests().len(), 1, "no second round: {out}");
}

/// The example with `args` and no provider variables: it must fail, saying on stderr what to
/// set or pass.
fn refused(args: &[&str]) -> String {
    let mut command = Command::new(example("agent"));
    for var in PROVIDER_VARS {
        command.env_remove(var);
    }
    let output = command.args(args).stdin(Stdio::null()).output().unwrap();
    assert!(!output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn without_a_key_openai_says_what_to_set() {
    let stderr = refused(&["--provider", "openai", "--model", "gpt-4.1"]);
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[test]
fn a_blank_key_is_a_missing_one() {
    let mut command = Command::new(example("agent"));
    for var in PROVIDER_VARS {
        command.env_remove(var);
    }
    let output = command
        .args(["--provider", "openai", "--model", "gpt-4.1"])
        .env("OPENAI_API_KEY", " ")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("OPENAI_API_KEY"));
}

#[test]
fn without_a_key_anthropic_says_what_to_set() {
    let stderr = refused(&["--provider", "anthropic", "--model", "claude-sonnet-4-5"]);
    assert!(
        stderr.contains("ANTHROPIC_API_KEY") && stderr.contains("ANTHROPIC_AUTH_TOKEN"),
        "{stderr}"
    );
}

#[test]
fn an_openai_compatible_server_needs_its_url() {
    let stderr = refused(&["--provider", "openai-compatible", "--model", "llama3.1"]);
    assert!(
        stderr.contains("--base-url") && stderr.contains("OPENAI_BASE_URL"),
        "{stderr}"
    );
}
