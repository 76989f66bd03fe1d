//! Start-up while Postgres is not there yet (a container starting beside
//! it, a restart): creating the database and migrating are retried with
//! backoff for `database.startup_timeout_secs`, each attempt logged.

use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;

use super::{DbSetupError, create_database_if_missing, migrate};

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Creates the database if missing (when `create_if_missing`) and applies
/// the migrations, retrying while the failure is one a waiting can cure, for
/// at most `limit`.
/// Each attempt's connection and first answer take at most
/// `answer_within`.
pub async fn prepare_database(
    options: &PgConnectOptions,
    limit: Duration,
    answer_within: Duration,
    create_if_missing: bool,
) -> Result<(), DbSetupError> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(250);
    let mut attempt: u32 = 1;
    loop {
        match prepare_once(options, answer_within, create_if_missing).await {
            Ok(()) => return Ok(()),
            Err(e) if is_retryable(&e) && started.elapsed() < limit => {
                tracing::warn!(
                    attempt,
                    error = %e,
                    retry_in_ms = backoff.as_millis() as u64,
                    "database not reachable yet; retrying"
                );
            }
            Err(e) if is_retryable(&e) => {
                tracing::error!(attempt, error = %e, "database not reachable; giving up");
                return Err(e);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot prepare the database");
                return Err(e);
            }
        }
        // The last attempt comes when the time is up, not before.
        tokio::time::sleep(backoff.min(limit.saturating_sub(started.elapsed()))).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        attempt = attempt.saturating_add(1);
    }
}

async fn prepare_once(
    options: &PgConnectOptions,
    answer_within: Duration,
    create_if_missing: bool,
) -> Result<(), DbSetupError> {
    if create_if_missing {
        create_database_if_missing(options, answer_within).await?;
    }
    // Migrations run on a connection of their own, without the statement
    // timeout of the service's connections: a long migration is not a fault.
    let migrations = super::pool_with(options.clone(), 1, answer_within);
    let done = migrate(&migrations, answer_within).await;
    migrations.close().await;
    done
}

fn is_retryable(e: &DbSetupError) -> bool {
    match e {
        DbSetupError::Connect { error: e, .. }
        | DbSetupError::Create { error: e, .. }
        | DbSetupError::Maintenance { cause: e, .. }
        | DbSetupError::Compatibility(e) => super::faults::is_transient(e),
        DbSetupError::Migrate(
            sqlx::migrate::MigrateError::Execute(e)
            | sqlx::migrate::MigrateError::ExecuteMigration(e, _),
        ) => super::faults::is_transient(e),
        _ => false,
    }
}
