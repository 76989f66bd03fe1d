//! Settings and locks that last until the current transaction ends.

use std::time::Duration;

use sqlx::PgExecutor;

/// Waits at most `limit` for a row or table lock, in this transaction only
/// (what `SET LOCAL lock_timeout` does, as a statement that can be prepared
/// and checked).
pub async fn set_lock_timeout(
    exec: impl PgExecutor<'_>,
    limit: Duration,
) -> Result<(), sqlx::Error> {
    let limit = format!("{}ms", limit.as_millis());
    sqlx::query!("SELECT set_config('lock_timeout', $1, true)", limit)
        .fetch_one(exec)
        .await?;
    Ok(())
}

/// Takes the advisory lock `key` until the transaction ends, if no other
/// session holds it; `false` when one does.
pub async fn try_advisory_lock(exec: impl PgExecutor<'_>, key: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock($1) AS "locked!""#, key)
        .fetch_one(exec)
        .await
}
