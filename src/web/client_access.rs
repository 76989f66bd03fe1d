//! The clients allowed to use each connection, as the connections page
//! lists them, and "remove access" (`POST /connections/access/remove`,
//! CSRF-checked). Removing a client's access leaves the connection: the
//! client is asked again the next time it needs the account.

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
    db::{self, audit::AuditKind},
    state::AppState,
};

pub const REMOVE_PATH: &str = "/connections/access/remove";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route(REMOVE_PATH, web::post().to(remove));
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
    let mut rows: HashMap<Uuid, Vec<ClientRow>> = HashMap::new();
    for g in found {
        let client = state.connect.client_names().describe(&g.client_id).await;
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
            db::audit::AuditEvent::new(AuditKind::GrantRemoved)
                .user(user.user())
                .detail(json!({ "connection_id": connection_id, "client_id": client_id }))
                .client(ip.as_deref(), agent.as_deref()),
        )
        .await;
    }
    Ok(see_other("/connections"))
}
