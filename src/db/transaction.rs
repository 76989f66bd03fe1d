//! Transactions: beginning one, and settings and locks that last until it ends.

use std::time::Duration;

use sqlx::{PgExecutor, PgPool, Postgres, Transaction};

/// Waits at most `limit` for a row or table lock, in this transaction only
/// (what `SET LOCAL lock_timeout` does, as a statement that can be prepared
/// and checked). The transaction's `statement_timeout` becomes the same
/// limit: Postgres counts the wait for a lock as the statement's time, so
/// the connection's shorter statement limit would otherwise end the wait
/// first, whatever `limit` says.
pub async fn set_lock_timeout(
    exec: impl PgExecutor<'_>,
    limit: Duration,
) -> Result<(), sqlx::Error> {
    let limit = format!("{}ms", limit.as_millis());
    sqlx::query!(
        "SELECT set_config('lock_timeout', $1, true) AS lock, \
         set_config('statement_timeout', $1, true) AS statement",
        limit
    )
    .fetch_one(exec)
    .await?;
    Ok(())
}

/// Begins a transaction on `pool`. Boxed: sqlx's `begin` future (taking a
/// connection from the pool, and opening one when none is idle) is ≈14 KB,
/// and held inline it made every function that may start a transaction —
/// and every future awaiting one, up to each tool call — that large; each
/// was copied whenever it moved, on paths that never began one too (a
/// connected call's token read carried its rare refresh's transaction).
pub async fn begin(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    Box::pin(pool.begin()).await
}
