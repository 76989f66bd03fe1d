//! `GET /connect/consent` shows what is asked — this server, the provider,
//! the scopes in plain words, the MCP client, and the parameters the entry
//! asks (a Microsoft tenant, a Zendesk subdomain) — with Continue and
//! Cancel. `POST /connect` acts on the answer: Continue checks the
//! parameters (a value the entry refuses shows the page again, and nothing
//! leaves this server), redeems the ticket (one atomic UPDATE, so of any
//! number of concurrent posts exactly one goes on), records the OAuth flow
//! with the parameters, bound to this session, and sends the browser to
//! the provider; Cancel declines the ticket.
//!
//! The form names the ticket it was shown for, and its CSRF token is bound
//! to that ticket id, so a page open in another tab cannot confirm a
//! different request than the one it displays.

use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;
use serde_json::json;
use uuid::Uuid;

use super::{
    AskedBy, audit, connections_link,
    credential::{Input, param_inputs, posted_params, whole_form_problems},
    identity_mismatch,
};
use crate::{
    db::{self, audit::AuditKind, tickets::Ticket},
    providers::FormProblem,
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
    /// The parameters the entry asks.
    inputs: Vec<Input>,
    /// What went wrong with the parameters as a whole.
    problems: Vec<String>,
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
    // The ticket this tab's address names, else the one this session
    // opened last (after signing in, which comes back to the plain path).
    let id = match forms::query(&req)?.get("t") {
        // An address that names a ticket shows that one or none: a tag
        // that is not this session's (another browser's, or from before a
        // new sign-in) does not fall back to another link.
        Some(_) => {
            Some(super::ticket_in_address(&user, &forms::query(&req)?).ok_or(WebError::LinkGone)?)
        }
        None => user.pending_ticket_id,
    };
    let ticket = match id {
        Some(id) => state.connect.ticket(id).await?,
        None => None,
    };
    let ticket = ticket.filter(Ticket::usable).ok_or(WebError::LinkGone)?;
    if !user.is(ticket.user()) {
        // Recorded where the ticket became this session's (the link, or
        // the sign-in that came back to it), not at every reload here.
        return Ok(identity_mismatch(&state, &req, &user, &ticket, false).await);
    }
    still_offered(&state, &ticket)?;
    if ticket.connection_id.is_some() {
        return super::approve::show(&state, &user, &ticket).await;
    }
    let (provider, _) = state.connect.ticket_provider(&ticket)?;
    if !provider.is_oauth() {
        let context = credential_context(&state, &ticket, provider);
        return Ok(super::credential::show(&user, &ticket, context));
    }
    below_account_limit(&state, &user, &ticket).await?;
    // Connecting the same account again (a lost grant, more scopes): its
    // own values, not the defaults; another account starts afresh.
    let known = match ticket.add_account {
        true => None,
        false => db::connections::find_account(&state.db, user.user(), provider.name(), None)
            .await
            .map_err(anyhow::Error::from)?,
    };
    let known = known.map(|row| row.params.0).unwrap_or_default();
    let empty = forms::Params::default();
    render(
        &state,
        &user,
        &ticket,
        (&empty, &known),
        &[],
        StatusCode::OK,
    )
}

/// The consent page, with the parameters as posted (else as `known`, else
/// their defaults) and what was wrong with them.
fn render(
    state: &AppState,
    user: &SignedInUser,
    ticket: &Ticket,
    (form, known): (&forms::Params, &db::params::Params),
    problems: &[FormProblem],
    status: StatusCode,
) -> Result<HttpResponse, WebError> {
    let (provider, scopes) = state.connect.ticket_provider(ticket)?;
    let page = ConsentPage {
        signed_in: Some(user.display_name.clone()),
        host: host(state),
        provider: provider.display_name().to_owned(),
        scopes: scopes.iter().map(|s| provider.describe_scope(s)).collect(),
        inputs: param_inputs(provider, form, known, problems),
        problems: whole_form_problems(problems),
        client_id: asking_client(state, ticket),
        ticket_id: ticket.id.to_string(),
        csrf: user.csrf_token(&csrf_purpose(ticket.id)),
    };
    Ok(pages::render(status, &page))
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
    (AskedBy::of_ticket(state, ticket) == AskedBy::Client).then(|| ticket.client_id.clone())
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
        return Ok(identity_mismatch(&state, &req, &user, &ticket, true).await);
    }
    still_offered(&state, &ticket)?;
    match form.get("action") {
        Some("continue") => proceed(&state, &req, &user, &ticket, &form).await,
        Some("cancel") => cancel(&state, &req, &user, &ticket).await,
        _ => Err(WebError::BadRequest("Choose Continue or Cancel.")),
    }
}

/// A link for another account at an OAuth provider, opened (or
/// continued) by a person who has as many accounts there as this server
/// allows: refused before the provider is asked, rather than after its
/// consent with the grant to revoke. Cancel still works.
async fn below_account_limit(
    state: &AppState,
    user: &SignedInUser,
    ticket: &Ticket,
) -> Result<(), WebError> {
    if !ticket.add_account {
        return Ok(());
    }
    let limit = state
        .connect
        .account_limit_reached(user.user(), &ticket.provider)
        .await
        .map_err(anyhow::Error::from)?;
    match limit {
        None => Ok(()),
        Some(at) => {
            let (provider, _) = state.connect.ticket_provider(ticket)?;
            Err(WebError::TooManyAccounts(
                at.message(provider.display_name()),
            ))
        }
    }
}

/// A ticket for a provider the operator has removed since it was made
/// cannot be used: said so, not an internal error.
fn still_offered(state: &AppState, ticket: &Ticket) -> Result<(), WebError> {
    if state.connect.provider(ticket.provider.as_str()).is_some() {
        return Ok(());
    }
    tracing::info!(provider = %ticket.provider, "connect link for a provider no longer configured");
    Err(WebError::ProviderGone)
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
    below_account_limit(state, user, ticket).await?;
    // Checked before the ticket is spent or anything is sent: a value the
    // entry refuses gets the page again, saying why.
    let params = match provider.check_connect_params(&posted_params(form)) {
        Ok(params) => params,
        Err(problems) => {
            tracing::info!(
                provider = %provider.name(),
                "connect parameters refused"
            );
            return render(
                state,
                user,
                ticket,
                (form, &Default::default()),
                &problems,
                StatusCode::UNPROCESSABLE_ENTITY,
            );
        }
    };
    let started = state
        .connect
        .start_flow(ticket, user.user(), user.session_id, &params)
        .await?;
    let Some(started) = started else {
        // Used already: by this very session's first Continue (a double
        // click), which goes on where it is, or by someone else.
        if let Some(again) = state
            .connect
            .resume_flow(ticket, user.session_id, &params)
            .await?
        {
            tracing::info!(ticket = %ticket.id, "connect continued again; the flow goes on under a new state");
            return Ok(see_other(again.authorize_url.as_str()));
        }
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
        // The parameters name a tenant or a host, never a secret: kept so an
        // operator can tell where a connection points.
        json!({ "ticket_id": ticket.id, "client_id": db::audit::client_id(&ticket.client_id), "scopes": started.scopes,
                "params": params }),
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
    // Declined by this person's first Cancel (a double click): said again.
    if !declined && !state.connect.was_declined(ticket).await? {
        return Err(WebError::LinkGone);
    }
    // Recorded before anything else can fail: a second Cancel after a
    // failure finds the ticket declined already, and would record nothing.
    if declined {
        // Deny on the approval page refuses a client the account, not a
        // connect: the row says which, and which connection.
        let (id, client) = (ticket.id, db::audit::client_id(&ticket.client_id));
        let detail = match ticket.connection_id {
            Some(connection) => json!({ "ticket_id": id, "client_id": client,
                                        "at": "approval", "connection_id": connection }),
            None => json!({ "ticket_id": id, "client_id": client, "at": "consent" }),
        };
        let provider = Some(ticket.provider.as_str());
        let kind = AuditKind::ConsentCancelled;
        audit(state, req, kind, Some(user.user()), provider, detail).await;
    }
    db::web_sessions::clear_pending_ticket(&state.db, user.session_id, ticket.id).await?;
    let (lines, link) = match AskedBy::of_ticket(state, ticket) {
        AskedBy::Client => (
            vec![if ticket.connection_id.is_some() {
                "You can close this tab; your MCP client will be told that you did not allow it."
                    .into()
            } else {
                "You can close this tab; your MCP client will be told that you declined.".into()
            }],
            None,
        ),
        AskedBy::ConnectionsPage => (vec!["Nothing was connected.".into()], connections_link()),
    };
    Ok(pages::render(
        StatusCode::OK,
        &Notice {
            signed_in: Some(user.display_name.clone()),
            title: "Cancelled".into(),
            lines,
            link,
            ..Notice::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use askama::Template;

    use super::ConsentPage;

    fn page(scopes: &[&str]) -> String {
        ConsentPage {
            signed_in: None,
            host: "connect.example".into(),
            provider: "Notion".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            inputs: Vec::new(),
            problems: Vec::new(),
            client_id: Some("a-client".into()),
            ticket_id: "t".into(),
            csrf: "c".into(),
        }
        .render()
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// An entry that asks for no scopes (Notion, Box, Calendly) promises no
    /// list it then leaves empty.
    #[test]
    fn a_consent_without_scopes_says_what_decides_instead_of_an_empty_list() {
        let none = page(&[]);
        assert!(!none.contains("It will be able to:"), "{none}");
        assert!(!none.contains("<ul class=\"scopes\">"), "{none}");
        assert!(none.contains("no particular permissions"), "{none}");
        let some = page(&["Read your pages"]);
        assert!(some.contains("It will be able to:"), "{some}");
        assert!(some.contains("<li>Read your pages</li>"), "{some}");
    }
}
