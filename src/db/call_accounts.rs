//! The one read of a tool call that needs a user's account: their
//! connections to the provider, each with its sealed tokens and the calling
//! client's grant on it (`client_grants` looked up for each of them).
//! Which account, whether its token is usable and whether this client may
//! use it are all decided from these rows, so a connected call costs one
//! round trip to Postgres instead of three (accounts, token, grant).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use super::connections::{ConnectionRow, ConnectionStatus};
use crate::domain::{ProviderName, UserRef};

/// One of the user's connections to a provider, as a call sees it.
#[derive(Debug, Clone)]
pub struct CallAccount {
    pub row: ConnectionRow,
    /// The calling client's grant on this connection, if it has one.
    pub grant: Option<GrantUse>,
}

/// A grant found by [`read`] (or [`super::client_grants::last_use`]):
/// when the client last used it.
#[derive(Debug, Clone, Copy)]
pub struct GrantUse {
    pub last_used_at: Option<DateTime<Utc>>,
    /// The database's `now()` of the read, which `last_used_at` is judged
    /// by (it was written by it).
    pub read_at: DateTime<Utc>,
}

/// The user's connections to `provider` in the order of
/// [`super::connections::find_account`] (accounts before placeholder rows,
/// oldest first), each with `client_id`'s grant.
///
/// The grant is a lateral lookup by its primary key, once per account row,
/// rather than a plain `LEFT JOIN`: with a small `client_grants` table (a
/// new or small deployment) Postgres plans the join as a hash join — a
/// hash table built and scanned on every call — which measured 7 µs more
/// per statement in the executor alone and ≈20 µs of Postgres CPU per
/// call under load (bench/NOTES.md, "Seeded ÷ empty"). `LIMIT 1` (the key
/// admits one row at most) keeps the planner from turning the subquery
/// back into that join.
pub async fn read(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    provider: &ProviderName,
    client_id: &str,
) -> Result<Vec<CallAccount>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT c.id, c.issuer, c.subject, c.provider AS "provider: ProviderName", c.account_id, c.account_label, c.scopes,
                  c.access_token, c.refresh_token, c.key_id, c.access_token_expires_at,
                  c.status AS "status: ConnectionStatus", c.last_used_at,
                  COALESCE(c.tokens_stored_at, c.updated_at) AS "tokens_stored_at!",
                  c.params AS "params: sqlx::types::Json<super::params::Params>",
                  g.client_id IS NOT NULL AS "granted!",
                  g.last_used_at AS "grant_last_used_at?",
                  now() AS "read_at!"
           FROM connections c
           LEFT JOIN LATERAL (
               SELECT g.client_id, g.last_used_at
               FROM client_grants g
               WHERE g.connection_id = c.id AND g.client_id = $4
               LIMIT 1
           ) g ON true
           WHERE c.issuer = $1 AND c.subject = $2 AND c.provider = $3
           ORDER BY (c.account_id = ''), c.created_at, c.id"#,
        user.issuer(),
        user.subject(),
        provider.as_str(),
        client_id,
    )
    .fetch_all(exec)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| CallAccount {
            grant: r.granted.then_some(GrantUse {
                last_used_at: r.grant_last_used_at,
                read_at: r.read_at,
            }),
            row: ConnectionRow {
                id: r.id,
                issuer: r.issuer,
                subject: r.subject,
                provider: r.provider,
                account_id: r.account_id,
                account_label: r.account_label,
                scopes: r.scopes,
                access_token: r.access_token,
                refresh_token: r.refresh_token,
                key_id: r.key_id,
                access_token_expires_at: r.access_token_expires_at,
                status: r.status,
                last_used_at: r.last_used_at,
                tokens_stored_at: r.tokens_stored_at,
                params: r.params,
                read_at: r.read_at,
            },
        })
        .collect())
}
