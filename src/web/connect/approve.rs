//! The approval page: "*client* wants to use your *provider* account
//! *label*" with Allow and Deny. Reached through the same ticketed link,
//! sign-in and identity check as a connect, and posted to the same
//! `POST /connect` with the same CSRF token bound to the ticket; Allow
//! stores the grant with no provider round trip, Deny declines the ticket
//! (handled by `consent::cancel`, as for a connect).

use actix_web::{HttpRequest, HttpResponse, http::StatusCode};
use askama::Template;
use serde_json::json;

use super::{audit, consent::csrf_purpose};
use crate::{
    connect::grants::Allowed,
    db::{self, audit::AuditKind, tickets::Ticket},
    state::AppState,
    web::{
        pages::{self, Notice, WebError},
        session::SignedInUser,
    },
};

#[derive(Template)]
#[template(path = "connect/approve.html")]
struct ApprovePage {
    signed_in: Option<String>,
    client: String,
    /// The client id, shown beside a name the client gave itself.
    client_id: Option<String>,
    /// The host its metadata document was fetched from.
    client_host: Option<String>,
    provider: String,
    account: String,
    /// The provider's id of the account: labels may be alike (the same
    /// user name on two GitLab instances), ids are not.
    account_id: String,
    ticket_id: String,
    csrf: String,
}

pub(super) async fn show(
    state: &AppState,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<HttpResponse, WebError> {
    let (provider, _) = state.connect.ticket_provider(ticket)?;
    let connection = match ticket.connection_id {
        Some(id) => state.connect.connection_of(user.user(), id).await?,
        None => None,
    };
    let connection = connection.ok_or(WebError::LinkGone)?;
    let client = state
        .connect
        .client_names()
        .describe(&ticket.client_id)
        .await;
    let page = ApprovePage {
        signed_in: Some(user.display_name.clone()),
        client: client.shown().to_owned(),
        client_id: client.name.is_some().then(|| client.id.clone()),
        client_host: client.host.clone(),
        provider: provider.display_name().to_owned(),
        account: connection.account_label,
        account_id: connection.account_id,
        ticket_id: ticket.id.to_string(),
        csrf: user.csrf_token(&csrf_purpose(ticket.id)),
    };
    Ok(pages::render(StatusCode::OK, &page))
}

pub(super) async fn allow(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<HttpResponse, WebError> {
    let (provider, _) = state.connect.ticket_provider(ticket)?;
    let created = match state.connect.allow_client(user.user(), ticket).await? {
        Allowed::Granted { created } => created,
        // Used already: by this person's first Allow (a double click), if
        // the grant is there, which is what they asked for.
        Allowed::TicketGone if state.connect.was_allowed(ticket).await? => false,
        Allowed::TicketGone | Allowed::ConnectionGone => return Err(WebError::LinkGone),
    };
    // A grant that was there already (another of the client's links was
    // allowed first) is no new grant to record. Recorded before anything
    // else can fail: a second Allow after a failure finds the grant made,
    // and would record nothing.
    if created {
        audit(
        state,
        req,
        AuditKind::GrantCreated,
        Some(user.user()),
        Some(provider.name()),
        json!({ "ticket_id": ticket.id, "client_id": db::audit::client_id(&ticket.client_id), "connection_id": ticket.connection_id }),
    )
    .await;
    }
    db::web_sessions::clear_pending_ticket(&state.db, user.session_id, ticket.id).await?;
    let client = state
        .connect
        .client_names()
        .describe(&ticket.client_id)
        .await;
    Ok(pages::render(
        StatusCode::OK,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            tone: "ok",
            title: format!("{} allowed", client.shown()),
            lines: vec![format!(
                "{} can now use your {} account — you can return to your MCP client.",
                client.shown(),
                provider.display_name()
            )],
            facts: Vec::new(),
            link: Some(("/connections".into(), "See your connections".into())),
        },
    ))
}
