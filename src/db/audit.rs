//! `audit_events`: what happened to whose connections. Never a secret in
//! `detail`.

use serde_json::Value;
use sqlx::PgExecutor;

use crate::domain::UserRef;

/// The kinds of event recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    TicketIssued,
    IdentityMismatch,
    ConsentGiven,
    ConsentCancelled,
    Connected,
    Refreshed,
    RefreshFailed,
    Disconnected,
    StateRejected,
    CallbackRejected,
    GrantCreated,
    GrantRemoved,
    /// A stored token no key of the ring opens: the user must connect again.
    TokenUnreadable,
    /// An operator removed the user (`mcp-connect users remove`).
    UserRemoved,
    /// A new account was not stored: the user has as many at the provider
    /// as `flow.accounts_per_provider` allows.
    AccountLimitReached,
    /// The provider ended a grant owed a revocation (a disconnected
    /// connection's, or tokens a connect did not store).
    RevokedUpstream,
    /// The first attempt at a revocation failed; it is tried again for
    /// `revocation.retry_hours`.
    RevocationFailed,
    /// A revocation owed is given up (`reason` says why): the access may
    /// stay live at the provider.
    RevocationAbandoned,
}

impl AuditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::TicketIssued => "ticket_issued",
            AuditKind::IdentityMismatch => "identity_mismatch",
            AuditKind::ConsentGiven => "consent_given",
            AuditKind::ConsentCancelled => "consent_cancelled",
            AuditKind::Connected => "connected",
            AuditKind::Refreshed => "refreshed",
            AuditKind::RefreshFailed => "refresh_failed",
            AuditKind::Disconnected => "disconnected",
            AuditKind::StateRejected => "state_rejected",
            AuditKind::CallbackRejected => "callback_rejected",
            AuditKind::GrantCreated => "grant_created",
            AuditKind::GrantRemoved => "grant_removed",
            AuditKind::TokenUnreadable => "token_unreadable",
            AuditKind::UserRemoved => "user_removed",
            AuditKind::AccountLimitReached => "account_limit_reached",
            AuditKind::RevokedUpstream => "revoked_upstream",
            AuditKind::RevocationFailed => "revocation_failed",
            AuditKind::RevocationAbandoned => "revocation_abandoned",
        }
    }
}

/// How much of a client id an audit row keeps: a Client ID Metadata
/// Document's URL whole, as a rule, so a row still says which client it
/// concerns once the ticket or grant that named it whole is gone.
pub const CLIENT_ID_CHARS: usize = 128;

/// What every audit row keeps of a client id, which the client (or
/// whoever issued its token) chose: a printable prefix of
/// [`CLIENT_ID_CHARS`] characters. One rule for every kind of row, so
/// rows of one client can be told apart, and matched, alike.
pub fn client_id(id: &str) -> String {
    crate::crypto::printable_prefix_of(id, CLIENT_ID_CHARS)
}

/// One event. `issuer`/`subject` name the user it concerns, when known.
#[derive(Debug, Clone)]
pub struct AuditEvent<'a> {
    pub kind: AuditKind,
    pub issuer: Option<&'a str>,
    pub subject: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub detail: Value,
    pub ip: Option<&'a str>,
    pub user_agent: Option<&'a str>,
}

impl<'a> AuditEvent<'a> {
    pub fn new(kind: AuditKind) -> Self {
        Self {
            kind,
            issuer: None,
            subject: None,
            provider: None,
            detail: Value::Object(Default::default()),
            ip: None,
            user_agent: None,
        }
    }
    pub fn user(mut self, user: UserRef<'a>) -> Self {
        self.issuer = Some(user.issuer());
        self.subject = Some(user.subject());
        self
    }
    pub fn provider(mut self, provider: &'a str) -> Self {
        self.provider = Some(provider);
        self
    }
    pub fn detail(mut self, detail: Value) -> Self {
        self.detail = detail;
        self
    }
    pub fn client(mut self, ip: Option<&'a str>, user_agent: Option<&'a str>) -> Self {
        self.ip = ip;
        self.user_agent = user_agent;
        self
    }
}

pub async fn record(exec: impl PgExecutor<'_>, event: AuditEvent<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO audit_events (issuer, subject, kind, provider, detail, ip, user_agent)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        event.issuer,
        event.subject,
        event.kind.as_str(),
        event.provider,
        event.detail,
        event.ip,
        event
            .user_agent
            .map(|ua| ua.chars().take(256).collect::<String>()),
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Records events of one kind, each about a person's connection at a
/// provider (issuer, subject, provider, detail), in one statement: a page
/// of changes an operator's command made, as [`record`] writes one.
pub async fn record_many(
    exec: impl PgExecutor<'_>,
    kind: AuditKind,
    events: &[(UserRef<'_>, &str, Value)],
) -> Result<(), sqlx::Error> {
    let issuers: Vec<&str> = events.iter().map(|e| e.0.issuer()).collect();
    let subjects: Vec<&str> = events.iter().map(|e| e.0.subject()).collect();
    let providers: Vec<&str> = events.iter().map(|e| e.1).collect();
    let details: Vec<Value> = events.iter().map(|e| e.2.clone()).collect();
    sqlx::query!(
        "INSERT INTO audit_events (issuer, subject, kind, provider, detail)
         SELECT e.issuer, e.subject, $1, e.provider, e.detail
         FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[])
             AS e(issuer, subject, provider, detail)",
        kind.as_str(),
        &issuers as &[&str],
        &subjects as &[&str],
        &providers as &[&str],
        &details,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Records an event, logging instead of failing: an audit write must never
/// turn a refusal into a crash or an answer into an error, nor hold it up
/// past `limit` (the database's deadline: a frozen server cancels nothing
/// by itself, see `db::faults`).
pub async fn record_or_log(
    exec: impl PgExecutor<'_>,
    limit: std::time::Duration,
    event: AuditEvent<'_>,
) {
    let kind = event.kind.as_str();
    match tokio::time::timeout(limit, record(exec, event)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, kind, "audit event could not be recorded"),
        Err(_) => tracing::error!(kind, "audit event could not be recorded in time"),
    }
}

/// Deletes up to `batch` audit rows recorded before `now() - retention`,
/// oldest first, by address as [`crate::db::expiry::delete_batch`] does.
/// Returns how many went; fewer than `batch` means none are left.
pub async fn delete_older_than(
    exec: impl PgExecutor<'_>,
    retention: chrono::Duration,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM audit_events WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM audit_events WHERE at < now() - make_interval(secs => $1)
             ORDER BY at LIMIT $2))
           AND at < now() - make_interval(secs => $1)",
        retention.num_seconds() as f64,
        batch,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected())
}

/// Records a refusal counted per principal and minute: adds one to the
/// `count` of the same principal's and client's row of this kind from the
/// last minute, or inserts `event` (whose detail starts the count) when
/// there is none. `true` when a new row was written.
pub async fn count_rejection(
    exec: impl PgExecutor<'_>,
    event: AuditEvent<'_>,
    client_id: &str,
) -> Result<bool, sqlx::Error> {
    let inserted: Option<i64> = sqlx::query_scalar!(
        r#"WITH bumped AS (
             UPDATE audit_events
                SET detail = jsonb_set(detail, '{count}',
                        to_jsonb(COALESCE((detail->>'count')::bigint, 1) + 1))
              WHERE id = (SELECT id FROM audit_events
                           WHERE kind = $1 AND issuer = $2 AND subject = $3
                             AND detail->>'client_id' = $4
                             AND at > now() - interval '1 minute'
                           ORDER BY at DESC LIMIT 1)
             RETURNING id)
         INSERT INTO audit_events (kind, issuer, subject, provider, detail)
         SELECT $1, $2, $3, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM bumped)
         RETURNING id AS "id!""#,
        event.kind.as_str(),
        event.issuer,
        event.subject,
        client_id,
        event.provider,
        event.detail,
    )
    .fetch_optional(exec)
    .await?;
    Ok(inserted.is_some())
}
