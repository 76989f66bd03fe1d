//! Connection events for the operator's webhooks. Each is written to the
//! outbox inside the transaction of the change it reports — a change that
//! rolls back leaves no event, and a committed change always has one —
//! and only for the endpoints that want it (none configured: nothing is
//! written, not even a read). The `webhooks` module delivers them.
//!
//! An event names the user (issuer and subject), the provider, the
//! connection (id, the provider's account id and the label) and, for
//! grants, the MCP client; never a token or any other credential.

use chrono::{SecondsFormat, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::ConnectionService;
use crate::{
    config::WebhookEvent,
    db::{self, connections::ConnectionRef},
};

/// What an event says beyond its connection.
#[derive(Debug, Clone, Copy)]
pub(super) enum Detail<'a> {
    None,
    /// `connection.created`: the account was connected before (reconnected
    /// after it needed the user, or connected again).
    Reconnected(bool),
    /// Grant events: the MCP client.
    Client(&'a str),
    /// `connection.reauth_required` and `connection.refresh_failed`: why.
    Reason(&'static str),
}

/// Writes `event` about connection `connection_id` for every endpoint that
/// wants it, in `exec`'s transaction. The connection must still exist
/// there (a deletion is recorded before its row goes).
pub(super) async fn record(
    state: &ConnectionService,
    exec: &mut sqlx::PgConnection,
    event: WebhookEvent,
    connection_id: Uuid,
    detail: Detail<'_>,
) -> Result<(), sqlx::Error> {
    let endpoints = state.settings.webhooks.endpoints_for(event);
    if endpoints.is_empty() {
        return Ok(());
    }
    let Some(connection) = db::connections::find_ref(&mut *exec, connection_id).await? else {
        return Ok(());
    };
    db::event_outbox::insert(
        &mut *exec,
        Uuid::new_v4(),
        &endpoints,
        event.as_str(),
        &payload(event, &connection, detail),
    )
    .await
}

/// [`record`] for many connections at once, as they are in `exec`'s
/// transaction (after the change the events report), in one statement.
pub(super) async fn record_many(
    state: &ConnectionService,
    exec: &mut sqlx::PgConnection,
    event: WebhookEvent,
    connections: &[ConnectionRef],
    detail: Detail<'_>,
) -> Result<(), sqlx::Error> {
    let endpoints = state.settings.webhooks.endpoints_for(event);
    if endpoints.is_empty() || connections.is_empty() {
        return Ok(());
    }
    let events: Vec<(Uuid, Value)> = connections
        .iter()
        .map(|c| (Uuid::new_v4(), payload(event, c, detail)))
        .collect();
    db::event_outbox::insert_many(&mut *exec, &endpoints, event.as_str(), &events).await
}

/// The Standard Webhooks payload: `type`, `timestamp`, `data`.
fn payload(event: WebhookEvent, c: &ConnectionRef, detail: Detail<'_>) -> Value {
    let mut data = json!({
        "connection_id": c.id,
        "issuer": c.issuer,
        "subject": c.subject,
        "provider": c.provider,
        "account_id": c.account_id,
        "account_label": c.account_label,
    });
    match detail {
        Detail::None => {}
        Detail::Reconnected(again) => data["reconnected"] = json!(again),
        Detail::Client(client_id) => data["client_id"] = json!(client_id),
        Detail::Reason(reason) => data["reason"] = json!(reason),
    }
    json!({
        "type": event.as_str(),
        "timestamp": Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true),
        "data": data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::connections::ConnectionStatus;
    use crate::domain::ProviderName;

    #[test]
    fn the_payload_names_the_user_provider_and_connection() {
        let c = ConnectionRef {
            id: Uuid::nil(),
            issuer: "https://idp.example.com/".into(),
            subject: "alice".into(),
            provider: ProviderName::parse("github").unwrap(),
            account_id: "583231".into(),
            account_label: "octocat".into(),
            status: ConnectionStatus::Active,
        };
        let p = payload(WebhookEvent::GrantCreated, &c, Detail::Client("claude"));
        assert_eq!(p["type"], "grant.created");
        assert_eq!(p["data"]["subject"], "alice");
        assert_eq!(p["data"]["account_label"], "octocat");
        assert_eq!(p["data"]["client_id"], "claude");
        assert_eq!(
            p["data"]["connection_id"],
            "00000000-0000-0000-0000-000000000000"
        );
        let at = p["timestamp"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(at).is_ok(), "{at}");
        assert!(at.ends_with('Z'), "{at}");
    }
}
