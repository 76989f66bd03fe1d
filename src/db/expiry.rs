//! Deleting what has expired, for the background sweeper: tickets, OAuth
//! flows and browser sessions all carry an `expires_at`.

use sqlx::PgExecutor;

#[derive(Debug, Clone, Copy)]
pub enum Expiring {
    Tickets,
    Flows,
    Sessions,
}

impl Expiring {
    pub const ALL: [Expiring; 3] = [Expiring::Flows, Expiring::Sessions, Expiring::Tickets];

    fn table(self) -> &'static str {
        match self {
            Expiring::Tickets => "connect_tickets",
            Expiring::Flows => "oauth_flows",
            Expiring::Sessions => "web_sessions",
        }
    }
}

/// Deletes rows of `what` that expired more than `grace` ago.
pub async fn delete(
    exec: impl PgExecutor<'_>,
    what: Expiring,
    grace: chrono::Duration,
) -> Result<u64, sqlx::Error> {
    let sql = format!(
        "DELETE FROM {} WHERE expires_at < now() - make_interval(secs => $1)",
        what.table()
    );
    let done = sqlx::query(&sql)
        .bind(grace.num_seconds() as f64)
        .execute(exec)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes sign-in flows as soon as they expire: nothing refers to them
/// afterwards, and each may have been started by anyone.
pub async fn delete_expired_login_flows(exec: impl PgExecutor<'_>) -> Result<u64, sqlx::Error> {
    let done = sqlx::query("DELETE FROM oauth_flows WHERE kind = 'login' AND expires_at < now()")
        .execute(exec)
        .await?;
    Ok(done.rows_affected())
}
