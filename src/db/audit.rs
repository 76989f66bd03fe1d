//! `audit_events`: what happened to whose connections. Never a secret in
//! `detail`.

use serde_json::Value;
use sqlx::PgExecutor;

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
        }
    }
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
    pub fn user(mut self, issuer: &'a str, subject: &'a str) -> Self {
        self.issuer = Some(issuer);
        self.subject = Some(subject);
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
    sqlx::query(
        "INSERT INTO audit_events (issuer, subject, kind, provider, detail, ip, user_agent)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(event.issuer)
    .bind(event.subject)
    .bind(event.kind.as_str())
    .bind(event.provider)
    .bind(event.detail)
    .bind(event.ip)
    .bind(
        event
            .user_agent
            .map(|ua| ua.chars().take(256).collect::<String>()),
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Records an event, logging instead of failing: an audit write must never
/// turn a refusal into a crash or an answer into an error.
pub async fn record_or_log(exec: impl PgExecutor<'_>, event: AuditEvent<'_>) {
    let kind = event.kind.as_str();
    if let Err(e) = record(exec, event).await {
        tracing::error!(error = %e, kind, "audit event could not be recorded");
    }
}
