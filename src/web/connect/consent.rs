//! `GET /connect/consent` shows what is asked — this server, the provider,
//! the scopes in plain words, the MCP client — with Continue and Cancel.
//! `POST /connect` acts on the answer: Continue redeems the ticket (one
//! atomic UPDATE, so of any number of concurrent posts exactly one goes on),
//! records the OAuth flow bound to this session and sends the browser to
//! the provider; Cancel declines the ticket.
//!
//! The form names the ticket it was shown for, and its CSRF token is bound
//! to that ticket id, so a page open in another tab cannot confirm a
//! different request than the one it displays.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;
use serde_json::json;
use uuid::Uuid;

use super::{audit, identity_mismatch};
use crate::{
    connect::tickets::usable,
    db::{self, audit::AuditKind, tickets::Ticket},
    state::AppState,
    web::{
        forms,
        pages::{self, Notice, WebError, see_other},
        session::SignedInUser,
    },
};

#[derive(Template)]
#[template(path = "connect/consent.html")]
struct ConsentPage {
    signed_in: Option<String>,
    host: String,
    provider: String,
    scopes: Vec<String>,
    /// The MCP client's id; `None` when the person started from the
    /// connections page (the web client).
    client_id: Option<String>,
    ticket_id: String,
    csrf: String,
}

pub(super) fn csrf_purpose(ticket_id: Uuid) -> String {
    format!("connect:{ticket_id}")
}

pub(super) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: SignedInUser,
) -> Result<HttpResponse, WebError> {
    let ticket = match user.pending_ticket_id {
        Some(id) => state.connect.ticket(id).await?,
        None => None,
    };
    let ticket = ticket.filter(usable).ok_or(WebError::LinkGone)?;
    if !user.is(ticket.user()) {
        return Ok(identity_mismatch(&state, &req, &user, &ticket).await);
    }
    if ticket.connection_id.is_some() {
        return super::approve::show(&state, &user, &ticket).await;
    }
    let (provider, scopes) = state.connect.ticket_provider(&ticket)?;
    if !provider.is_oauth() {
        let context = credential_context(&state, &ticket, provider);
        return Ok(super::credential::show(&user, &ticket, context));
    }
    let page = ConsentPage {
        signed_in: Some(user.display_name.clone()),
        host: host(&state),
        provider: provider.display_name().to_owned(),
        scopes: scopes.iter().map(|s| provider.describe_scope(s)).collect(),
        client_id: asking_client(&state, &ticket),
        ticket_id: ticket.id.to_string(),
        csrf: user.csrf_token(&csrf_purpose(ticket.id)),
    };
    Ok(pages::render(StatusCode::OK, &page))
}

/// This server's host (and port), as the page names it.
fn host(state: &AppState) -> String {
    let url = &state.settings.public_url;
    match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    }
}

/// The MCP client that asked; `None` when the person started from the
/// connections page.
fn asking_client(state: &AppState, ticket: &Ticket) -> Option<String> {
    let from_this_site = state.settings.auth.web_client_id.as_deref() == Some(&ticket.client_id);
    (!from_this_site).then(|| ticket.client_id.clone())
}

fn credential_context<'a>(
    state: &AppState,
    ticket: &Ticket,
    provider: &'a crate::providers::Provider,
) -> super::credential::Context<'a> {
    super::credential::Context {
        host: host(state),
        client_id: asking_client(state, ticket),
        provider,
    }
}

pub(super) async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: SignedInUser,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let ticket_id = form
        .get("ticket")
        .and_then(|t| Uuid::parse_str(t).ok())
        .ok_or(WebError::BadRequest(
            "The form is incomplete. Go back and reload the page.",
        ))?;
    user.check_csrf(&csrf_purpose(ticket_id), &form)?;
    let ticket = state
        .connect
        .ticket(ticket_id)
        .await?
        .ok_or(WebError::LinkGone)?;
    if !user.is(ticket.user()) {
        return Ok(identity_mismatch(&state, &req, &user, &ticket).await);
    }
    match form.get("action") {
        Some("continue") => proceed(&state, &req, &user, &ticket, &form).await,
        Some("cancel") => cancel(&state, &req, &user, &ticket).await,
        _ => Err(WebError::BadRequest("Choose Continue or Cancel.")),
    }
}

async fn proceed(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
    form: &forms::Params,
) -> Result<HttpResponse, WebError> {
    if ticket.connection_id.is_some() {
        return super::approve::allow(state, req, user, ticket).await;
    }
    let (provider, _) = state.connect.ticket_provider(ticket)?;
    if !provider.is_oauth() {
        let context = credential_context(state, ticket, provider);
        return super::credential::submit(state, req, user, ticket, form, context).await;
    }
    let started = state
        .connect
        .start_flow(ticket, user.user(), user.session_id)
        .await?;
    let Some(started) = started else {
        tracing::info!(ticket = %ticket.id, "connect ticket already used");
        return Err(WebError::LinkGone);
    };
    let ticket = &started.ticket;
    audit(
        state,
        req,
        AuditKind::ConsentGiven,
        Some(user.user()),
        Some(&ticket.provider),
        json!({ "ticket_id": ticket.id, "client_id": ticket.client_id, "scopes": started.scopes }),
    )
    .await;
    Ok(see_other(started.authorize_url.as_str()))
}

async fn cancel(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<HttpResponse, WebError> {
    let declined = state.connect.decline_ticket(ticket.id, user.user()).await?;
    if !declined {
        return Err(WebError::LinkGone);
    }
    db::web_sessions::clear_pending_ticket(&state.db, user.session_id, ticket.id).await?;
    audit(
        state,
        req,
        AuditKind::ConsentCancelled,
        Some(user.user()),
        Some(&ticket.provider),
        json!({ "ticket_id": ticket.id, "client_id": ticket.client_id, "at": "consent" }),
    )
    .await;
    Ok(pages::render(
        StatusCode::OK,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            title: "Cancelled".into(),
            lines: vec![
                "You can close this tab; your MCP client will be told that you declined.".into(),
            ],
            ..Notice::default()
        },
    ))
}
