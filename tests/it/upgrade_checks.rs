//! What the upgrade tests (`store_upgrade*.rs`) share: the tool set the release fixtures record
//! under names of their own ([`release_tools!`]), the checks run on a store an older release wrote
//! (a parked approval resumes, a parked workflow replays its journal, a remembered grant covers
//! whom it covered) and, with the `postgres` feature, the scratch databases the Postgres dumps are
//! restored into ([`pg`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolwright::runtime::{
    Decision, Event, InputRequest, InputResponse, PendingStep, RequestStatus, RespondOutcome,
    Runtime, StepProgress, UNKNOWN_REQUESTER,
};
use toolwright::{Caller, Principal};

use crate::support::{alice, bob, call, completed, drain, resumed, waiting};

/// Defines, in the module that calls it, the tools a release fixture recorded, under the names
/// it recorded them with: `$unlock` (asks every time), `$flow` (a workflow that journals
/// `prepare`, asks, then journals `ship`) and `$top_up` (asks once per person and session), the
/// statics counting their runs (`UNLOCKED`, `PREPARED` and `SHIPPED`, `TOPPED_UP`) and
/// [`Tools`] `TOOLS`, their names and counters for the checks of this module. Every fixture's
/// writer defined the tools as they are here, its own names aside.
macro_rules! release_tools {
    ($unlock:ident, $flow:ident, $top_up:ident) => {
        mod release_tools {
            use std::sync::atomic::{AtomicUsize, Ordering};

            use schemars::JsonSchema;
            use serde::Deserialize;
            use toolwright::prelude::*;

            pub(super) static UNLOCKED: AtomicUsize = AtomicUsize::new(0);
            pub(super) static PREPARED: AtomicUsize = AtomicUsize::new(0);
            pub(super) static SHIPPED: AtomicUsize = AtomicUsize::new(0);
            pub(super) static TOPPED_UP: AtomicUsize = AtomicUsize::new(0);

            /// The tools' names and counters.
            pub(super) static TOOLS: crate::upgrade_checks::Tools = crate::upgrade_checks::Tools {
                unlock: stringify!($unlock),
                flow: stringify!($flow),
                top_up: stringify!($top_up),
                unlocked: &UNLOCKED,
                prepared: &PREPARED,
                shipped: &SHIPPED,
                topped_up: &TOPPED_UP,
            };

            #[derive(Deserialize, JsonSchema, ToolInput)]
            pub(super) struct Code {
                /// The operator's code.
                code: String,
            }

            /// Unlocks the release (asks every time).
            #[tool(effect = write, approval = always)]
            pub(super) async fn $unlock(args: Code) -> String {
                UNLOCKED.fetch_add(1, Ordering::SeqCst);
                format!("unlocked with {}", args.code)
            }

            /// Prepares, asks, then ships.
            #[tool(effect = write, workflow = execute)]
            pub(super) async fn $flow(
                args: Code,
                ctx: WorkflowContext,
            ) -> Result<String, ToolError> {
                ctx.step("prepare", async {
                    PREPARED.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .await?;
                let go = ctx
                    .ask(
                        AskRequest::new(format!("Ship {}?", args.code))
                            .option(AskOption::new("go", "Ship"))
                            .option(AskOption::new("stop", "Not now")),
                    )
                    .await?;
                if go.chose("go") {
                    ctx.step("ship", async {
                        SHIPPED.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })
                    .await?;
                }
                Ok(format!("go: {}", go.chose("go")))
            }

            #[derive(Deserialize, JsonSchema, ToolInput)]
            pub(super) struct TopUp {
                /// Cents.
                cents: u64,
            }

            /// Tops up the card (asks once per person and session).
            #[tool(effect = money, approval(request = once, prompt = "Top up {cents} cents?"))]
            pub(super) async fn $top_up(args: TopUp) -> u64 {
                TOPPED_UP.fetch_add(1, Ordering::SeqCst);
                args.cents
            }
        }
        #[allow(unused_imports, reason = "not every writer checks every counter")]
        use release_tools::{
            PREPARED, SHIPPED, TOOLS, TOPPED_UP, UNLOCKED, $flow, $top_up, $unlock,
        };
    };
}
pub(crate) use release_tools;

/// The tools [`release_tools!`] defined: their names, and how often each ran in this process.
#[derive(Debug)]
pub(crate) struct Tools {
    pub(crate) unlock: &'static str,
    pub(crate) flow: &'static str,
    pub(crate) top_up: &'static str,
    pub(crate) unlocked: &'static AtomicUsize,
    pub(crate) prepared: &'static AtomicUsize,
    pub(crate) shipped: &'static AtomicUsize,
    pub(crate) topped_up: &'static AtomicUsize,
}

fn count(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

/// The parked step of the waiting turn of session `session`.
pub(crate) async fn parked_step(runtime: &Runtime, session: &str) -> PendingStep {
    for id in runtime.waiting_turns().await.unwrap() {
        let turn = runtime.turn(&id).await.unwrap();
        if turn.session_id() == session {
            return turn.record().await.unwrap().pending.expect("a parked step");
        }
    }
    panic!("no parked turn in `{session}`");
}

/// The requests of the parked step of the waiting turn of session `session`.
pub(crate) async fn parked_requests(runtime: &Runtime, session: &str) -> Vec<InputRequest> {
    parked_step(runtime, session).await.requests
}

/// Resumes the step parked in `session`, whose calls `c1`, `c2`, ... of `tools.unlock` each
/// asked alice's approval: all but the last were approved before the upgrade (answers the
/// store keeps beside the turn), the last is approved now. Checks that the calls then run once
/// each, with `outputs`, that a second answer is dropped and that the turn waits no more.
pub(crate) async fn parked_approval_resumes_once(
    runtime: &Runtime,
    tools: &Tools,
    session: &str,
    outputs: &[Value],
) {
    let waiting_turns = runtime.waiting_turns().await.unwrap().len();
    let mut requests = parked_requests(runtime, session).await;
    assert_eq!(requests.len(), outputs.len(), "{requests:?}");
    requests.sort_by(|a, b| a.call_id.cmp(&b.call_id));
    let (last, answered) = requests.split_last().unwrap();
    for request in answered {
        assert_eq!(request.tool.as_deref(), Some(tools.unlock));
        assert!(
            matches!(
                request.status,
                RequestStatus::Settled {
                    decision: Decision::Approved,
                    ..
                }
            ),
            "the answer recorded beside the turn is read with it: {:?}",
            request.status
        );
    }
    assert_eq!(last.tool.as_deref(), Some(tools.unlock));
    assert!(last.is_pending(), "{:?}", last.status);

    // The last answer resumes the step: every call runs, once.
    let unlocked = count(tools.unlocked);
    let answer = InputResponse::approve(&last.request_id, Some(alice()));
    let results = resumed(runtime.respond(answer.clone()).await.unwrap());
    let got: Vec<_> = results.iter().map(|r| r.output.clone()).collect();
    assert_eq!(got, outputs, "{results:?}");
    assert_eq!(count(tools.unlocked), unlocked + outputs.len());
    assert!(
        matches!(
            runtime.respond(answer).await.unwrap(),
            RespondOutcome::Dropped
        ),
        "a second answer changes nothing"
    );
    assert_eq!(count(tools.unlocked), unlocked + outputs.len());
    assert_eq!(
        runtime.waiting_turns().await.unwrap().len(),
        waiting_turns - 1
    );
}

/// Answers `go` to the question the call `c1` of `tools.flow` parked on in `session`, after
/// journaling its `prepare` step. Checks that the workflow replays its journal: `prepare` is
/// replayed, not run again, and `ship` runs once.
pub(crate) async fn parked_workflow_replays_its_journal(
    runtime: &Runtime,
    tools: &Tools,
    session: &str,
) {
    let mut events = runtime.subscribe();
    let requests = parked_requests(runtime, session).await;
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].tool.as_deref(), Some(tools.flow));
    let (prepared, shipped) = (count(tools.prepared), count(tools.shipped));
    let answer = InputResponse::choose(&requests[0].request_id, Some(alice()), "go");
    let results = resumed(runtime.respond(answer).await.unwrap());
    assert!(!results[0].is_error, "{results:?}");
    assert_eq!(results[0].output, json!("go: true"));
    assert_eq!(
        count(tools.prepared),
        prepared,
        "the step journaled before the upgrade is replayed, not run"
    );
    assert_eq!(count(tools.shipped), shipped + 1);
    let replayed: Vec<String> = drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::ActionStep {
                step,
                progress: StepProgress::Replayed,
                ..
            } => Some(step),
            _ => None,
        })
        .collect();
    assert_eq!(replayed, ["prepare"]);
    let run_id = format!("{}/c1", requests[0].turn_id);
    let journal = runtime.store().journal(&run_id).await.unwrap();
    let names: Vec<&str> = journal.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"prepare"), "{names:?}");
    assert_eq!(names.last(), Some(&"ship"), "{names:?}");
}

/// Checks that the `once` grant of `tools.top_up` alice was given in `session` before the
/// upgrade still covers her calls, and only hers: see [`grant_covers`] and [`grant_asks`].
pub(crate) async fn grant_covers_alice_only(runtime: &Runtime, tools: &Tools, session: &str) {
    grant_covers(runtime, tools, session, alice()).await;
    grant_asks(runtime, session, bob(), tools.top_up, tools.topped_up).await;
}

/// Checks that a remembered grant of `tools.top_up` in `session` covers `who`: it is listed as
/// theirs, and their call runs without asking, once. Completes the turn it takes.
pub(crate) async fn grant_covers(runtime: &Runtime, tools: &Tools, session: &str, who: Principal) {
    assert_eq!(
        runtime
            .approvals(session, Some(&who))
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        [tools.top_up]
    );
    let topped = count(tools.topped_up);
    let turn = runtime
        .session(session)
        .await
        .unwrap()
        .begin_turn(Some(who), Caller::Model)
        .await
        .unwrap();
    let results = completed(
        turn.step(vec![call("c9", tools.top_up, json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(results[0].output, json!(100));
    assert_eq!(count(tools.topped_up), topped + 1);
    turn.complete().await.unwrap();
}

/// Checks that no remembered grant of `tool` (a `once` tool taking `cents`) in `session` covers
/// `who`: none is listed as theirs, and their call asks them and does not run (`ran` counts its
/// runs). Leaves the turn it takes parked.
pub(crate) async fn grant_asks(
    runtime: &Runtime,
    session: &str,
    who: Principal,
    tool: &str,
    ran: &AtomicUsize,
) {
    assert!(
        runtime
            .approvals(session, Some(&who))
            .await
            .unwrap()
            .is_empty()
    );
    let before = count(ran);
    let turn = runtime
        .session(session)
        .await
        .unwrap()
        .begin_turn(Some(who.clone()), Caller::Model)
        .await
        .unwrap();
    let (_, requests) = waiting(
        turn.step(vec![call("c1", tool, json!({ "cents": 100 }))])
            .await
            .unwrap(),
    );
    assert_eq!(requests[0].requester, Some(who));
    assert_eq!(count(ran), before);
}

/// Checks where an upgrade put a `once` grant of `tool` remembered in `session` when alice and
/// bob both acted there, before grants said whose call they were given for: it covers nobody
/// (each is asked again, see [`grant_asks`]) and is kept under a requester no call has.
pub(crate) async fn grant_covers_nobody(
    runtime: &Runtime,
    session: &str,
    tool: &str,
    ran: &AtomicUsize,
) {
    for who in [alice(), bob()] {
        grant_asks(runtime, session, who, tool, ran).await;
    }
    assert_eq!(
        runtime
            .store()
            .approvals(session, UNKNOWN_REQUESTER)
            .await
            .unwrap()
            .into_iter()
            .collect::<Vec<_>>(),
        [tool],
        "kept, under a requester no call has"
    );
}

/// The Postgres fixtures' databases: a test server, scratch databases on it, dumps of them and
/// dumps restored.
#[cfg(feature = "postgres")]
pub(crate) mod pg {
    use std::str::FromStr;

    use sqlx_core::query::query;
    use sqlx_core::raw_sql::raw_sql;
    use sqlx_core::sql_str::AssertSqlSafe;
    use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};
    use toolwright::Registry;
    use toolwright::runtime::{PostgresStore, Runtime};

    /// The test server, or `None` (with a notice) when none is configured outside CI.
    pub(crate) fn server() -> Option<String> {
        match std::env::var("TOOLWRIGHT_TEST_POSTGRES_URL") {
            Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
            _ if std::env::var_os("CI").is_some() => {
                panic!(
                    "TOOLWRIGHT_TEST_POSTGRES_URL is not set, and the Postgres tests must run in CI"
                )
            }
            _ => {
                eprintln!(
                    "skipping: TOOLWRIGHT_TEST_POSTGRES_URL is not set (scripts/test sets it)"
                );
                None
            }
        }
    }

    async fn pool(url: &str) -> PgPool {
        PgPoolOptions::new()
            .max_connections(2)
            .connect_with(PgConnectOptions::from_str(url).unwrap())
            .await
            .unwrap()
    }

    /// A fresh database on the server of `url`: its name and its URL.
    pub(crate) async fn scratch(url: &str) -> (String, String) {
        let name = format!("toolwright_upgrade_{}", uuid::Uuid::new_v4().simple());
        let admin = pool(url).await;
        query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&admin)
            .await
            .unwrap();
        admin.close().await;
        let mut parsed = sqlx_core::Url::parse(url).unwrap();
        parsed.set_path(&format!("/{name}"));
        (name, parsed.to_string())
    }

    /// Writes a fixture: a `pg_dump --inserts --no-owner --no-privileges` of the database at
    /// `db` into the file `fixture` (`pg_dump` must be on the path).
    pub(crate) fn dump(db: &str, fixture: &str) {
        let dump = std::process::Command::new("pg_dump")
            .args(["--inserts", "--no-owner", "--no-privileges", "--dbname", db])
            .output()
            .expect("pg_dump runs");
        assert!(
            dump.status.success(),
            "{}",
            String::from_utf8_lossy(&dump.stderr)
        );
        std::fs::write(fixture, dump.stdout).unwrap();
    }

    /// A scratch database a dump was restored into, dropped when this is (best effort: a
    /// refusal is ignored, and a test that aborts leaves it behind).
    #[derive(Debug)]
    pub(crate) struct Restored {
        /// The URL of the database on the server the scratch database was made from.
        server: String,
        name: String,
        /// The scratch database's URL.
        pub(crate) url: String,
    }

    impl Drop for Restored {
        fn drop(&mut self) {
            let (server, name) = (self.server.clone(), self.name.clone());
            // Dropped within the test's async runtime, which must not block on its own work:
            // the statement runs on a thread of its own, on a runtime of its own.
            let dropping = std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()?;
                runtime.block_on(async {
                    let admin = PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(PgConnectOptions::from_str(&server).ok()?)
                        .await
                        .ok()?;
                    // `FORCE`: the test's store may still hold connections to it.
                    let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                    let dropped = query(AssertSqlSafe(sql)).execute(&admin).await.ok();
                    admin.close().await;
                    dropped
                })
            });
            let _ = dropping.join();
        }
    }

    /// The dump `fixture` restored into a fresh database on the server of `url`. The dump's
    /// statements run as they are, but for psql's meta-commands (lines starting with a
    /// backslash), which are no SQL.
    pub(crate) async fn restored(url: &str, fixture: &str) -> Restored {
        let (name, db) = scratch(url).await;
        let restored = Restored {
            server: url.to_owned(),
            name,
            url: db,
        };
        let sql: String = std::fs::read_to_string(fixture)
            .unwrap()
            .lines()
            .filter(|line| !line.starts_with('\\'))
            .map(|line| format!("{line}\n"))
            .collect();
        let restore = pool(&restored.url).await;
        raw_sql(AssertSqlSafe(sql)).execute(&restore).await.unwrap();
        restore.close().await;
        restored
    }

    /// The dump `fixture` restored into a scratch database and opened (and migrated) by this
    /// build with the tools of `registry`, or `None` when no server is configured. The database
    /// is dropped with the [`Restored`] returned; drop the runtime first.
    pub(crate) async fn upgraded(fixture: &str, registry: Registry) -> Option<(Restored, Runtime)> {
        let db = restored(&server()?, fixture).await;
        let store = PostgresStore::connect(&db.url).await.unwrap();
        let runtime = Runtime::builder(registry).store(store).build().unwrap();
        Some((db, runtime))
    }
}
