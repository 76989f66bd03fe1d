//! `connections`: a user's connected third-party accounts.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// A connection as shown to its owner: everything but the tokens.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ConnectionSummary {
    pub id: Uuid,
    pub provider: String,
    pub account_id: String,
    pub account_label: String,
    pub scopes: Vec<String>,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

pub async fn list_for_user(
    exec: impl PgExecutor<'_>,
    issuer: &str,
    subject: &str,
) -> Result<Vec<ConnectionSummary>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, provider, account_id, account_label, scopes, status, created_at, last_used_at
         FROM connections WHERE issuer = $1 AND subject = $2 ORDER BY provider",
    )
    .bind(issuer)
    .bind(subject)
    .fetch_all(exec)
    .await
}
