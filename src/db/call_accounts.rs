//! The one read of a tool call that needs a user's account: their
//! connections to the provider, each with its sealed tokens and the calling
//! client's grant on it (`connections` left-joined to `client_grants`).
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

/// A grant found by [`read`]: when the client last used it.
#[derive(Debug, Clone, Copy)]
pub struct GrantUse {
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The user's connections to `provider` in the order of
/// [`super::connections::find_account`] (accounts before placeholder rows,
/// oldest first), each with `client_id`'s grant.
pub async fn read(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    provider: &ProviderName,
    client_id: &str,
) -> Result<Vec<CallAccount>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT c.id, c.issuer, c.subject, c.provider AS "provider: ProviderName", c.account_id, c.account_label, c.scopes,
                  c.access_token, c.refresh_token, c.key_id, c.access_token_expires_at,
                  c.status AS "status: ConnectionStatus", c.last_used_at, c.updated_at,
                  c.params AS "params: sqlx::types::Json<super::params::Params>",
                  g.client_id IS NOT NULL AS "granted!",
                  g.last_used_at AS "grant_last_used_at?"
           FROM connections c
           LEFT JOIN client_grants g ON g.connection_id = c.id AND g.client_id = $4
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
                updated_at: r.updated_at,
                params: r.params,
            },
        })
        .collect())
}
