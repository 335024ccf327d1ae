//! The database's schema: the scripts of `migrations/postgres`, applied at connect by sqlx's
//! migrator, which records them in a table of toolwright's own.

use sqlx_core::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx_core::sql_str::SqlSafeStr;
use sqlx_postgres::PgPool;

use super::{backend, cannot_connect};
use crate::store::StoreError;

/// The schema, one script per version (see the scripts' header for the rules).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "initial",
        include_str!("../../../migrations/postgres/0001_initial.sql"),
    ),
    (
        2,
        "pins",
        include_str!("../../../migrations/postgres/0002_pins.sql"),
    ),
    (
        3,
        "grants",
        include_str!("../../../migrations/postgres/0003_grants.sql"),
    ),
    (
        4,
        "turn patches",
        include_str!("../../../migrations/postgres/0004_turn_patches.sql"),
    ),
    (
        5,
        "conversation",
        include_str!("../../../migrations/postgres/0005_conversation.sql"),
    ),
    (
        6,
        "attachments",
        include_str!("../../../migrations/postgres/0006_attachments.sql"),
    ),
    (
        7,
        "listings",
        include_str!("../../../migrations/postgres/0007_listings.sql"),
    ),
    (
        8,
        "turn steps",
        include_str!("../../../migrations/postgres/0008_turn_steps.sql"),
    ),
];

/// Where sqlx records the applied migrations: a name of toolwright's own, so that an application
/// sharing the database may keep its own migrations in sqlx's default `_sqlx_migrations`.
const MIGRATIONS_TABLE: &str = "toolwright_migrations";

fn migrator() -> Migrator {
    let mut migrator = Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|&(version, description, sql)| {
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    );
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
}

/// Brings the schema to the newest version this build knows. Idempotent; sqlx holds an
/// advisory lock on the database while it checks and applies, so instances starting together
/// migrate one after the other. A database with a version this build does not know is refused
/// before anything is written.
pub(super) async fn migrate(pool: &PgPool, place: &str) -> Result<(), StoreError> {
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(error) => return Err(cannot_connect(&pool.connect_options(), place, error).await),
    };
    // `run_direct` rather than `run(&mut *conn)`: with `run`, the future of `connect` is not
    // `Send` ("implementation of `Acquire` is not general enough"), so it could not be spawned;
    // sqlx exposes `run_direct` for exactly this (hidden, hence the exact version pin).
    match migrator().run_direct(None, &mut *conn, false).await {
        Ok(()) => Ok(()),
        Err(error) => {
            // sqlx releases its advisory lock only when the run succeeds: a connection
            // returned to the pool would keep holding it and block every later migration.
            // Closing the connection releases it.
            let _ = conn.close().await;
            Err(migration_error(place, error))
        }
    }
}

fn migration_error(place: &str, error: MigrateError) -> StoreError {
    let known = MIGRATIONS.last().map_or(0, |&(version, _, _)| version);
    let message = match error {
        MigrateError::VersionMissing(version) if version > known => format!(
            "has schema version {version}, but this build of toolwright knows versions up to \
             {known}: a newer toolwright migrated it; run the newer toolwright, or restore a \
             backup of the database made before the upgrade"
        ),
        MigrateError::VersionMissing(version) => format!(
            "records migration {version} in `{MIGRATIONS_TABLE}`, which no toolwright made: \
             give toolwright a database of its own"
        ),
        MigrateError::VersionMismatch(version) => format!(
            "was migrated to version {version} by a toolwright whose schema script differs from \
             this build's: run the toolwright that migrated it"
        ),
        MigrateError::Dirty(version) => format!(
            "has migration {version} partly applied (see `{MIGRATIONS_TABLE}`): repair it by \
             hand or restore a backup"
        ),
        MigrateError::Execute(error) | MigrateError::ExecuteMigration(error, _) => {
            return backend(place, "cannot migrate the schema", &error);
        }
        other => format!("cannot be migrated: {other}"),
    };
    StoreError::Backend(format!("postgres `{place}` {message}"))
}

#[cfg(test)]
mod tests {
    use sqlx_core::query::query;
    use sqlx_core::query_as::query_as;

    use super::super::scratch::Scratch;
    use super::*;

    /// Runs the first `n` migrations on `pool`, as a release that had only those did.
    async fn migrate_to(pool: &PgPool, n: usize) {
        let mut old = Migrator::with_migrations(
            MIGRATIONS[..n]
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        description.into(),
                        MigrationType::Simple,
                        sql.into_sql_str(),
                        false,
                    )
                })
                .collect(),
        );
        old.dangerous_set_table_name(MIGRATIONS_TABLE);
        let mut conn = pool.acquire().await.unwrap();
        old.run_direct(None, &mut *conn, false).await.unwrap();
    }

    /// A database at schema version 2 (before grants had requesters), holding the grants of a
    /// session where only alice acted and of one where alice and bob did, is migrated: alice
    /// keeps hers in the first, nobody gets those of the second.
    #[tokio::test]
    async fn grants_without_requesters_go_to_the_one_requester_who_acted() {
        let Some(scratch) = Scratch::new("tw_migrate", 2, &[]).await else {
            return;
        };
        let pool = scratch.pool.clone();
        migrate_to(&pool, 2).await;
        let alice =
            r#""current":{"authenticator":"oidc","principal_type":"user","principal_id":"alice"}"#;
        let bob = r#""current":{"authenticator":"oidc","issuer":"a:b@c","principal_type":"user","principal_id":"bob"}"#;
        for (id, session, current) in [
            ("t1", "solo", alice),
            ("t2", "solo", alice),
            ("t3", "shared", alice),
            ("t4", "shared", bob),
            ("t5", "bobs", bob),
            ("t6", "nobodys", r#""caller":"model""#),
        ] {
            query(
                "INSERT INTO turns (id, session_id, status, version, json, updated) \
                 VALUES ($1, $2, 'completed', 1, $3, nextval('turns_updated'))",
            )
            .bind(id)
            .bind(session)
            .bind(format!("{{{current}}}"))
            .execute(&pool)
            .await
            .unwrap();
        }
        for session in ["solo", "shared", "bobs", "nobodys", "empty"] {
            query("INSERT INTO approvals (session_id, key) VALUES ($1, 'pay')")
                .bind(session)
                .execute(&pool)
                .await
                .unwrap();
        }
        migrate(&pool, "test").await.unwrap();
        let grants: Vec<(String, String, String)> =
            query_as("SELECT session_id, requester, key FROM grants ORDER BY session_id")
                .fetch_all(&pool)
                .await
                .unwrap();
        let grant = |session: &str, requester: &str| {
            (session.to_owned(), requester.to_owned(), "pay".to_owned())
        };
        assert_eq!(
            grants,
            [
                grant("bobs", "user:oidc@a%3Ab%40c:bob"),
                grant("empty", "unknown"),
                grant("nobodys", "anonymous"),
                grant("shared", "unknown"),
                grant("solo", "user:oidc:alice"),
            ]
        );
        // The SQL spelling of a requester is `requester_key`'s.
        let bob: toolwright_core::Principal = serde_json::from_str(
            r#"{"authenticator":"oidc","issuer":"a:b@c","principal_type":"user","principal_id":"bob"}"#,
        )
        .unwrap();
        assert_eq!(
            crate::store::requester_key(Some(&bob)),
            "user:oidc@a%3Ab%40c:bob"
        );
        scratch.drop().await;
    }

    /// A database at migration 6 (before the listings' indexes), holding a session, a parked
    /// turn and a task, gets migration 7's indexes and lists what it held.
    #[tokio::test]
    async fn a_v6_database_gets_the_listing_indexes_and_lists_its_records() {
        use crate::store::{PageRequest, Store, TaskFilter, TurnFilter};
        let Some(scratch) = Scratch::new("tw_migrate", 2, &[]).await else {
            return;
        };
        let pool = scratch.pool.clone();
        migrate_to(&pool, 6).await;
        let store = crate::store::PostgresStore {
            pool: pool.clone(),
            place: "test".into(),
            changes: std::sync::Arc::new(super::super::listen::Changes::new()),
        };
        let session = crate::record::SessionRecord::new("kept");
        store.put_session(&session, None).await.unwrap();
        let turn = crate::record::TurnRecord {
            id: "parked".to_owned(),
            session_id: "kept".to_owned(),
            current: None,
            caller: toolwright_core::Caller::Model,
            structured_output: false,
            tainted_by: None,
            status: crate::record::TurnStatus::Waiting,
            steps: 1,
            last_step: None,
            pending: None,
        };
        store.put_turn(&turn, None).await.unwrap();
        migrate(&pool, "test").await.unwrap();
        let indexes: Vec<String> = query_as::<_, (String,)>(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = current_schema()",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|(name,)| name)
        .collect();
        for index in [
            "sessions_by_update",
            "turns_by_update",
            "turns_by_status",
            "turns_by_session_update",
            "tasks_by_creation",
        ] {
            assert!(
                indexes.iter().any(|name| name == index),
                "{index}: {indexes:?}"
            );
        }
        let first = PageRequest::first(10);
        let sessions = store.list_sessions(&first).await.unwrap();
        assert_eq!(sessions.items[0].id, "kept");
        let turns = store
            .list_turns(&TurnFilter::default().session("kept"), &first)
            .await
            .unwrap();
        assert_eq!((turns.items[0].id.as_str(), turns.next), ("parked", None));
        let tasks = store
            .list_tasks(&TaskFilter::default(), &first)
            .await
            .unwrap();
        assert!(tasks.items.is_empty());
        scratch.drop().await;
    }
}
