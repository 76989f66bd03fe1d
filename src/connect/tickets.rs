//! Issuing connect tickets: 256 random bits, base64url, stored as SHA-256
//! only, bound to the caller and the provider.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::Utc;
use rand::RngCore;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{db, startup::AppState};

/// A freshly issued ticket. `secret` goes into the URL and nowhere else.
pub struct IssuedTicket {
    pub id: Uuid,
    pub secret: String,
}

/// SHA-256 of a ticket as presented.
pub fn hash(ticket: &str) -> Vec<u8> {
    Sha256::digest(ticket.as_bytes()).to_vec()
}

/// The `/connect` URL for a ticket. It carries the ticket and nothing else.
pub fn connect_url(state: &AppState, ticket: &str) -> String {
    format!("{}/connect?ticket={ticket}", state.settings.base_url())
}

pub async fn issue(
    state: &AppState,
    issuer: &str,
    subject: &str,
    client_id: &str,
    provider: &str,
    scopes: &[String],
) -> anyhow::Result<IssuedTicket> {
    insert(
        state,
        issuer,
        subject,
        client_id,
        provider,
        scopes,
        TicketFor::Connect,
    )
    .await
}

/// A connect ticket for another account at the provider: the consent sends
/// the browser to the provider's account chooser.
pub async fn issue_another_account(
    state: &AppState,
    issuer: &str,
    subject: &str,
    client_id: &str,
    provider: &str,
    scopes: &[String],
) -> anyhow::Result<IssuedTicket> {
    insert(
        state,
        issuer,
        subject,
        client_id,
        provider,
        scopes,
        TicketFor::AnotherAccount,
    )
    .await
}

/// What a ticket's link is for.
enum TicketFor {
    Connect,
    AnotherAccount,
    /// Letting the ticket's client use this connection.
    Approval(Uuid),
}

/// A ticket for the approval page: may `client_id` use this connection?
pub async fn issue_approval(
    state: &AppState,
    issuer: &str,
    subject: &str,
    client_id: &str,
    provider: &str,
    connection_id: Uuid,
) -> anyhow::Result<IssuedTicket> {
    insert(
        state,
        issuer,
        subject,
        client_id,
        provider,
        &[],
        TicketFor::Approval(connection_id),
    )
    .await
}

async fn insert(
    state: &AppState,
    issuer: &str,
    subject: &str,
    client_id: &str,
    provider: &str,
    scopes: &[String],
    purpose: TicketFor,
) -> anyhow::Result<IssuedTicket> {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let secret = URL_SAFE_NO_PAD.encode(raw);
    let id = Uuid::new_v4();
    let ttl = chrono::Duration::from_std(state.settings.flow.ticket_ttl())?;
    let ticket_hash = hash(&secret);
    let insert = async {
        let mut conn = state.hot_db.acquire().await?;
        let inserted = db::tickets::insert(
            &mut *conn,
            db::tickets::NewTicket {
                id,
                ticket_hash: &ticket_hash,
                issuer,
                subject,
                client_id,
                provider,
                scopes,
                expires_at: Utc::now() + ttl,
                connection_id: match purpose {
                    TicketFor::Approval(id) => Some(id),
                    _ => None,
                },
                add_account: matches!(purpose, TicketFor::AnotherAccount),
            },
        )
        .await;
        conn.finish(&inserted);
        inserted
    };
    db::faults::deadline(state.settings.database.deadline(), insert).await?;
    state.metrics.flow.ticket_issued();
    Ok(IssuedTicket { id, secret })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256() {
        assert_eq!(hash("abc").len(), 32);
        assert_ne!(hash("abc"), hash("abd"));
    }
}
