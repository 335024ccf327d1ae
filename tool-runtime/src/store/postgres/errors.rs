//! What the store's errors say: the server and database (never the password), the operation
//! that failed, and what to do about the errors a deployment meets first.

use std::time::Duration;

use sqlx_core::Error as SqlError;
use sqlx_core::connection::{ConnectOptions, Connection};
use sqlx_postgres::PgConnectOptions;

use crate::store::StoreError;

/// Why an operation failed before [`PostgresStore::finish`] describes it.
pub(super) enum Failure {
    /// The database failed; `finish` adds the database and the operation.
    Sql(SqlError),
    /// Already a complete answer (a conflict, a fenced write, an undecodable record).
    Store(StoreError),
}

impl From<SqlError> for Failure {
    fn from(error: SqlError) -> Self {
        Failure::Sql(error)
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        Failure::Store(error)
    }
}

/// `user@host:port/database`, or the socket path for a Unix socket: what errors name.
pub(super) fn describe(options: &PgConnectOptions) -> String {
    let user = options.get_username();
    let database = options.get_database().unwrap_or(user);
    match options.get_socket() {
        Some(socket) => format!("{user}@{}/{database}", socket.display()),
        None => format!(
            "{user}@{}:{}/{database}",
            options.get_host(),
            options.get_port()
        ),
    }
}

/// The error of a failed first connection. The pool retries a refused connection until its
/// acquire timeout (the server may be starting) and then reports only the timeout: one direct
/// attempt tells why.
pub(super) async fn cannot_connect(
    options: &PgConnectOptions,
    place: &str,
    error: SqlError,
) -> StoreError {
    let error = match error {
        SqlError::PoolTimedOut => {
            match tokio::time::timeout(Duration::from_secs(10), options.connect()).await {
                Ok(Err(cause)) => cause,
                Ok(Ok(conn)) => {
                    let _ = conn.close().await;
                    error
                }
                Err(_) => error,
            }
        }
        error => error,
    };
    backend(place, "cannot connect", &error)
}

pub(super) fn backend(place: &str, doing: &str, error: &SqlError) -> StoreError {
    StoreError::Backend(format!(
        "postgres `{place}`: {doing}: {error}{}",
        hint(error)
    ))
}

/// What to do about the errors a deployment meets first.
fn hint(error: &SqlError) -> &'static str {
    match error {
        SqlError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            " (is PostgreSQL running and listening at that address? For tests, \
             `scripts/postgres start` starts a throwaway server)"
        }
        SqlError::Io(_) => " (check that the server is reachable from this machine)",
        SqlError::PoolTimedOut => {
            " (no connection became free in time: the server is unreachable, or the pool is too \
             small for the load; `PostgresStore::from_pool` takes a pool of your size)"
        }
        SqlError::Tls(_) => {
            " (this build has no TLS: connect through a private network or a tunnel, with \
             `sslmode=disable` or `prefer`)"
        }
        SqlError::Database(database) => match database.code().as_deref() {
            Some("28P01" | "28000") => {
                " (check the user and password in the URL, and the server's pg_hba.conf)"
            }
            Some("3D000") => " (create the database, e.g. `createdb NAME`, or name another)",
            Some("42501") => {
                " (the user lacks a privilege: let it create tables in the schema, or connect as \
                 the database's owner)"
            }
            Some("42P07") => {
                " (the database holds tables named like toolwright's that toolwright did not \
                 create: give toolwright a database of its own, or a schema of its own with \
                 `?options=-csearch_path%3Dtoolwright` in the URL)"
            }
            Some("53300") => {
                " (the server has no connection left: raise its max_connections or use smaller \
                 pools)"
            }
            _ => "",
        },
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn errors_name_the_server_but_not_the_password() {
        let options =
            PgConnectOptions::from_str("postgres://app:hunter2@db.internal:6543/tw").unwrap();
        let place = describe(&options);
        assert_eq!(place, "app@db.internal:6543/tw");
        let message = backend(&place, "cannot connect", &SqlError::PoolTimedOut).to_string();
        assert!(!message.contains("hunter2"), "{message}");
    }
}
