//! Advisory locks held by one connection for as long as it is open: what
//! makes one instance's sweeper the only one sweeping, across the many
//! short transactions of a paced sweep.

use sqlx::PgExecutor;

/// Takes the session-level advisory lock `key` if no other session holds
/// it; `false` when one does. It lasts until the connection closes: the
/// caller holds it on a connection it closes afterwards rather than handing
/// back to a pool, where an idle connection would keep it for ever.
pub async fn try_lock(exec: impl PgExecutor<'_>, key: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT pg_try_advisory_lock($1) AS "locked!""#, key)
        .fetch_one(exec)
        .await
}

/// Takes the session-level advisory lock `key`, waiting for a session that
/// holds it to let go. The same lifetime rule as [`try_lock`].
pub async fn lock(exec: impl PgExecutor<'_>, key: i64) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_lock($1)", key)
        .execute(exec)
        .await?;
    Ok(())
}
