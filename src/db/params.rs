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
    let sql = match holder {
        Holder::Ticket => "UPDATE connect_tickets SET params = $2 WHERE id = $1",
        Holder::Flow => "UPDATE oauth_flows SET params = $2 WHERE id = $1",
        Holder::Connection => {
            "UPDATE connections SET params = $2, updated_at = now() WHERE id = $1"
        }
    };
    let done = sqlx::query(sql)
        .bind(id)
        .bind(Json(params))
        .execute(exec)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The parameters of one row; `None` when there is no such row.
pub async fn get(
    exec: impl PgExecutor<'_>,
    holder: Holder,
    id: Uuid,
) -> Result<Option<Params>, sqlx::Error> {
    let sql = match holder {
        Holder::Ticket => "SELECT params FROM connect_tickets WHERE id = $1",
        Holder::Flow => "SELECT params FROM oauth_flows WHERE id = $1",
        Holder::Connection => "SELECT params FROM connections WHERE id = $1",
    };
    let found: Option<Json<Params>> = sqlx::query_scalar(sql)
        .bind(id)
        .fetch_optional(exec)
        .await?;
    Ok(found.map(|Json(p)| p))
}
