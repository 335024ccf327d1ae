//! Resident memory of a process holding many parked turns: it should not grow with their number,
//! since a parked turn lives in the store, not in the process (figures in BENCHMARKS.md).
//!
//! `cargo bench --bench parked_memory` parks 100,000 turns (`TOOLWRIGHT_PARKED` to change it) on
//! an SQLite file and prints the process's resident set size as it goes. Under `cargo test` it
//! parks 200, as a smoke test.

use std::time::Instant;

use schemars::JsonSchema;
use serde::Deserialize;
use toolwright::prelude::*;
use toolwright::runtime::{Runtime, SessionSpec, SqliteStore, StepOutcome, ToolCall};
use toolwright::{Caller, Principal};

#[derive(Deserialize, JsonSchema, ToolInput)]
struct Args {
    service: String,
}

/// Restarts one service.
#[tool(effect = write, approval = always)]
async fn restart(args: Args) -> String {
    format!("{} restarted", args.service)
}

/// The resident set size in KiB, from /proc (Linux).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let benching = std::env::args().any(|a| a == "--bench");
    let total: usize = std::env::var("TOOLWRIGHT_PARKED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 100_000 } else { 200 });
    let dir = tempfile::tempdir().expect("tempdir");
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    tokio.block_on(async {
        let runtime = Runtime::builder(Registry::from_tools([restart::TOOL]).expect("registry"))
            .store(SqliteStore::open(dir.path().join("parked.db")).expect("store"))
            .build()
            .expect("runtime");
        let alice = Principal::user("bench", "alice");
        let session = runtime
            .open_session(SessionSpec::new("parked").initiator(alice.clone()))
            .await
            .expect("session");
        let started = Instant::now();
        let mut checkpoint = 1_000.min(total);
        println!("parked\trss_kib\tseconds");
        println!("0\t{}\t0.0", rss_kib());
        for n in 1..=total {
            let turn = session
                .begin_turn(Some(alice.clone()), Caller::Model)
                .await
                .expect("turn");
            let outcome = turn
                .step(vec![ToolCall::new("c", "restart", r#"{"service":"api"}"#)])
                .await
                .expect("step");
            assert!(matches!(outcome, StepOutcome::Waiting { .. }), "parks");
            if n == checkpoint {
                println!("{n}\t{}\t{:.1}", rss_kib(), started.elapsed().as_secs_f64());
                checkpoint = (checkpoint * 10).min(total);
                if checkpoint == n {
                    break;
                }
            }
        }
        assert_eq!(runtime.waiting_turns().await.expect("list").len(), total);
    });
}
