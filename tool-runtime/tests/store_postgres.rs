//! The PostgreSQL store on a real server: the conformance suite (twice on one database), two
//! stores racing versioned writes and take-overs, the migrations, and `changed` woken by
//! another store's write (what a write notifies: `store_postgres_notify.rs`).
//!
//! The server comes from `TOOLWRIGHT_TEST_POSTGRES_URL` (`scripts/postgres start` prints one).
//! Every test writes under ids of its own, so they share the database; the tests that need a
//! database to themselves make a throwaway one.
#![cfg(feature = "postgres")]

#[path = "support/postgres.rs"]
mod support;

#[path = "support/pages.rs"]
mod pages;

#[path = "support/records.rs"]
mod records;

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx_core::Url;
use sqlx_core::query::query;
use sqlx_core::query_scalar::query_scalar;
use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use toolwright_runtime::store::{Claim, conformance};
use toolwright_runtime::{
    CallResult, ClosedStep, Decision, PageRequest, PostgresStore, RequestStatus, StepPatch, Store,
    StoreError, TurnRecord, TurnRetention, TurnStatus,
};

use support::{parked, pool, server, store, turn, with_scratch_database};

fn unique(what: &str) -> String {
    format!("pg-test-{what}-{}", uuid::Uuid::new_v4())
}

/// The answer to the request of [`parked`] turn `turn`.
fn answer(turn: &TurnRecord) -> StepPatch {
    let mut request = turn.pending.as_ref().unwrap().requests[0].clone();
    request.status = RequestStatus::Settled {
        decision: Decision::Approved,
        responder: None,
        note: Some("the main one".to_owned()),
    };
    StepPatch {
        step: 0,
        request,
        calls: Vec::new(),
    }
}

/// What a refused migration must leave alone: the recorded versions and the tables.
async fn schema_snapshot(url: &str) -> (Vec<i64>, Vec<String>) {
    let pool = pool(url).await;
    let versions = query_scalar("SELECT version FROM toolwright_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap();
    let tables = query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() ORDER BY table_name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    (versions, tables)
}

/// How long `b.changed(30 s)` waits while `a` writes a turn every 100 ms, each write giving its
/// question a new deadline, already past (a write notifies only what a waiter acts on: a new
/// wake-up time is one, and a past one wakes the waiters at once). The first call starts the
/// listener, which may miss a write made before its `LISTEN`; a repeated write is seen.
async fn wait_for_a_write(a: &PostgresStore, b: &Arc<PostgresStore>) -> Duration {
    let waiter = {
        let b = Arc::clone(b);
        tokio::spawn(async move {
            let started = Instant::now();
            b.changed(Duration::from_secs(30)).await;
            started.elapsed()
        })
    };
    let id = unique("notify");
    let mut parked = parked(&id);
    let mut version = a.put_turn(&parked, None).await.unwrap();
    for deadline in 1..150 {
        if waiter.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        parked.pending.as_mut().unwrap().requests[0].deadline_ms = Some(deadline);
        version = a.put_turn(&parked, Some(version)).await.unwrap();
    }
    waiter.await.unwrap()
}

/// The number of connections listening for changes in database `name`.
async fn listeners(admin: &PgPool, name: &str) -> i64 {
    // sqlx sends `LISTEN "toolwright"`, and `LISTEN "toolwright";` when it reconnects.
    query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 \
         AND query LIKE 'LISTEN \"toolwright\"%'",
    )
    .bind(name.to_owned())
    .fetch_one(admin)
    .await
    .unwrap()
}

#[tokio::test]
async fn conformance_runs_twice_on_one_database() {
    let Some(url) = server() else { return };
    let store = PostgresStore::connect(&url).await.unwrap();
    conformance::run(&store).await;
    conformance::run(&store).await;
}

/// A database filled with finished and parked work: a sweep deletes the finished turns and
/// their journals in short batches, the parked turn stays and takes its answer, and the tables
/// shrink once vacuumed.
#[tokio::test]
async fn a_sweep_keeps_the_parked_turn_and_the_tables_shrink() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let store = store(&url).await;
        let waiting = parked(&unique("parked"));
        store.put_turn(&waiting, None).await.unwrap();
        for n in 0..150 {
            // Text that does not compress: Postgres would keep a repeated one in a few bytes.
            let draft: String = (0..100).map(|_| uuid::Uuid::new_v4().to_string()).collect();
            let id = format!("finished-{n}");
            store
                .put_turn(&turn(&id, TurnStatus::Completed), None)
                .await
                .unwrap();
            let entry = toolwright_runtime::JournalEntry {
                position: 0,
                kind: toolwright_runtime::EntryKind::Step,
                name: "draft".into(),
                value: serde_json::json!({ "draft": draft }),
            };
            store
                .append_journal(&format!("{id}/c1"), &entry)
                .await
                .unwrap();
        }
        let pool = pool(&url).await;
        let size = || async {
            query_scalar::<_, i64>(
                "SELECT pg_total_relation_size('turns') + pg_total_relation_size('journal')",
            )
            .fetch_one(&pool)
            .await
            .unwrap()
        };
        let before = size().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let rule = TurnRetention {
            older_than: Some(Duration::ZERO),
            ..TurnRetention::default()
        };
        let mut swept = 0;
        loop {
            let batch = store.sweep_turns(rule, 40).await.unwrap();
            assert!(batch.turns <= 40);
            swept += batch.turns;
            if batch.done {
                break;
            }
        }
        assert_eq!(swept, 150);
        assert!(store.journal("finished-7/c1").await.unwrap().is_empty());
        query("VACUUM FULL turns").execute(&pool).await.unwrap();
        query("VACUUM FULL journal").execute(&pool).await.unwrap();
        let after = size().await;
        assert!(
            after < before,
            "the tables shrink: {before} bytes before, {after} after"
        );
        let version = store
            .settle_request(&waiting.id, &answer(&waiting), 1)
            .await
            .unwrap();
        assert_eq!(version, 2, "the parked turn stays and takes its answer");
        pool.close().await;
    })
    .await;
}

/// Sweeps are store-wide: on a database of their own, so no other test's turns are swept.
#[tokio::test]
async fn retention_conformance_on_a_database_of_its_own() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        conformance::retention(&PostgresStore::connect(&url).await.unwrap()).await;
    })
    .await;
}

/// Two stores (two pools, as two instances would have) increment one turn from many tasks,
/// each re-reading and retrying on a conflict: every version has exactly one winner and no
/// increment is lost. Every task's first attempt waits on a barrier between its read and its
/// write, so all read version 1 and all but one lose it: the race happens on every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_race_versioned_writes_without_lost_updates() {
    const TASKS: u32 = 16;
    const ROUNDS: u32 = 5;
    let Some(url) = server() else { return };
    let stores = [Arc::new(store(&url).await), Arc::new(store(&url).await)];
    let id = Arc::new(unique("race"));
    stores[0]
        .put_turn(&turn(&id, TurnStatus::Running), None)
        .await
        .unwrap();

    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS as usize));
    let tasks: Vec<_> = (0..TASKS)
        .map(|n| {
            let store = Arc::clone(&stores[n as usize % 2]);
            let id = Arc::clone(&id);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                let mut won = Vec::new();
                let mut conflicts = 0_u32;
                let mut first = true;
                for _ in 0..ROUNDS {
                    loop {
                        let (mut record, version) = store.turn(&id).await.unwrap().unwrap();
                        record.steps += 1;
                        if std::mem::take(&mut first) {
                            assert_eq!(version, 1, "task {n} read before the barrier");
                            barrier.wait().await;
                        }
                        match store.put_turn(&record, Some(version)).await {
                            Ok(next) => {
                                assert_eq!(next, version + 1);
                                won.push(next);
                                break;
                            }
                            Err(StoreError::Conflict(_)) => conflicts += 1,
                            Err(error) => panic!("task {n}: {error}"),
                        }
                    }
                }
                (won, conflicts)
            })
        })
        .collect();

    let mut won = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        let (task_won, task_conflicts) = task.await.unwrap();
        won.extend(task_won);
        conflicts += task_conflicts;
    }
    won.sort_unstable();
    let every: Vec<u64> = (2..=u64::from(TASKS * ROUNDS) + 1).collect();
    assert_eq!(won, every, "each version must have exactly one winner");
    assert!(
        conflicts >= TASKS - 1,
        "all {TASKS} tasks read version 1, so {} of them must have lost it; {conflicts} did",
        TASKS - 1
    );
    for store in &stores {
        let (record, version) = store.turn(&id).await.unwrap().unwrap();
        assert_eq!(
            (record.steps, version),
            (TASKS * ROUNDS, u64::from(TASKS * ROUNDS) + 1)
        );
    }
}

/// Work whose lease expired is taken over by many contenders on two stores at once: exactly one
/// wins (whichever version each read), and the former holder is fenced afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_race_take_overs_with_one_winner() {
    const CONTENDERS: usize = 8;
    let Some(url) = server() else { return };
    let stores = [Arc::new(store(&url).await), Arc::new(store(&url).await)];
    for round in 0..5 {
        let id = Arc::new(unique(&format!("takeover-{round}")));
        let record = turn(&id, TurnStatus::Running);
        let v1 = stores[0].put_turn(&record, None).await.unwrap();
        // The first holder stops renewing at once: a lease with no time to live.
        let stale = stores[0]
            .write_turn(
                &record,
                Some(v1),
                Claim::Take {
                    owner: "gone",
                    ttl: Duration::ZERO,
                },
            )
            .await
            .unwrap();
        let old = stale.lease.clone().unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;

        let contenders: Vec<_> = (0..CONTENDERS)
            .map(|n| {
                let store = Arc::clone(&stores[n % 2]);
                let id = Arc::clone(&id);
                tokio::spawn(async move {
                    let owner = format!("contender-{n}");
                    // Half use the version they read, half the one from before the race.
                    let (record, version) = store.turn(&id).await.unwrap().unwrap();
                    let expected = if n % 4 < 2 { version } else { stale.version };
                    let claim = Claim::TakeOver {
                        owner: &owner,
                        ttl: Duration::from_secs(300),
                    };
                    match store.write_turn(&record, Some(expected), claim).await {
                        Ok(written) => Some(written.lease.unwrap()),
                        Err(StoreError::Conflict(_)) => None,
                        Err(error) => panic!("contender {n}: {error}"),
                    }
                })
            })
            .collect();
        let mut winners = Vec::new();
        for contender in contenders {
            winners.extend(contender.await.unwrap());
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let new = &winners[0];
        assert!(new.token > old.token, "round {round}");

        let (current, version) = stores[1].turn(&id).await.unwrap().unwrap();
        let before = stores[1].turn(&id).await.unwrap();
        match stores[1]
            .write_turn(&current, Some(version), Claim::Keep(&old))
            .await
        {
            Err(StoreError::Fenced { token, .. }) => assert_eq!(token, old.token),
            other => panic!("round {round}: the former holder must be fenced, got {other:?}"),
        }
        assert_eq!(stores[0].turn(&id).await.unwrap(), before, "round {round}");
        let held = stores[0]
            .renew_leases(std::slice::from_ref(new), Duration::from_secs(300))
            .await
            .unwrap();
        assert!(held.contains(new), "round {round}: {held:?}");
    }
}

/// Connecting again (and from several stores at once) applies nothing new.
#[tokio::test]
async fn migrations_are_applied_once() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let racing: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { PostgresStore::connect(&url).await })
            })
            .collect();
        for store in racing {
            store
                .await
                .unwrap()
                .expect("stores connecting at once all migrate");
        }
        let first = schema_snapshot(&url).await;
        assert_eq!(
            first.0,
            [1, 2, 3, 4, 5, 6, 7, 8],
            "each migration, recorded once"
        );
        assert!(
            first.1.contains(&"turn_steps".to_owned())
                && first.1.contains(&"turn_patches".to_owned())
                && first.1.contains(&"conversation".to_owned())
                && first.1.contains(&"attachments".to_owned()),
            "{:?}",
            first.1
        );
        assert!(first.1.contains(&"pins".to_owned()), "{:?}", first.1);
        assert!(first.1.contains(&"grants".to_owned()), "{:?}", first.1);
        assert!(!first.1.contains(&"approvals".to_owned()), "{:?}", first.1);
        assert!(first.1.contains(&"turns".to_owned()), "{:?}", first.1);

        let store = PostgresStore::connect(&url).await.unwrap();
        store
            .put_turn(&turn("kept", TurnStatus::Waiting), None)
            .await
            .unwrap();
        drop(store);
        let store = PostgresStore::connect(&url).await.unwrap();
        assert_eq!(
            schema_snapshot(&url).await,
            first,
            "a second connect changes nothing"
        );
        assert_eq!(store.waiting_turns().await.unwrap(), ["kept"]);
    })
    .await;
}

/// Closed step `index` of one call, its result saying `form`.
fn closed_step(index: u32, form: &str) -> ClosedStep {
    let result = CallResult::failed(
        &format!("call-{index}"),
        "todo.add",
        toolwright_core::ToolError::new(format!("step {index}: {form}")),
    );
    ClosedStep {
        index,
        results: vec![Arc::new(result)],
        requests: Vec::new(),
    }
}

/// A database at migration 7 (before the step history) gets `turn_steps` at the next
/// connect, with the closed step each turn's record held copied in (a NUL in it too); its
/// parked turn is kept and answered as before, and the steps its writes close from then on are
/// all kept.
#[tokio::test]
async fn a_migration_7_database_gets_the_step_history() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let mut done = turn("done", TurnStatus::Completed);
        done.last_step = Some(closed_step(4, "before the upgrade"));
        // A NUL PostgreSQL's JSON functions cannot read: not copied, and no failed migration.
        let mut nul = turn("nul", TurnStatus::Completed);
        nul.last_step = Some(closed_step(2, "before\u{0}the upgrade"));
        {
            let store = PostgresStore::connect(&url).await.unwrap();
            store.put_turn(&parked("parked"), None).await.unwrap();
            store.put_turn(&done, None).await.unwrap();
            store.put_turn(&nul, None).await.unwrap();
        }
        let pool = pool(&url).await;
        for statement in [
            "DROP TABLE turn_steps",
            "DELETE FROM toolwright_migrations WHERE version = 8",
        ] {
            query(statement).execute(&pool).await.unwrap();
        }
        pool.close().await;
        assert_eq!(schema_snapshot(&url).await.0, [1, 2, 3, 4, 5, 6, 7]);

        let store = PostgresStore::connect(&url).await.unwrap();
        assert_eq!(schema_snapshot(&url).await.0, [1, 2, 3, 4, 5, 6, 7, 8]);
        let first = PageRequest::first(10);
        let kept = store.turn_steps("done", &first).await.unwrap();
        assert_eq!(kept.items, [done.last_step.clone().unwrap()]);
        assert!(
            store
                .turn_steps("nul", &first)
                .await
                .unwrap()
                .items
                .is_empty()
        );
        let version = store.put_turn(&nul, Some(1)).await.unwrap();
        assert_eq!(version, 2);
        let kept = store.turn_steps("nul", &first).await.unwrap();
        assert_eq!(
            kept.items,
            [nul.last_step.clone().unwrap()],
            "kept from its next write"
        );
        let (mut turn, version) = store.turn("parked").await.unwrap().unwrap();
        assert_eq!(turn.status, TurnStatus::Waiting);
        let version = store
            .settle_request("parked", &answer(&turn), version)
            .await
            .unwrap();
        assert!(
            store
                .turn_steps("parked", &first)
                .await
                .unwrap()
                .items
                .is_empty()
        );
        let mut version = version;
        for index in 0..3 {
            turn.pending = None;
            turn.status = TurnStatus::Active;
            turn.last_step = Some(closed_step(index, "after the upgrade"));
            version = store.put_turn(&turn, Some(version)).await.unwrap();
        }
        let steps = store.turn_steps("parked", &first).await.unwrap();
        let indexes: Vec<u32> = steps.items.iter().map(|step| step.index).collect();
        assert_eq!(indexes, [0, 1, 2]);
        conformance::steps(&store).await;
    })
    .await;
}

/// A database a newer toolwright migrated is refused, named, and left as it was; refusing it
/// must not leave the migration lock held (a second attempt is refused, not stuck).
#[tokio::test]
async fn a_newer_schema_is_refused_and_left_alone() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        drop(PostgresStore::connect(&url).await.unwrap());
        let pool = pool(&url).await;
        query(
            "INSERT INTO toolwright_migrations (version, description, success, checksum, \
             execution_time) VALUES (9, 'from a newer toolwright', TRUE, '\\x00', 0)",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        let before = schema_snapshot(&url).await;

        for attempt in 0..2 {
            let refused =
                tokio::time::timeout(Duration::from_secs(60), PostgresStore::connect(&url))
                    .await
                    .unwrap_or_else(|_| panic!("attempt {attempt}: connecting hangs"));
            let message = match refused {
                Err(StoreError::Backend(message)) => message,
                other => panic!("attempt {attempt}: expected StoreError::Backend, got {other:?}"),
            };
            assert!(
                message.contains("schema version 9")
                    && message.contains("run the newer toolwright")
                    && message.contains("127.0.0.1"),
                "{message}"
            );
            assert!(!message.contains("password"), "{message}");
        }
        assert_eq!(
            schema_snapshot(&url).await,
            before,
            "the refused database must not change"
        );
    })
    .await;
}

/// `changed` on one store returns early when another store writes a turn with a wake-up time
/// (what writes notify, and what not: `tests/store_postgres_notify.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_wakes_when_another_store_writes() {
    let Some(url) = server() else { return };
    let (a, b) = (store(&url).await, Arc::new(store(&url).await));
    let waited = wait_for_a_write(&a, &b).await;
    assert!(
        waited < Duration::from_secs(20),
        "changed(30 s) returned after {waited:?}: the write's notification did not wake it"
    );
}

/// A wrong password or an unreachable server gives a message naming the server, not the
/// password, and saying what to do.
#[tokio::test]
async fn connection_errors_are_actionable() {
    let Some(url) = server() else { return };
    let mut wrong = Url::parse(&url).unwrap();
    wrong.set_path("toolwright_no_such_database");
    wrong.set_password(Some("sw0rdfish")).unwrap();
    let message = match PostgresStore::connect(wrong.as_str()).await {
        Err(StoreError::Backend(message)) => message,
        other => panic!("expected StoreError::Backend, got {other:?}"),
    };
    assert!(
        message.contains("toolwright_no_such_database") && !message.contains("sw0rdfish"),
        "{message}"
    );
    assert!(message.contains("createdb"), "{message}");

    // Nothing listens on port 1. The pool retries a refused connection until its acquire
    // timeout (short here); the message still tells the cause.
    let nowhere = PgConnectOptions::from_str("postgres://nobody:sw0rdfish@127.0.0.1:1/x").unwrap();
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy_with(nowhere);
    let message = match PostgresStore::from_pool(pool).await {
        Err(StoreError::Backend(message)) => message,
        other => panic!("expected StoreError::Backend, got {other:?}"),
    };
    assert!(
        message.contains("nobody@127.0.0.1:1/x")
            && message.contains("is PostgreSQL running")
            && !message.contains("sw0rdfish"),
        "{message}"
    );

    let message = match PostgresStore::connect("not a url").await {
        Err(StoreError::Backend(message)) => message,
        other => panic!("expected StoreError::Backend, got {other:?}"),
    };
    assert!(
        message.contains("postgres://USER:PASSWORD@HOST"),
        "{message}"
    );
}

/// The listener behind `changed` runs on a connection of its own, which dropping the store
/// closes (with the store's pool).
#[tokio::test]
async fn dropping_the_store_stops_its_listener() {
    let Some(url) = server() else { return };
    let admin = pool(&url).await;
    with_scratch_database(&url, |scratch| async move {
        let name = database_name(&scratch);
        let store = PostgresStore::connect(&scratch).await.unwrap();
        store.changed(Duration::from_millis(50)).await;
        assert_eq!(
            listeners(&admin, &name).await,
            1,
            "one listener after the first call"
        );
        store.changed(Duration::from_millis(50)).await;
        assert_eq!(
            listeners(&admin, &name).await,
            1,
            "still one after the second"
        );
        drop(store);
        let deadline = Instant::now() + Duration::from_secs(20);
        while listeners(&admin, &name).await > 0 {
            assert!(Instant::now() < deadline, "the listener outlives its store");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// When the listening connection dies, the listener connects again and `changed` keeps waking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_reconnects() {
    let Some(url) = server() else { return };
    let admin = pool(&url).await;
    with_scratch_database(&url, |scratch| async move {
        let name = database_name(&scratch);
        let (a, b) = (store(&scratch).await, Arc::new(store(&scratch).await));
        b.changed(Duration::from_millis(50)).await;
        let killed: i64 = query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 \
             AND query LIKE 'LISTEN \"toolwright\"%'",
        )
        .bind(&name)
        .fetch_one(&admin)
        .await
        .unwrap();
        assert_eq!(killed, 1, "the listening connection was found");

        // Waiters wake when the listener is back (it heard nothing while it was down), or at a
        // write after that.
        let waited = wait_for_a_write(&a, &b).await;
        assert!(
            waited < Duration::from_secs(20),
            "changed returned after {waited:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while listeners(&admin, &name).await != 1 {
            assert!(
                Instant::now() < deadline,
                "the listener did not connect again"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let waited = wait_for_a_write(&a, &b).await;
        assert!(
            waited < Duration::from_secs(20),
            "after reconnecting, changed returned after {waited:?}"
        );
    })
    .await;
}

fn database_name(url: &str) -> String {
    Url::parse(url)
        .unwrap()
        .path()
        .trim_start_matches('/')
        .to_owned()
}

/// A step run in the store's transaction: its writes and its record commit together; a
/// failing step, a position already recorded and a stale lease leave both out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_in_the_transaction_commits_with_its_record_or_not_at_all() {
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let store = store(&url).await;
        let admin = pool(&url).await;
        query("CREATE TABLE charges (run TEXT NOT NULL, n INT NOT NULL)")
            .execute(&admin)
            .await
            .unwrap();
        let charge = |n: i32, fail: bool| -> toolwright_core::StoreWork {
            Box::new(move |db: &mut (dyn std::any::Any + Send)| {
                Box::pin(async move {
                    let db = db
                        .downcast_mut::<sqlx_postgres::PgConnection>()
                        .expect("the Postgres store hands over its connection");
                    query("INSERT INTO charges (run, n) VALUES ('r', $1)")
                        .bind(n)
                        .execute(&mut *db)
                        .await
                        .map_err(|e| toolwright_core::ToolError::new(e.to_string()))?;
                    if fail {
                        return Err(toolwright_core::ToolError::new("card declined"));
                    }
                    Ok(serde_json::json!(n))
                })
            })
        };
        let rows = || async {
            query_scalar::<_, i64>("SELECT count(*) FROM charges")
                .fetch_one(&admin)
                .await
                .unwrap()
        };

        // Success: one row, one record.
        let value = store
            .journal_in_transaction("run", 0, "charge", None, charge(1, false))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((value, rows().await), (serde_json::json!(1), 1));
        assert_eq!(store.journal("run").await.unwrap().len(), 1);

        // The position is recorded: the work does not run again.
        match store
            .journal_in_transaction("run", 0, "charge", None, charge(2, false))
            .await
        {
            Err(StoreError::Conflict(_)) => {}
            other => panic!("a recorded position must be a conflict, got {other:?}"),
        }
        assert_eq!(rows().await, 1, "the work did not run");

        // The work fails after writing: its write rolls back, nothing is recorded.
        let failed = store
            .journal_in_transaction("run", 1, "charge", None, charge(3, true))
            .await
            .unwrap();
        assert!(failed.is_err());
        assert_eq!(rows().await, 1, "a failed step's writes roll back");
        assert_eq!(store.journal("run").await.unwrap().len(), 1);

        // Under a lease taken over since: refused before the work runs.
        let id = unique("turn");
        let mut record = turn(&id, TurnStatus::Active);
        let v = store.put_turn(&record, None).await.unwrap();
        record.status = TurnStatus::Running;
        let ttl = Duration::from_secs(60);
        let first = store
            .write_turn(&record, Some(v), Claim::Take { owner: "a", ttl })
            .await
            .unwrap();
        store
            .write_turn(
                &record,
                Some(first.version),
                Claim::Take { owner: "b", ttl },
            )
            .await
            .unwrap();
        let stale = first.lease.unwrap();
        match store
            .journal_in_transaction("run", 1, "charge", Some(&stale), charge(4, false))
            .await
        {
            Err(StoreError::Fenced { .. }) => {}
            other => panic!("a stale lease must be fenced, got {other:?}"),
        }
        assert_eq!(rows().await, 1, "the fenced work did not commit");
    })
    .await;
}

/// 100,000 parked turns, written straight into a database of their own in one transaction
/// (parking them one by one takes minutes), paged through 100 at a time: each listed once,
/// newest first, every page bounded and as quick as the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_parked_turns_page_through() {
    use pages::{PARKED, SESSION, parked_id, parked_json};
    let Some(url) = server() else { return };
    with_scratch_database(&url, |url| async move {
        let store = PostgresStore::connect(&url).await.unwrap();
        let started = Instant::now();
        let pool = pool(&url).await;
        let mut tx = pool.begin().await.unwrap();
        for chunk in (0..PARKED).collect::<Vec<_>>().chunks(10_000) {
            let ids: Vec<String> = chunk.iter().map(|&n| parked_id(n)).collect();
            let records: Vec<String> = chunk.iter().map(|&n| parked_json(n)).collect();
            let positions: Vec<i64> = chunk.iter().map(|&n| n as i64 + 1).collect();
            query(
                "INSERT INTO turns (id, session_id, status, version, json, updated) \
                 SELECT id, $4, 'waiting', 1, json, updated \
                 FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(id, json, updated)",
            )
            .bind(ids)
            .bind(records)
            .bind(positions)
            .bind(SESSION)
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        // Later writes take positions above the seeded ones.
        query("SELECT setval('turns_updated', $1)")
            .bind(PARKED as i64)
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        query("ANALYZE turns").execute(&pool).await.unwrap();
        pool.close().await;
        let seeded = started.elapsed();
        let (walked, slowest) = pages::walk_the_inbox(&store).await;
        eprintln!(
            "postgres: seeded {PARKED} parked turns in {seeded:?}, paged through them twice in \
             {walked:?} (slowest page {slowest:?})"
        );
        assert!(
            slowest < Duration::from_secs(1),
            "a page took {slowest:?}: pages must not grow with the listing"
        );
    })
    .await;
}
