//! `client_grants`: the MCP clients a user allowed to use each connection.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::UserRef;

/// One client's grant on one of the user's connections.
#[derive(Debug, Clone)]
pub struct Grant {
    pub connection_id: Uuid,
    pub client_id: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// Grants `client_id` the use of a connection; `false` if it already had it.
pub async fn insert(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "INSERT INTO client_grants (connection_id, client_id) VALUES ($1, $2)
         ON CONFLICT (connection_id, client_id) DO NOTHING",
        connection_id,
        client_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn find(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> Result<Option<Grant>, sqlx::Error> {
    sqlx::query_as!(
        Grant,
        "SELECT connection_id, client_id, created_at, last_used_at
         FROM client_grants WHERE connection_id = $1 AND client_id = $2",
        connection_id,
        client_id,
    )
    .fetch_optional(exec)
    .await
}

/// When `client_id` last used its grant on the connection, with the
/// database's `now()` to judge that by; `None`: it has no grant.
pub async fn last_use(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> Result<Option<super::call_accounts::GrantUse>, sqlx::Error> {
    sqlx::query_as!(
        super::call_accounts::GrantUse,
        r#"SELECT last_used_at, now() AS "read_at!"
           FROM client_grants WHERE connection_id = $1 AND client_id = $2"#,
        connection_id,
        client_id,
    )
    .fetch_optional(exec)
    .await
}

/// Notes a use, at most once a minute per grant.
pub async fn touch(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE client_grants SET last_used_at = now()
         WHERE connection_id = $1 AND client_id = $2
           AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        connection_id,
        client_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Every grant on the user's connections, oldest first.
pub async fn list_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<Vec<Grant>, sqlx::Error> {
    sqlx::query_as!(
        Grant,
        "SELECT g.connection_id, g.client_id, g.created_at, g.last_used_at
         FROM client_grants g JOIN connections c ON c.id = g.connection_id
         WHERE c.issuer = $1 AND c.subject = $2
         ORDER BY g.created_at, g.client_id",
        user.issuer(),
        user.subject(),
    )
    .fetch_all(exec)
    .await
}

/// Removes a client's grant on a connection of this user (and of no one
/// else); `false` when there was none.
pub async fn delete_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    connection_id: Uuid,
    client_id: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM client_grants g USING connections c
         WHERE g.connection_id = $3 AND g.client_id = $4
           AND c.id = g.connection_id AND c.issuer = $1 AND c.subject = $2",
        user.issuer(),
        user.subject(),
        connection_id,
        client_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}
