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
}

/// Deletes at most `batch` rows of `what` that expired more than `grace`
/// ago, the longest expired first (through the `expires_at` index), and
/// returns how many went. A backlog goes in several calls: each is a short
/// transaction with few row locks and a small burst of WAL.
///
/// The rows are found by the index and deleted by their physical address
/// (`ctid`, a TID scan), not looked up again by primary key: that second
/// descent of a B-tree per row was more than half of an audit batch's work
/// and a quarter of a ticket batch's, whose two foreign keys' ON DELETE
/// actions are most of the rest (measured, bench/NOTES.md). A row updated
/// while the delete waited for its lock has a new version at another
/// address, and stays: Postgres 15.20 checks the address again (the next
/// batch takes the row if it is still expired), and the expiry repeated as
/// the outer condition keeps a renewed row on releases whose TID scan did
/// not. The `id IN (…)` form this replaced deleted it.
pub async fn delete_batch(
    exec: impl PgExecutor<'_>,
    what: Expiring,
    grace: chrono::Duration,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let grace = grace.num_seconds() as f64;
    // One statement per table: a table name cannot be a parameter.
    let done = match what {
        Expiring::Tickets => {
            sqlx::query!(
                "DELETE FROM connect_tickets WHERE ctid = ANY(ARRAY(
                     SELECT ctid FROM connect_tickets
                      WHERE expires_at < now() - make_interval(secs => $1)
                      ORDER BY expires_at LIMIT $2))
                   AND expires_at < now() - make_interval(secs => $1)",
                grace,
                batch,
            )
            .execute(exec)
            .await?
        }
        Expiring::Flows => {
            sqlx::query!(
                "DELETE FROM oauth_flows WHERE ctid = ANY(ARRAY(
                     SELECT ctid FROM oauth_flows
                      WHERE expires_at < now() - make_interval(secs => $1)
                      ORDER BY expires_at LIMIT $2))
                   AND expires_at < now() - make_interval(secs => $1)",
                grace,
                batch,
            )
            .execute(exec)
            .await?
        }
        Expiring::Sessions => {
            sqlx::query!(
                "DELETE FROM web_sessions WHERE ctid = ANY(ARRAY(
                     SELECT ctid FROM web_sessions
                      WHERE expires_at < now() - make_interval(secs => $1)
                      ORDER BY expires_at LIMIT $2))
                   AND expires_at < now() - make_interval(secs => $1)",
                grace,
                batch,
            )
            .execute(exec)
            .await?
        }
    };
    Ok(done.rows_affected())
}

/// Deletes sign-in flows as soon as they expire: nothing refers to them
/// afterwards, and each may have been started by anyone.
pub async fn delete_expired_login_flows(exec: impl PgExecutor<'_>) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM oauth_flows WHERE kind = 'login' AND expires_at < now()")
        .execute(exec)
        .await?;
    Ok(done.rows_affected())
}
