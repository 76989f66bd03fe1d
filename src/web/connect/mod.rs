//! The connect flow in the browser — the page an MCP client's URL
//! elicitation opens. In order:
//!
//! 1. `GET /connect?ticket=T` (`open`): the ticket must be usable; without a
//!    session the browser signs in first (the ticket id travels with the
//!    login flow, server-side); a session of another person gets the 403
//!    "made for another account" page and nothing else. Then the browser
//!    moves on to the consent page's address for this ticket: its id (not
//!    the ticket) and a tag only this session can make, so that each tab
//!    keeps its own link. The id is also kept on the session, as the link
//!    it opened last, for the plain `/connect/consent` address.
//! 2. `GET /connect/consent` + `POST /connect` (`consent`): the person sees
//!    what is asked and says Continue (the ticket is redeemed atomically and
//!    the browser goes to the provider) or Cancel (the ticket is declined).
//!    A ticket that names a connection is an approval ticket instead: the
//!    same page shows "*client* wants to use your *provider* account" with
//!    Allow and Deny (`approve`), and Allow stores the grant (no provider
//!    round trip).
//!    For an API-key or Basic provider the same page is a form instead
//!    (`credential`): the key is checked at the provider and stored on
//!    Continue, with no round trip through the provider's pages.
//! 3. `GET /oauth/callback/{provider}` (`callback`): the provider's answer,
//!    accepted only from the browser session that started the flow, once.

mod approve;
mod callback;
mod consent;
mod credential;
mod finishing;
mod open;

use crate::domain::UserRef;
use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;
use serde_json::json;

use super::{logout, pages, session::SignedInUser};
use crate::{
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        tickets::Ticket,
    },
    state::AppState,
};

/// Who asked for a connect, for the pages that end it: where the person
/// goes back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AskedBy {
    /// An MCP client, through a tool's link: the person returns to it.
    Client,
    /// The person, on their connections page (Connect, Reconnect).
    ConnectionsPage,
}

impl AskedBy {
    fn of_ticket(state: &AppState, ticket: &Ticket) -> Self {
        if state.connect.asked_on_connections_page(ticket) {
            Self::ConnectionsPage
        } else {
            Self::Client
        }
    }

    fn of_flow(flow: &db::oauth_flows::OAuthFlow) -> Self {
        if flow.return_to.as_deref() == Some(crate::connect::flows::CONNECTIONS_PAGE) {
            Self::ConnectionsPage
        } else {
            Self::Client
        }
    }
}

/// The link to the connections page that pages ending a connect offer.
fn connections_link() -> Option<(String, String)> {
    Some(("/connections".into(), "See your connections".into()))
}

/// Where the consent page lives (a URL that never carries the ticket).
pub const CONSENT_PATH: &str = "/connect/consent";

/// The consent page for one ticket in this browser session: its id (never
/// the ticket's secret) and a tag only this session's secret makes. Each
/// tab keeps the link it opened, where the session's pending ticket is
/// only the last one opened; the tag keeps the address from working in
/// any other session.
pub fn consent_url(user: &SignedInUser, ticket_id: uuid::Uuid) -> String {
    consent_url_in(user.csrf_secret(), ticket_id)
}

/// [`consent_url`] for the session with CSRF secret `csrf_secret` (one
/// just started, before its cookie reached the browser).
pub fn consent_url_in(csrf_secret: &[u8], ticket_id: uuid::Uuid) -> String {
    format!(
        "{CONSENT_PATH}?t={ticket_id}&m={}",
        crate::web::csrf::token(csrf_secret, &view_purpose(ticket_id))
    )
}

/// What a consent address's tag stands for.
fn view_purpose(ticket_id: uuid::Uuid) -> String {
    format!("view:{ticket_id}")
}

/// The ticket a consent address names, when its tag is this session's.
fn ticket_in_address(user: &SignedInUser, query: &crate::web::forms::Params) -> Option<uuid::Uuid> {
    let id = uuid::Uuid::parse_str(query.get("t")?).ok()?;
    user.csrf_matches(&view_purpose(id), query.get("m"))
        .then_some(id)
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/connect", web::get().to(open::open))
        .route("/connect", web::post().to(consent::submit))
        .route(CONSENT_PATH, web::get().to(consent::show))
        .route(
            "/oauth/callback/{provider}",
            web::get().to(callback::callback),
        );
}

async fn audit(
    state: &AppState,
    req: &HttpRequest,
    kind: AuditKind,
    user: Option<UserRef<'_>>,
    provider: Option<&str>,
    detail: serde_json::Value,
) {
    let client = crate::web::client_info(state, req);
    audit_for(state, &client, kind, user, provider, detail).await;
}

/// [`audit`] with the client's address and user agent read before: for
/// work that outlives its request.
async fn audit_for(
    state: &AppState,
    (ip, agent): &(Option<String>, Option<String>),
    kind: AuditKind,
    user: Option<UserRef<'_>>,
    provider: Option<&str>,
    detail: serde_json::Value,
) {
    let mut event = AuditEvent::new(kind)
        .detail(detail)
        .client(ip.as_deref(), agent.as_deref());
    if let Some(user) = user {
        event = event.user(user);
    }
    if let Some(provider) = provider {
        event = event.provider(provider);
    }
    db::audit::record_or_log(&state.db, state.settings.database.deadline(), event).await;
}

/// The log line and audit row for `ticket`, met by the session
/// `session_id` of `signed_in`, who is not the person it was made for.
/// Callers record it once per ticket and session: reloading the link
/// must not grow the audit table.
pub(crate) async fn record_identity_mismatch(
    state: &AppState,
    req: &HttpRequest,
    signed_in: UserRef<'_>,
    session_id: uuid::Uuid,
    ticket: &Ticket,
) {
    // Once per link and session: a session that opens this link and its
    // own in turn changes its pending link each time.
    match db::tickets::first_mismatch(&state.db, ticket.id, session_id).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot tell whether a link's mismatch was recorded; recording it");
        }
    }
    tracing::warn!(
        ticket = %ticket.id,
        session = %session_id,
        "connect link opened by another account; refused"
    );
    audit(
        state,
        req,
        AuditKind::IdentityMismatch,
        Some(ticket.user()),
        Some(&ticket.provider),
        json!({
            "ticket_id": ticket.id,
            "client_id": db::audit::client_id(&ticket.client_id),
            "session_issuer": signed_in.issuer(),
            "session_subject": signed_in.subject(),
        }),
    )
    .await;
}

#[derive(Template)]
#[template(path = "connect/mismatch.html")]
struct MismatchPage {
    signed_in: Option<String>,
    /// Who is signed in here: the page says so, to explain the refusal.
    name: String,
    /// The link this page refused: "Sign out and use another account"
    /// comes back to it, whichever link this session opened since.
    ticket_id: String,
    csrf: String,
    /// The token binding `ticket_id` to this session (the sign-out's own
    /// token stays as every release checks it).
    switch_csrf: String,
}

/// The answer to a link opened by someone other than the person it was made
/// for: a 403 page, an audit row when `record` (the first time this session
/// met this ticket), and nothing else — no redirect, no flow, the ticket
/// left as it was. The page offers to sign out and sign in as the right
/// person; the ticket stays server-side on the session for that.
async fn identity_mismatch(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
    record: bool,
) -> HttpResponse {
    if record {
        record_identity_mismatch(state, req, user.user(), user.session_id, ticket).await;
    }
    pages::render(
        StatusCode::FORBIDDEN,
        &MismatchPage {
            signed_in: Some(user.display_name.clone()),
            name: user.display_name.clone(),
            ticket_id: ticket.id.to_string(),
            csrf: user.csrf_token(logout::PURPOSE),
            switch_csrf: user.csrf_token(&logout::switch_purpose(ticket.id)),
        },
    )
}
