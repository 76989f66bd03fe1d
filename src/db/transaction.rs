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
