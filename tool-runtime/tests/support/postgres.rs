//! What the PostgreSQL store's test binaries share: the server, pools and stores on it, scratch
//! databases, and the turn records they write. Included with `#[path]`; not every binary uses
//! every item.
#![allow(dead_code)]

use std::panic::AssertUnwindSafe;
use std::str::FromStr;

use futures_util::FutureExt;
use sqlx_core::Url;
use sqlx_core::query::query;
use sqlx_core::sql_str::AssertSqlSafe;
use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use toolwright_core::Caller;
use toolwright_runtime::{PendingStep, PostgresStore, TurnRecord, TurnStatus};

/// The test server's URL. Without one the tests pass with a notice, except in CI (`CI` set),
/// where a missing server must not pass unnoticed.
pub(crate) fn server() -> Option<String> {
    const START: &str = "start one with `export TOOLWRIGHT_TEST_POSTGRES_URL=\"$(scripts/postgres \
                         start)\"` (scripts/test does this)";
    match std::env::var("TOOLWRIGHT_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_owned()),
        _ if std::env::var_os("CI").is_some() => {
            panic!(
                "TOOLWRIGHT_TEST_POSTGRES_URL is not set, and the Postgres tests must run in CI: {START}"
            )
        }
        _ => {
            eprintln!("skipping: TOOLWRIGHT_TEST_POSTGRES_URL is not set; {START}");
            None
        }
    }
}

/// A small pool of its own, so that each store in a test is a separate "instance".
pub(crate) async fn pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(4)
        .connect_with(PgConnectOptions::from_str(url).expect("a valid URL"))
        .await
        .expect("the test server accepts connections")
}

pub(crate) async fn store(url: &str) -> PostgresStore {
    PostgresStore::from_pool(pool(url).await)
        .await
        .expect("a store on the test server")
}

pub(crate) fn turn(id: &str, status: TurnStatus) -> TurnRecord {
    TurnRecord {
        id: id.to_owned(),
        session_id: "s1".to_owned(),
        current: None,
        caller: Caller::Model,
        structured_output: false,
        tainted_by: None,
        status,
        steps: 0,
        last_step: None,
        pending: None,
    }
}

/// A turn parked on one request, `request-of-<id>`.
pub(crate) fn parked(id: &str) -> TurnRecord {
    let request = crate::records::question(format!("request-of-{id}"), "s1", id);
    TurnRecord {
        pending: Some(PendingStep {
            index: 0,
            calls: Vec::new(),
            requests: vec![request],
            input: None,
        }),
        ..turn(id, TurnStatus::Waiting)
    }
}

/// A database of its own for one test, dropped afterwards (also when the test fails).
pub(crate) async fn with_scratch_database<F, Fut>(url: &str, test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let admin = pool(url).await;
    let name = format!("toolwright_test_{}", uuid::Uuid::new_v4().simple());
    query(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&admin)
        .await
        .expect("the test user may create databases");
    let mut scratch = Url::parse(url).expect("a valid URL");
    scratch.set_path(&name);
    let outcome = AssertUnwindSafe(test(scratch.to_string()))
        .catch_unwind()
        .await;
    query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
    )))
    .execute(&admin)
    .await
    .expect("dropping the scratch database");
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
