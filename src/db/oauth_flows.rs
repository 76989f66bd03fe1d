//! `oauth_flows`: authorization code flows in progress — signing in to this
//! service (`login`) and connecting a provider (`connect`). `state` is stored
//! as SHA-256 only and the PKCE verifier sealed; a flow is used at most once.
//! A flow's times are the database's clock's only: the instances' clocks
//! may disagree with it, and with each other.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// What a flow signs in to, as the `kind` column stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum FlowKind {
    Login,
    Connect,
}

impl FlowKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FlowKind::Login => "login",
            FlowKind::Connect => "connect",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OAuthFlow {
    pub id: Uuid,
    pub kind: FlowKind,
    pub ticket_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub browser_binding: Option<Vec<u8>>,
    pub provider: Option<String>,
    pub pkce_verifier: Vec<u8>,
    pub nonce: Option<String>,
    pub key_id: String,
    /// Where the person goes back to: for a sign-in, the page that sent
    /// them; for a connect, the connections page when they asked for it
    /// there (`None`: an MCP client asked).
    pub return_to: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    /// The connection a completed connect flow stored, once it has.
    pub connection_id: Option<Uuid>,
    /// The database's clock when the statement that returned this row
    /// ran: what its times are compared with.
    pub read_at: DateTime<Utc>,
}

impl OAuthFlow {
    pub fn is(&self, kind: FlowKind) -> bool {
        self.kind == kind
    }
}

pub struct NewFlow<'a> {
    pub id: Uuid,
    pub state_hash: &'a [u8],
    pub kind: FlowKind,
    pub ticket_id: Option<Uuid>,
    pub session_id: Option<Uuid>,
    pub browser_binding: Option<&'a [u8]>,
    pub provider: Option<&'a str>,
    pub pkce_verifier: &'a [u8],
    pub nonce: Option<&'a str>,
    pub key_id: &'a str,
    pub return_to: Option<&'a str>,
    /// How long the flow lives from its insert, by the database's clock.
    pub ttl: std::time::Duration,
}

pub async fn insert(exec: impl PgExecutor<'_>, f: NewFlow<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO oauth_flows (id, state_hash, kind, ticket_id, session_id, browser_binding,
                                  provider, pkce_verifier, nonce, key_id, return_to, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now() + make_interval(secs => $12))",
        f.id,
        f.state_hash,
        f.kind as FlowKind,
        f.ticket_id,
        f.session_id,
        f.browser_binding,
        f.provider,
        f.pkce_verifier,
        f.nonce,
        f.key_id,
        f.return_to,
        f.ttl.as_secs_f64(),
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Takes (deletes and returns) a login flow: whatever the checks that follow
/// decide, it can never be used again.
pub async fn take_login(
    exec: impl PgExecutor<'_>,
    state_hash: &[u8],
) -> Result<Option<OAuthFlow>, sqlx::Error> {
    sqlx::query_as!(
        OAuthFlow,
        r#"DELETE FROM oauth_flows WHERE state_hash = $1 AND kind = 'login'
           RETURNING id, kind AS "kind: FlowKind", ticket_id, session_id, browser_binding, provider,
                     pkce_verifier, nonce, key_id, return_to, created_at, expires_at, completed_at,
                     connection_id, now() AS "read_at!""#,
        state_hash,
    )
    .fetch_optional(exec)
    .await
}

pub async fn find_by_state_hash(
    exec: impl PgExecutor<'_>,
    state_hash: &[u8],
) -> Result<Option<OAuthFlow>, sqlx::Error> {
    sqlx::query_as!(
        OAuthFlow,
        r#"SELECT id, kind AS "kind: FlowKind", ticket_id, session_id, browser_binding, provider,
                  pkce_verifier, nonce, key_id, return_to, created_at, expires_at, completed_at,
                  connection_id, now() AS "read_at!"
           FROM oauth_flows WHERE state_hash = $1"#,
        state_hash,
    )
    .fetch_optional(exec)
    .await
}

/// The connect flow browser session `session_id` started for ticket
/// `ticket_id` and has not finished, while it has not expired (by the
/// database's clock).
pub async fn find_open_for_ticket(
    exec: impl PgExecutor<'_>,
    ticket_id: Uuid,
    session_id: Uuid,
) -> Result<Option<OAuthFlow>, sqlx::Error> {
    sqlx::query_as!(
        OAuthFlow,
        r#"SELECT id, kind AS "kind: FlowKind", ticket_id, session_id, browser_binding, provider,
                  pkce_verifier, nonce, key_id, return_to, created_at, expires_at, completed_at,
                  connection_id, now() AS "read_at!"
           FROM oauth_flows
           WHERE ticket_id = $1 AND session_id = $2 AND kind = 'connect'
             AND completed_at IS NULL AND expires_at > now()
           ORDER BY created_at DESC LIMIT 1"#,
        ticket_id,
        session_id,
    )
    .fetch_optional(exec)
    .await
}

/// Gives an unfinished, unexpired flow a new `state` (its hash) and PKCE
/// verifier (sealed, with the key that sealed it): the old `state` no
/// longer finds it, nor completes it. `false` when it finished or expired
/// meanwhile.
pub async fn restate(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    state_hash: &[u8],
    pkce_verifier: &[u8],
    key_id: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE oauth_flows SET state_hash = $2, pkce_verifier = $3, key_id = $4
         WHERE id = $1 AND completed_at IS NULL AND expires_at > now()",
        id,
        state_hash,
        pkce_verifier,
        key_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks a flow completed; `None` when it already was (or has expired, or
/// was given a new `state` since it was found by `state_hash`), so of any
/// number of concurrent callbacks exactly one proceeds.
pub async fn complete(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    state_hash: &[u8],
) -> Result<Option<OAuthFlow>, sqlx::Error> {
    sqlx::query_as!(
        OAuthFlow,
        r#"UPDATE oauth_flows SET completed_at = now()
           WHERE id = $1 AND state_hash = $2 AND completed_at IS NULL AND expires_at > now()
           RETURNING id, kind AS "kind: FlowKind", ticket_id, session_id, browser_binding, provider,
                     pkce_verifier, nonce, key_id, return_to, created_at, expires_at, completed_at,
                     connection_id, now() AS "read_at!""#,
        id,
        state_hash,
    )
    .fetch_optional(exec)
    .await
}

/// Records the connection a completed connect flow stored (in the
/// transaction that stored it).
pub async fn set_connection(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    connection_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE oauth_flows SET connection_id = $2 WHERE id = $1",
        id,
        connection_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Notes that a callback for flow `id` came from another browser session;
/// `true` the first time only (what is audited).
pub async fn note_foreign_callback(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE oauth_flows SET foreign_callback_at = now()
         WHERE id = $1 AND foreign_callback_at IS NULL",
        id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn delete(exec: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM oauth_flows WHERE id = $1", id)
        .execute(exec)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes flow `id` unless a connection was stored for it (a reload then
/// shows the connection); `true` when it was deleted.
pub async fn delete_unfinished(exec: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM oauth_flows WHERE id = $1 AND connection_id IS NULL",
        id
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Notes on the ticket behind a connect flow that the provider refused
/// the authorization with `code` (its `error`, not the person's decline),
/// so that the MCP client's retry says why instead of handing out another
/// link. Like a decline, it does not require the ticket unredeemed.
pub async fn refuse_ticket(
    exec: impl PgExecutor<'_>,
    flow_id: Uuid,
    code: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connect_tickets SET refused_with = $2
         WHERE declined_at IS NULL AND refused_with IS NULL
           AND id = (SELECT ticket_id FROM oauth_flows WHERE id = $1 AND kind = 'connect')",
        flow_id,
        code,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks the ticket behind a connect flow declined (the person said no at
/// the provider), so the MCP client's retry can say so. The ticket was
/// redeemed when the flow started, so this does not require it unredeemed.
pub async fn decline_ticket(exec: impl PgExecutor<'_>, flow_id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connect_tickets SET declined_at = now()
         WHERE declined_at IS NULL
           AND id = (SELECT ticket_id FROM oauth_flows WHERE id = $1 AND kind = 'connect')",
        flow_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}
