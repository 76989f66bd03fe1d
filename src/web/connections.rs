//! `GET /connections`: the signed-in person's connected accounts (never a
//! token), with Disconnect and Reconnect, and the providers they can still
//! connect. Disconnect is destructive, so it asks first: a confirm page
//! (`GET /connections/{provider}/disconnect`) whose form revokes upstream
//! where possible and deletes (`ConnectionService::disconnect`), then comes
//! back here with a notice. Reconnect mints a ticket for the person
//! exactly as the MCP side does and goes through the same consent page — the
//! ticket id is put on the session directly, so the ticket itself never
//! appears in a URL.

use crate::domain::ProviderName;
use actix_web::{HttpRequest, HttpResponse, http::StatusCode, web};
use askama::Template;

use super::{
    forms, logout,
    pages::{self, WebError, see_other},
    session::{MaybeUser, SignedInUser},
};
use crate::{
    db::{self, connections::ConnectionStatus},
    state::AppState,
};

/// The client id written on tickets minted here (when no web client id is
/// configured, which cannot happen on a signed-in page, but stays total).
const WEB_CLIENT_FALLBACK: &str = "mcp-connect-web";

/// `?done=` after a disconnect: the list shows a notice for it.
const DONE_DISCONNECTED: &str = "disconnected";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(home))
        .route("/connections", web::get().to(list))
        .route(
            "/connections/{provider}/disconnect",
            web::get().to(confirm_disconnect),
        )
        .route(
            "/connections/{provider}/disconnect",
            web::post().to(disconnect),
        )
        .route(
            "/connections/{provider}/reconnect",
            web::post().to(reconnect),
        );
}

struct Row {
    id: String,
    label_csrf: String,
    name: String,
    display_name: String,
    account: String,
    /// All that is shown of an API key or Basic password ("…a1b2").
    key_hint: Option<String>,
    scopes: Vec<Scope>,
    status: String,
    status_text: &'static str,
    since: String,
    reconnect_csrf: String,
    /// The MCP clients allowed to use this connection.
    clients: Vec<super::client_access::ClientRow>,
    /// The MCP clients waiting to be allowed.
    pending: Vec<super::client_access::PendingRow>,
}

/// A granted scope: what it allows in plain words, and as the provider
/// spells it.
struct Scope {
    description: String,
    raw: String,
}

struct Available {
    name: String,
    display_name: String,
    csrf: String,
    /// Connected already: this adds another account there.
    another: bool,
    /// As many accounts there as this server allows (`another` then):
    /// no button, a line saying so.
    at_limit: Option<u32>,
}

#[derive(Template)]
#[template(path = "connections/disconnect.html")]
struct DisconnectPage {
    signed_in: Option<String>,
    /// The connection's id: one of several accounts at the provider.
    id: String,
    name: String,
    display_name: String,
    account: String,
    revocable: bool,
    csrf: String,
}

#[derive(Template)]
#[template(path = "connections.html")]
struct ConnectionsPage {
    signed_in: Option<String>,
    /// What the last action did, e.g. "GitHub disconnected.".
    notice: Option<String>,
    rows: Vec<Row>,
    available: Vec<Available>,
    logout_csrf: String,
}

fn purpose(action: &str, provider: &str) -> String {
    format!("{action}:{provider}")
}

/// A disconnect form's token names the account it was shown for: a form
/// cannot be made to remove another one.
fn disconnect_purpose(provider: &str, connection: uuid::Uuid) -> String {
    format!("disconnect:{provider}:{connection}")
}

async fn home() -> HttpResponse {
    see_other("/connections")
}

fn display_name(state: &AppState, name: &str) -> String {
    state
        .connect
        .provider(name)
        .map_or_else(|| name.to_owned(), |p| p.display_name().to_owned())
}

async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: MaybeUser,
) -> Result<HttpResponse, WebError> {
    let Some(user) = user.0 else {
        return Ok(see_other("/login?return_to=/connections"));
    };
    let query = forms::query(&req)?;
    let connections = state.connect.list(user.user()).await?;
    let notice = disconnect_notice(&state, &user, &query, &connections);
    // Together: each may wait for client metadata documents.
    let (clients, pending) = futures::join!(
        super::client_access::clients_by_connection(&state, &user),
        super::client_access::pending_by_connection(&state, &user),
    );
    let (mut clients, mut pending) = (clients?, pending?);
    let rows = connections
        .iter()
        .map(|c| {
            let provider = state.connect.provider(&c.provider);
            Row {
                id: c.id.to_string(),
                label_csrf: user.csrf_token(&super::connection_label::purpose(c.id)),
                name: c.provider.to_string(),
                display_name: display_name(&state, &c.provider),
                account: c.account_label.clone(),
                key_hint: c.credential_hint.clone(),
                scopes: c
                    .scopes
                    .iter()
                    .map(|raw| Scope {
                        description: provider
                            .map_or_else(|| raw.clone(), |p| p.describe_scope(raw)),
                        raw: raw.clone(),
                    })
                    .collect(),
                status: c.status.as_str().to_owned(),
                status_text: match c.status {
                    ConnectionStatus::Active => "Connected",
                    ConnectionStatus::NeedsReauth => "Needs reconnecting",
                    ConnectionStatus::Revoked => "Revoked",
                },
                since: c.created_at.format("%Y-%m-%d").to_string(),
                reconnect_csrf: user.csrf_token(&purpose("reconnect", &c.provider)),
                clients: clients.remove(&c.id).unwrap_or_default(),
                pending: pending.remove(&c.id).unwrap_or_default(),
            }
        })
        .collect();
    // Providers not connected yet first, then another account at those
    // that are.
    let names = state.connect.providers().names();
    let connected = |name: &str| connections.iter().any(|c| c.provider == name);
    // As the limit counts them: accounts read, not a connect under way.
    // (At an API-key provider another account's credentials are checked
    // when stored, and an account's own reconnect it: the form stays.)
    let limit = state.connect.accounts_per_provider();
    let at_limit = |name: &str| {
        if !state.connect.provider(name).is_some_and(|p| p.is_oauth()) {
            return None;
        }
        let accounts = connections
            .iter()
            .filter(|c| c.provider == name && !c.account_id.is_empty())
            .count();
        (accounts >= limit as usize).then_some(limit)
    };
    let (new, more): (Vec<&str>, Vec<&str>) = names.into_iter().partition(|n| !connected(n));
    let available = new
        .into_iter()
        .map(|n| (n, false))
        .chain(more.into_iter().map(|n| (n, true)))
        .map(|(name, another)| Available {
            name: name.to_owned(),
            display_name: display_name(&state, name),
            csrf: user.csrf_token(&purpose("reconnect", name)),
            another,
            at_limit: if another { at_limit(name) } else { None },
        })
        .collect();
    let page = ConnectionsPage {
        signed_in: Some(user.display_name.clone()),
        notice,
        rows,
        available,
        logout_csrf: user.csrf_token(logout::PURPOSE),
    };
    Ok(pages::render(StatusCode::OK, &page))
}

/// A provider name from the path: the shape settings allow, else refused
/// before it reaches a query or a CSRF purpose.
fn provider_name(raw: &str) -> Result<ProviderName, WebError> {
    ProviderName::parse(raw).map_err(|_| WebError::BadRequest("There is no such provider."))
}

/// The confirm page. Without such a connection (already gone, say, after
/// going back in history) there is nothing to confirm: back to the list.
async fn confirm_disconnect(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: MaybeUser,
    path: web::Path<String>,
) -> Result<HttpResponse, WebError> {
    let Some(user) = user.0 else {
        return Ok(see_other("/login?return_to=/connections"));
    };
    let provider = provider_name(&path)?;
    let connections = state.connect.list(user.user()).await?;
    let wanted = forms::query(&req)?
        .get("connection")
        .and_then(|c| uuid::Uuid::parse_str(c).ok());
    let Some(connection) = connections
        .into_iter()
        .find(|c| c.provider == provider && wanted.is_none_or(|id| id == c.id))
    else {
        return Ok(see_other("/connections"));
    };
    let page = DisconnectPage {
        signed_in: Some(user.display_name.clone()),
        id: connection.id.to_string(),
        name: provider.to_string(),
        display_name: display_name(&state, &provider),
        account: connection.account_label,
        revocable: state
            .connect
            .provider(&provider)
            .is_some_and(|p| p.supports_revocation()),
        csrf: user.csrf_token(&disconnect_purpose(&provider, connection.id)),
    };
    Ok(pages::render(StatusCode::OK, &page))
}

/// The notice after a disconnect, from the redirect's query: only what
/// this session's own disconnect said (the query carries a token for it,
/// as a form does), only for a configured provider named in the catalog's
/// words, and only while that is still true — a crafted link shows
/// nothing, and no text of its own.
fn disconnect_notice(
    state: &AppState,
    user: &SignedInUser,
    query: &forms::Params,
    connections: &[crate::db::connections::ConnectionSummary],
) -> Option<String> {
    if query.get("done") != Some(DONE_DISCONNECTED) {
        return None;
    }
    let provider = state.connect.provider(query.get("provider")?)?;
    let connection = query
        .get("connection")
        .and_then(|c| uuid::Uuid::parse_str(c).ok());
    let revoked = match query.get("revocation") {
        Some("failed") => Revoked::Failed,
        Some("retrying") => Revoked::Retrying,
        Some("pending") => Revoked::Pending,
        Some("shared") => Revoked::Shared,
        _ => Revoked::Told,
    };
    let purpose = notice_purpose(provider.name().as_str(), connection, revoked);
    if !user.csrf_matches(&purpose, query.get("csrf")) {
        return None;
    }
    let name = provider.display_name();
    let mut notice = if !connections
        .iter()
        .any(|c| c.provider == provider.name().as_str())
    {
        format!("{name} disconnected.")
    } else if connection.is_some_and(|id| !connections.iter().any(|c| c.id == id)) {
        format!("One of your {name} accounts was disconnected.")
    } else if revoked == Revoked::Pending {
        return Some(format!(
            "Disconnecting {name} is taking longer than usual, and goes on. Reload this \
             page in a minute or two: it says {name} was disconnected once it is done. If \
             the account is still listed then, disconnect it again."
        ));
    } else {
        return None;
    };
    if revoked == Revoked::Failed {
        notice.push_str(&format!(
            " {name} could not be told to revoke its access, which may still be live there: \
             remove this server's access in your account's settings at {name}."
        ));
    }
    if revoked == Revoked::Shared {
        notice.push_str(&format!(
            " Its access was not revoked at {name}: the same account is also connected \
             here (by another person using this server, or by you since), and revoking it \
             would end that connection too."
        ));
    }
    if revoked == Revoked::Retrying {
        let hours = state.settings.revocation.retry_hours;
        notice.push_str(&format!(
            " {name} could not be told to revoke its access yet, which may still be live there: \
             this server tries again for up to {hours} hours. To end it now, remove this \
             server's access in your account's settings at {name}."
        ));
    }
    Some(notice)
}

/// What the provider was told of a disconnect, as its notice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Revoked {
    /// Told, or it offers no revocation: nothing more to say.
    Told,
    /// It could not be told, and will not be: the access may still be
    /// live there.
    Failed,
    /// It could not be told yet: the access may still be live there, and
    /// the revocation is tried again.
    Retrying,
    /// The disconnect was still under way when the page answered.
    Pending,
    /// Not told on purpose: the same account is also connected here
    /// (someone else's, or the person's own since), whose connection
    /// revoking would end.
    Shared,
}

/// What a disconnect notice's token is for: every fact the notice shows.
fn notice_purpose(provider: &str, connection: Option<uuid::Uuid>, revoked: Revoked) -> String {
    let connection = connection.map_or_else(|| "-".to_owned(), |id| id.to_string());
    format!("notice:{DONE_DISCONNECTED}:{provider}:{connection}:{revoked:?}")
}

async fn disconnect(
    state: web::Data<AppState>,
    user: SignedInUser,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let provider = provider_name(&path)?;
    // Always the account the confirm page showed: without one the vault
    // would take the provider's first, which may not be the one meant.
    let connection = form
        .get("connection")
        .and_then(|c| uuid::Uuid::parse_str(c).ok())
        .ok_or(WebError::BadRequest(
            "The form does not say which account to disconnect. Go back to your connections and try again.",
        ))?;
    user.check_csrf(&disconnect_purpose(&provider, connection), &form)?;
    // Audited by the vault (it is shared with the MCP `disconnect` tool).
    // It runs to its end whatever becomes of this page; waiting for a
    // refresh under way elsewhere, it may outlast the page's time limit,
    // and the page then says so rather than failing. Half the limit: the
    // form was read and the session found before, within the same limit.
    let disconnecting = state
        .connect
        .disconnect_account(user.user(), &provider, Some(connection));
    let patience = state.settings.web.page_timeout() / 2;
    let outcome = match tokio::time::timeout(patience, disconnecting).await {
        Ok(revocation) => match revocation? {
            Some(crate::connect::vault::Revocation::Failed) => Revoked::Failed,
            Some(crate::connect::vault::Revocation::Retrying) => Revoked::Retrying,
            Some(crate::connect::vault::Revocation::Shared) => Revoked::Shared,
            _ => Revoked::Told,
        },
        Err(_) => Revoked::Pending,
    };
    let revoked = match outcome {
        Revoked::Told => "",
        Revoked::Failed => "&revocation=failed",
        Revoked::Retrying => "&revocation=retrying",
        Revoked::Pending => "&revocation=pending",
        Revoked::Shared => "&revocation=shared",
    };
    let token = user.csrf_token(&notice_purpose(
        provider.as_str(),
        Some(connection),
        outcome,
    ));
    Ok(see_other(&format!(
        "/connections?done={DONE_DISCONNECTED}&provider={provider}&connection={connection}{revoked}&csrf={token}"
    )))
}

async fn reconnect(
    state: web::Data<AppState>,
    user: SignedInUser,
    path: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let provider = provider_name(&path)?;
    user.check_csrf(&purpose("reconnect", &provider), &form)?;
    if state.connect.provider(&provider).is_none() {
        return Err(WebError::BadRequest("There is no such provider."));
    }
    let client_id = state
        .settings
        .auth
        .web_client_id
        .as_deref()
        .unwrap_or(WEB_CLIENT_FALLBACK);
    let another = form.get("another").is_some_and(|v| v == "1");
    // Another account at an OAuth provider is refused here, at the limit,
    // rather than after the provider's consent (and before a link is
    // counted).
    let oauth = state
        .connect
        .provider(provider.as_str())
        .is_some_and(|p| p.is_oauth());
    if another && oauth {
        let at_limit = state
            .connect
            .account_limit_reached(user.user(), &provider)
            .await
            .map_err(anyhow::Error::from)?;
        if let Some(at) = at_limit {
            let name = display_name(&state, provider.as_str());
            return Err(WebError::TooManyAccounts(at.message(&name)));
        }
    }
    // The same share of new links as a tool's connect answer takes.
    if let Err(wait) = state.connect.take_link(user.user()) {
        return Err(WebError::TooManyLinks(wait.as_secs()));
    }
    // "Add another account": the provider's account chooser, and a new
    // connection beside the others.
    let ticket = if another {
        state
            .connect
            .issue_another_account_ticket(user.user(), client_id, &provider)
            .await?
    } else {
        state
            .connect
            .issue_ticket(user.user(), client_id, &provider, &[])
            .await?
    };
    db::web_sessions::set_pending_ticket(&state.db, user.session_id, Some(ticket.id)).await?;
    Ok(see_other(&super::connect::consent_url(&user, ticket.id)))
}
