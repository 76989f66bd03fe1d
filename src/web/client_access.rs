//! The clients allowed to use each connection, as the connections page
//! lists them, and "remove access" (`POST /connections/access/remove`,
//! CSRF-checked). Removing a client's access leaves the connection: the
//! client is asked again the next time it needs the account.
//!
//! The page also lists the clients waiting to be allowed — those that
//! cannot open the approval link themselves are told to come here — with
//! Allow and Deny (`POST /connections/access/answer`): the same answer as
//! the approval page's, for the signed-in person's own requests only.

use std::collections::HashMap;

use actix_web::{HttpRequest, HttpResponse, web};
use serde_json::json;
use uuid::Uuid;

use super::{
    forms,
    pages::{WebError, see_other},
    session::SignedInUser,
};
use crate::{
    connect::clients::ClientName,
    db::{self, audit::AuditKind},
    state::AppState,
};

pub const REMOVE_PATH: &str = "/connections/access/remove";
pub const ANSWER_PATH: &str = "/connections/access/answer";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(REMOVE_PATH, web::post().to(remove))
        .route(ANSWER_PATH, web::post().to(answer));
}

/// A client waiting to be allowed on one connection.
pub struct PendingRow {
    pub name: String,
    /// The client id, when a name is shown instead of it.
    pub id_hint: Option<String>,
    pub host: Option<String>,
    /// The approval ticket's id (not its secret: the form is the user's
    /// own, checked by session and CSRF).
    pub request: String,
    pub csrf: String,
}

/// `client_id` as `describe_all` named it (it named every id it was given).
fn named(names: &HashMap<String, ClientName>, client_id: &str) -> ClientName {
    names
        .get(client_id)
        .cloned()
        .unwrap_or_else(|| ClientName::bare(client_id))
}

fn answer_purpose(ticket_id: Uuid) -> String {
    format!("answer-access:{ticket_id}")
}

/// The clients waiting on each of the user's connections.
pub async fn pending_by_connection(
    state: &AppState,
    user: &SignedInUser,
) -> Result<HashMap<Uuid, Vec<PendingRow>>, WebError> {
    let found = state.connect.pending_approvals(user.user()).await?;
    let names = state
        .connect
        .client_names()
        .describe_all(
            found
                .iter()
                .filter(|t| t.connection_id.is_some())
                .map(|t| t.client_id.as_str()),
        )
        .await;
    let mut rows: HashMap<Uuid, Vec<PendingRow>> = HashMap::new();
    for t in found {
        let Some(connection_id) = t.connection_id else {
            continue;
        };
        let client = named(&names, &t.client_id);
        rows.entry(connection_id).or_default().push(PendingRow {
            name: client.shown().to_owned(),
            id_hint: client.name.is_some().then(|| client.id.clone()),
            host: client.host,
            request: t.id.to_string(),
            csrf: user.csrf_token(&answer_purpose(t.id)),
        });
    }
    Ok(rows)
}

/// Allow or Deny of a waiting client, as on the approval page: Allow
/// redeems the request and stores the grant (the client's next call goes
/// through), Deny declines it (the client is told so until the request
/// would have expired). Only the signed-in person's own requests: anyone
/// else's is gone as far as they can tell.
async fn answer(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: SignedInUser,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let incomplete =
        || WebError::BadRequest("The form is incomplete. Go back and reload the page.");
    let ticket_id = form
        .get("request")
        .and_then(|c| Uuid::parse_str(c).ok())
        .ok_or_else(incomplete)?;
    user.check_csrf(&answer_purpose(ticket_id), &form)?;
    let allow = match form.get("decision") {
        Some("allow") => true,
        Some("deny") => false,
        _ => return Err(incomplete()),
    };
    let ticket = state
        .connect
        .ticket(ticket_id)
        .await?
        .filter(|t| t.user() == user.user() && t.connection_id.is_some())
        .ok_or(WebError::LinkGone)?;
    use crate::connect::grants::Allowed;
    let kind = if allow {
        match state.connect.allow_client(user.user(), &ticket).await? {
            Allowed::Granted { created: true } => Some(AuditKind::GrantCreated),
            // Allowed through another of its requests first, or by this
            // person's first Allow (a double click): nothing new.
            Allowed::Granted { created: false } => None,
            Allowed::TicketGone if state.connect.was_allowed(&ticket).await? => None,
            Allowed::TicketGone | Allowed::ConnectionGone => return Err(WebError::LinkGone),
        }
    } else if state.connect.decline_ticket(ticket.id, user.user()).await? {
        Some(AuditKind::ConsentCancelled)
    } else if state.connect.was_declined(&ticket).await? {
        // Declined by this person's first Deny (a double click).
        None
    } else {
        return Err(WebError::LinkGone);
    };
    let Some(kind) = kind else {
        return Ok(see_other("/connections"));
    };
    let (ip, agent) = crate::web::client_info(&state, &req);
    db::audit::record_or_log(
        &state.db,
        state.settings.database.deadline(),
        db::audit::AuditEvent::new(kind)
            .user(user.user())
            .provider(&ticket.provider)
            .detail(json!({
                "ticket_id": ticket.id,
                "client_id": db::audit::client_id(&ticket.client_id),
                "connection_id": ticket.connection_id,
                "at": "connections",
            }))
            .client(ip.as_deref(), agent.as_deref()),
    )
    .await;
    Ok(see_other("/connections"))
}

/// One client allowed on one connection.
pub struct ClientRow {
    pub name: String,
    /// The client id, when a name is shown instead of it.
    pub id_hint: Option<String>,
    pub host: Option<String>,
    pub last_used: String,
    pub connection_id: String,
    pub client_id: String,
    pub csrf: String,
}

fn purpose(connection_id: Uuid, client_id: &str) -> String {
    format!("remove-access:{connection_id}:{client_id}")
}

/// The user's grants, by connection id, with the clients named.
pub async fn clients_by_connection(
    state: &AppState,
    user: &SignedInUser,
) -> Result<HashMap<Uuid, Vec<ClientRow>>, WebError> {
    let found = state.connect.client_grants(user.user()).await?;
    let names = state
        .connect
        .client_names()
        .describe_all(found.iter().map(|g| g.client_id.as_str()))
        .await;
    let mut rows: HashMap<Uuid, Vec<ClientRow>> = HashMap::new();
    for g in found {
        let client = named(&names, &g.client_id);
        rows.entry(g.connection_id).or_default().push(ClientRow {
            name: client.shown().to_owned(),
            id_hint: client.name.is_some().then(|| client.id.clone()),
            host: client.host,
            last_used: g.last_used_at.map_or_else(
                || "not used yet".to_owned(),
                |at| format!("last used {}", at.format("%Y-%m-%d %H:%M UTC")),
            ),
            connection_id: g.connection_id.to_string(),
            csrf: user.csrf_token(&purpose(g.connection_id, &g.client_id)),
            client_id: g.client_id,
        });
    }
    Ok(rows)
}

async fn remove(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: SignedInUser,
    payload: web::Payload,
) -> Result<HttpResponse, WebError> {
    let form = forms::form(payload, state.settings.body_read_timeout()).await?;
    let incomplete = WebError::BadRequest("The form is incomplete. Go back and reload the page.");
    let connection_id = form
        .get("connection")
        .and_then(|c| Uuid::parse_str(c).ok())
        .ok_or(incomplete)?;
    let client_id = form
        .get("client")
        .filter(|c| c.len() <= 1024)
        .ok_or(WebError::BadRequest(
            "The form is incomplete. Go back and reload the page.",
        ))?
        .to_owned();
    user.check_csrf(&purpose(connection_id, &client_id), &form)?;
    let removed = state
        .connect
        .remove_client_access(user.user(), connection_id, &client_id)
        .await?;
    if removed {
        let (ip, agent) = crate::web::client_info(&state, &req);
        db::audit::record_or_log(
            &state.db,
            state.settings.database.deadline(),
            db::audit::AuditEvent::new(AuditKind::GrantRemoved)
                .user(user.user())
                .detail(json!({
                    "connection_id": connection_id,
                    "client_id": db::audit::client_id(&client_id),
                }))
                .client(ip.as_deref(), agent.as_deref()),
        )
        .await;
    }
    Ok(see_other("/connections"))
}
