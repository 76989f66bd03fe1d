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
use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::{audit, identity_mismatch, usable};
use crate::{
    crypto::Purpose,
    db::{
        self,
        audit::AuditKind,
        oauth_flows::{FlowKind, NewFlow},
        tickets::Ticket,
    },
    providers::Provider,
    startup::AppState,
    web::{
        forms,
        pages::{self, Notice, WebError, see_other},
        secret,
        session::SignedInUser,
    },
};

/// How long a started connect flow waits for the provider's callback.
const FLOW_TTL: chrono::Duration = chrono::Duration::minutes(10);

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

pub(super) fn provider_of<'s>(
    state: &'s AppState,
    ticket: &Ticket,
) -> Result<&'s Provider, WebError> {
    state.providers.get(&ticket.provider).ok_or_else(|| {
        WebError::Internal(anyhow::anyhow!(
            "ticket {} names provider `{}`, which is not configured",
            ticket.id,
            ticket.provider
        ))
    })
}

fn requested_scopes(provider: &Provider, ticket: &Ticket) -> Vec<String> {
    if ticket.scopes.is_empty() {
        provider.default_scopes().to_vec()
    } else {
        ticket.scopes.clone()
    }
}

pub(super) async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: SignedInUser,
) -> Result<HttpResponse, WebError> {
    let ticket = match user.pending_ticket_id {
        Some(id) => db::tickets::find_by_id(&state.db, id).await?,
        None => None,
    };
    let ticket = ticket.filter(usable).ok_or(WebError::LinkGone)?;
    if !user.is(&ticket.issuer, &ticket.subject) {
        return Ok(identity_mismatch(&state, &req, &user, &ticket).await);
    }
    if ticket.connection_id.is_some() {
        return super::approve::show(&state, &user, &ticket).await;
    }
    let provider = provider_of(&state, &ticket)?;
    let url = &state.settings.public_url;
    let host = match url.port() {
        Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_owned(),
    };
    let from_this_site = state.settings.auth.web_client_id.as_deref() == Some(&ticket.client_id);
    let page = ConsentPage {
        signed_in: Some(user.display_name.clone()),
        host,
        provider: provider.display_name().to_owned(),
        scopes: requested_scopes(provider, &ticket)
            .iter()
            .map(|s| provider.describe_scope(s))
            .collect(),
        client_id: (!from_this_site).then(|| ticket.client_id.clone()),
        ticket_id: ticket.id.to_string(),
        csrf: user.csrf_token(&csrf_purpose(ticket.id)),
    };
    Ok(pages::render(StatusCode::OK, &page))
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
    let ticket = db::tickets::find_by_id(&state.db, ticket_id)
        .await?
        .ok_or(WebError::LinkGone)?;
    if !user.is(&ticket.issuer, &ticket.subject) {
        return Ok(identity_mismatch(&state, &req, &user, &ticket).await);
    }
    match form.get("action") {
        Some("continue") => proceed(&state, &req, &user, &ticket).await,
        Some("cancel") => cancel(&state, &req, &user, &ticket).await,
        _ => Err(WebError::BadRequest("Choose Continue or Cancel.")),
    }
}

async fn proceed(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<HttpResponse, WebError> {
    if ticket.connection_id.is_some() {
        return super::approve::allow(state, req, user, ticket).await;
    }
    let provider = provider_of(state, ticket)?;
    let flow_state = secret::random_value();
    let (verifier, challenge) = secret::pkce_pair();
    let flow_id = Uuid::new_v4();
    let sealed = state.keys.seal(
        Purpose::PkceVerifier,
        flow_id.as_bytes(),
        verifier.as_bytes(),
    );
    // Redeem and record the flow together: a failure leaves the ticket usable.
    let mut tx = state.db.begin().await?;
    let redeemed = db::tickets::redeem(&mut *tx, ticket.id, &user.issuer, &user.subject).await?;
    let Some(ticket) = redeemed else {
        tracing::info!(ticket = %ticket.id, "connect ticket already used");
        return Err(WebError::LinkGone);
    };
    db::oauth_flows::insert(
        &mut *tx,
        NewFlow {
            id: flow_id,
            state_hash: &secret::sha256(&flow_state),
            kind: FlowKind::Connect,
            ticket_id: Some(ticket.id),
            session_id: Some(user.session_id),
            browser_binding: None,
            provider: Some(provider.name()),
            pkce_verifier: &sealed.bytes,
            nonce: None,
            key_id: &sealed.key_id,
            return_to: None,
            expires_at: Utc::now() + FLOW_TTL,
        },
    )
    .await?;
    db::web_sessions::clear_pending_ticket(&mut *tx, user.session_id, ticket.id).await?;
    tx.commit().await?;
    let scopes = requested_scopes(provider, &ticket);
    audit(
        state,
        req,
        AuditKind::ConsentGiven,
        Some((&user.issuer, &user.subject)),
        Some(provider.name()),
        json!({ "ticket_id": ticket.id, "client_id": ticket.client_id, "scopes": scopes }),
    )
    .await;
    let url = provider.authorize_url_for(&flow_state, &challenge, &scopes, ticket.add_account);
    Ok(see_other(url.as_str()))
}

async fn cancel(
    state: &AppState,
    req: &HttpRequest,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<HttpResponse, WebError> {
    if !db::tickets::decline(&state.db, ticket.id, &user.issuer, &user.subject).await? {
        return Err(WebError::LinkGone);
    }
    db::web_sessions::clear_pending_ticket(&state.db, user.session_id, ticket.id).await?;
    audit(
        state,
        req,
        AuditKind::ConsentCancelled,
        Some((&user.issuer, &user.subject)),
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
