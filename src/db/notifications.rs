//! The `NOTIFY` channel on which an instance announces a stored connection,
//! and `LISTEN` on it (see `connect::events`).

use sqlx::{PgExecutor, postgres::PgListener};

/// The channel's name.
const CHANNEL: &str = "mcp_connect_connection_stored";

/// Announces `payload` to every listener; inside a transaction it is
/// delivered at commit.
pub async fn notify(exec: impl PgExecutor<'_>, payload: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_notify($1, $2)", CHANNEL, payload)
        .execute(exec)
        .await?;
    Ok(())
}

/// Makes `listener` receive the channel's notifications. (sqlx sends the
/// `LISTEN` itself: a channel name is an identifier, which no prepared
/// statement takes as a parameter.)
pub async fn listen(listener: &mut PgListener) -> Result<(), sqlx::Error> {
    listener.listen(CHANNEL).await
}

/// A trivial query on the listening connection: whether it still answers.
pub async fn ping(listener: &mut PgListener) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT 1 AS alive")
        .fetch_one(&mut *listener)
        .await?;
    Ok(())
}
