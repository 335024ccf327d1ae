//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, its server scenarios
//! of 2025-11-25) against `examples/conformance_server.rs`, the suite's fixture tools, prompts,
//! resources and completions served over streamable HTTP. The suite and the Node 22 it runs on are
//! pinned by `tests/mcp-conformance/package-lock.json` and installed by `scripts/setup-clients`
//! (`scripts/test` runs it); a missing install fails the test rather than skipping it.
//!
//! Every scenario of the active suite must pass; the failure message lists each failing scenario
//! by name with its failing checks. The per-scenario results (`checks.json`) stay in
//! `target/<profile>/mcp-conformance/` after a run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod support;

use support::programs::{example, node22, node22_package};

/// Scenarios allowed to fail: only for a feature `SPEC.md` says toolwright does not offer, each
/// with that sentence. None so far.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// How long the whole suite may take (it takes a few seconds).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);

/// The conformance server on a free loopback port.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start() -> Self {
        let mut child = Command::new(example("conformance_server"))
            .args(["--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let Some(url) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            panic!(
                "the conformance server printed {line:?}, not `listening on http://127.0.0.1:PORT/mcp`"
            );
        };
        let url = url.to_owned();
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One check of a scenario, as the suite wrote it in `checks.json`.
struct Check {
    id: String,
    status: String,
    message: String,
}

/// What one scenario came to.
struct Scenario {
    checks: Vec<Check>,
    /// Why the scenario fails, one line per failing check; empty when it passes.
    failures: Vec<String>,
}

/// Where the results of the last run stay: beside the test binaries, emptied at each run.
fn results_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let results = dir.join("mcp-conformance");
    let _ = std::fs::remove_dir_all(&results);
    std::fs::create_dir_all(&results).unwrap();
    results
}

/// Runs `conformance server --suite active` on Node 22 against `url`, writing the results under
/// `out`; returns the suite's stdout.
fn run_suite(url: &str, out: &Path) -> String {
    let stdout_path = out.join("suite-stdout.txt");
    let stderr_path = out.join("suite-stderr.txt");
    let mut suite = Command::new(node22())
        .arg(node22_package(
            "@modelcontextprotocol/conformance",
            "dist/index.js",
        ))
        .args(["server", "--url", url, "--suite", "active", "--output-dir"])
        .arg(out.join("results"))
        .current_dir(out)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The suite's exit status says whether it found failures; the checks say which.
    while suite.try_wait().unwrap().is_none() {
        if started.elapsed() > SUITE_TIMEOUT {
            let _ = suite.kill();
            let _ = suite.wait();
            panic!(
                "the conformance suite ran over {SUITE_TIMEOUT:?}; its output is in {}",
                out.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    assert!(
        stdout.contains("=== SUMMARY ==="),
        "the conformance suite stopped before its summary:\n{stdout}\n{}",
        std::fs::read_to_string(&stderr_path).unwrap()
    );
    stdout
}

/// The scenarios the suite ran, in order, from its progress lines.
fn scenarios_run(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("=== Running scenario: "))
        .filter_map(|l| l.strip_suffix(" ==="))
        .map(str::to_owned)
        .collect()
}

/// The scenario a results directory belongs to: `server-<scenario>-<timestamp>`, the timestamp
/// an ISO 8601 instant with `-` for `:` and `.` (`2026-12-02T00-08-31-581Z`).
fn scenario_of(dir_name: &str) -> Option<&str> {
    const STAMP: usize = "2026-12-02T00-08-31-581Z".len();
    let rest = dir_name.strip_prefix("server-")?;
    let cut = rest.len().checked_sub(STAMP + 1)?;
    let (name, stamp) = rest.split_at(cut);
    let stamp = stamp.strip_prefix('-')?;
    (stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T').then_some(name)
}

/// Reads every `server-*/checks.json` under `dir`, by scenario.
fn read_results(dir: &Path) -> BTreeMap<String, Scenario> {
    let mut scenarios = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        let Some(name) = scenario_of(&dir_name) else {
            continue;
        };
        let path = entry.path().join("checks.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let checks: Vec<Value> = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a list of checks: {e}", path.display()));
        scenarios.insert(name.to_owned(), judge(name, &checks));
    }
    scenarios
}

/// A scenario passes when no check failed and at least one succeeded (as the suite counts),
/// and when no tool call the suite counted as a success was an error result: the suite passes
/// `tools-call-simple-text` against a server that answers "no tool named `test_simple_text`".
fn judge(scenario: &str, checks: &[Value]) -> Scenario {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let checks: Vec<(Check, &Value)> = checks
        .iter()
        .map(|c| {
            let check = Check {
                id: text(&c["id"]),
                status: text(&c["status"]),
                message: text(&c["errorMessage"]),
            };
            (check, &c["details"])
        })
        .collect();
    let mut failures = Vec::new();
    for (check, details) in &checks {
        match check.status.as_str() {
            "FAILURE" => failures.push(format!("{}: {}", check.id, check.message)),
            "SUCCESS" if scenario != "tools-call-error" && details["result"]["isError"] == true => {
                failures.push(format!(
                    "{}: counted as passed, but the tool call was an error result: {}",
                    check.id, details["result"]["content"]
                ));
            }
            _ => {}
        }
    }
    if !checks.iter().any(|(c, _)| c.status == "SUCCESS") && failures.is_empty() {
        failures.push("no check succeeded".to_owned());
    }
    Scenario {
        checks: checks.into_iter().map(|(c, _)| c).collect(),
        failures,
    }
}

#[test]
fn the_official_conformance_suite_passes_every_active_server_scenario() {
    // The suite targets Node 22; the machine's own Node may be older.
    let version = Command::new(node22()).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout);
    assert!(version.starts_with("v22."), "not Node 22: {version}");
    let out = results_dir();
    let server = Server::start();
    let stdout = run_suite(&server.url, &out);
    drop(server);

    let run = scenarios_run(&stdout);
    assert!(
        run.iter().any(|s| s == "server-initialize") && run.iter().any(|s| s == "tools-list"),
        "the suite ran no server scenario:\n{stdout}"
    );
    let mut results = read_results(&out.join("results"));
    let mut failing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut passing = Vec::new();
    for name in &run {
        match results.remove(name) {
            None => {
                failing.insert(name.clone(), vec!["no checks.json was written".to_owned()]);
            }
            Some(scenario) if scenario.failures.is_empty() => passing.push(name.clone()),
            Some(scenario) => {
                failing.insert(name.clone(), scenario.failures);
            }
        }
    }
    for (name, scenario) in results {
        let ids: Vec<&str> = scenario.checks.iter().map(|c| c.id.as_str()).collect();
        failing.insert(
            name,
            vec![format!("results without a progress line (checks {ids:?})")],
        );
    }

    let expected: BTreeSet<&str> = EXPECTED_FAILURES.iter().map(|(name, _)| *name).collect();
    let unexpected: Vec<(&String, &Vec<String>)> = failing
        .iter()
        .filter(|(name, _)| !expected.contains(name.as_str()))
        .collect();
    let stale: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|name| passing.iter().any(|p| p == name))
        .collect();
    let total = run.len();
    eprintln!(
        "conformance: {} of {total} active server scenarios pass: {}",
        passing.len(),
        passing.join(", ")
    );
    let mut report = String::new();
    for (name, failures) in &unexpected {
        report.push_str(&format!("\n  {name}"));
        for failure in *failures {
            report.push_str(&format!("\n      {failure}"));
        }
    }
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "{} of {total} conformance scenarios fail against examples/conformance_server.rs \
         (results in {}):{report}{}",
        unexpected.len(),
        out.display(),
        if stale.is_empty() {
            String::new()
        } else {
            format!("\nexpected to fail but passed (remove from EXPECTED_FAILURES): {stale:?}")
        }
    );
}
