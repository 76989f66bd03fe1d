//! The `params` column of `connect_tickets`, `oauth_flows` and
//! `connections`: a connection's provider parameters as a JSON object of
//! strings, carried from the connect page through the flow to the
//! connection.

use std::collections::BTreeMap;

use sqlx::{PgExecutor, types::Json};
use uuid::Uuid;

/// The row that holds the parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    Ticket,
    Flow,
    Connection,
}

/// A connection's parameters by name.
pub type Params = BTreeMap<String, String>;

/// Replaces the parameters of one row; `false` when there is no such row.
pub async fn set(
    exec: impl PgExecutor<'_>,
    holder: Holder,
    id: Uuid,
    params: &Params,
) -> Result<bool, sqlx::Error> {
    let params = Json(params);
    let done = match holder {
        Holder::Ticket => {
            sqlx::query!(
                "UPDATE connect_tickets SET params = $2 WHERE id = $1",
                id,
                params as _,
            )
            .execute(exec)
            .await?
        }
        Holder::Flow => {
            sqlx::query!(
                "UPDATE oauth_flows SET params = $2 WHERE id = $1",
                id,
                params as _,
            )
            .execute(exec)
            .await?
        }
        Holder::Connection => {
            sqlx::query!(
                "UPDATE connections SET params = $2, updated_at = now(),
                 tokens_stored_at = COALESCE(tokens_stored_at, updated_at) WHERE id = $1",
                id,
                params as _,
            )
            .execute(exec)
            .await?
        }
    };
    Ok(done.rows_affected() == 1)
}

/// The parameters of one row; `None` when there is no such row.
pub async fn get(
    exec: impl PgExecutor<'_>,
    holder: Holder,
    id: Uuid,
) -> Result<Option<Params>, sqlx::Error> {
    let found = match holder {
        Holder::Ticket => {
            sqlx::query_scalar!(
                r#"SELECT params AS "params: Json<Params>" FROM connect_tickets WHERE id = $1"#,
                id,
            )
            .fetch_optional(exec)
            .await?
        }
        Holder::Flow => {
            sqlx::query_scalar!(
                r#"SELECT params AS "params: Json<Params>" FROM oauth_flows WHERE id = $1"#,
                id,
            )
            .fetch_optional(exec)
            .await?
        }
        Holder::Connection => {
            sqlx::query_scalar!(
                r#"SELECT params AS "params: Json<Params>" FROM connections WHERE id = $1"#,
                id,
            )
            .fetch_optional(exec)
            .await?
        }
    };
    Ok(found.map(|Json(p)| p))
}
