//! Throwaway schemas on the test server (`TOOLWRIGHT_TEST_POSTGRES_URL`) for this module's own
//! tests: each test gets a schema of its own, found through `search_path`, and drops it.

use std::str::FromStr;

use sqlx_core::query::query;
use sqlx_core::sql_str::AssertSqlSafe;
use sqlx_postgres::{PgConnectOptions, PgPool, PgPoolOptions};

/// A schema of its own and a pool whose connections use it.
pub(super) struct Scratch {
    admin: PgPool,
    schema: String,
    /// Connections whose `search_path` is the schema.
    pub(super) pool: PgPool,
}

impl Scratch {
    /// A new schema named `<prefix>_<uuid>` with a pool of `connections` using it and the
    /// session `settings` (`("enable_sort", "off")`); `None`, with a line saying so, when no
    /// test server is set.
    pub(super) async fn new(
        prefix: &str,
        connections: u32,
        settings: &[(&str, &str)],
    ) -> Option<Scratch> {
        let Ok(url) = std::env::var("TOOLWRIGHT_TEST_POSTGRES_URL") else {
            eprintln!("skipping: TOOLWRIGHT_TEST_POSTGRES_URL is not set");
            return None;
        };
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(PgConnectOptions::from_str(&url).unwrap())
            .await
            .unwrap();
        let schema = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        query(AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\"")))
            .execute(&admin)
            .await
            .unwrap();
        let mut options: Vec<(&str, &str)> = vec![("search_path", schema.as_str())];
        options.extend_from_slice(settings);
        let options = PgConnectOptions::from_str(&url).unwrap().options(options);
        let pool = PgPoolOptions::new()
            .max_connections(connections)
            .connect_with(options)
            .await
            .unwrap();
        Some(Scratch {
            admin,
            schema,
            pool,
        })
    }

    /// Closes the pool and drops the schema with everything in it.
    pub(super) async fn drop(self) {
        self.pool.close().await;
        query(AssertSqlSafe(format!(
            "DROP SCHEMA \"{}\" CASCADE",
            self.schema
        )))
        .execute(&self.admin)
        .await
        .unwrap();
    }
}
