//! Connect tickets: the one-time secret in a `/connect?ticket=…` link, made
//! for one person, one client and one provider. Only the SHA-256 of the
//! secret is stored.

use chrono::Utc;
use uuid::Uuid;

use super::ConnectionService;
use crate::{
    crypto::secret,
    db::{self, tickets::Ticket},
    providers::Provider,
};

/// Longer than any ticket this server issues; anything longer is refused
/// before it is hashed.
const MAX_TICKET_LEN: usize = 128;

/// A ticket just issued: its id and the secret for the link (never stored).
pub struct IssuedTicket {
    pub id: Uuid,
    pub secret: String,
}

/// The connect link for a ticket's secret.
pub fn connect_url(state: &ConnectionService, ticket: &str) -> String {
    format!("{}/connect?ticket={ticket}", state.base_url)
}

/// A ticket that can still be used now: not redeemed, not declined, not expired.
pub fn usable(ticket: &Ticket) -> bool {
    ticket.redeemed_at.is_none() && ticket.declined_at.is_none() && ticket.expires_at > Utc::now()
}

/// What the ticket asks of the provider: its own scopes, or the provider's
/// defaults when it names none.
pub fn requested_scopes(provider: &Provider, ticket: &Ticket) -> Vec<String> {
    if ticket.scopes.is_empty() {
        provider.default_scopes().to_vec()
    } else {
        ticket.scopes.clone()
    }
}

/// Mints a ticket and stores its hash (with its audit row, one statement).
pub async fn issue(
    state: &ConnectionService,
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

/// What a ticket's link is for.
pub(crate) enum TicketFor {
    Connect,
    /// Another account at the provider: the consent sends the browser to
    /// the provider's account chooser.
    AnotherAccount,
    /// Letting the ticket's client use this connection.
    Approval(Uuid),
}

/// A ticket for the approval page: may `client_id` use this connection?
pub async fn issue_approval(
    state: &ConnectionService,
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

/// Mints a ticket for `purpose` and stores its hash (with its audit row,
/// one statement).
pub(crate) async fn insert(
    state: &ConnectionService,
    issuer: &str,
    subject: &str,
    client_id: &str,
    provider: &str,
    scopes: &[String],
    purpose: TicketFor,
) -> anyhow::Result<IssuedTicket> {
    let secret = secret::random_value();
    let id = Uuid::new_v4();
    let ttl = chrono::Duration::from_std(state.settings.flow.ticket_ttl())?;
    let ticket_hash = secret::sha256(&secret);
    let insert = state.hot_db.run(async |conn| {
        db::tickets::insert(
            conn,
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
        .await
    });
    db::faults::deadline(state.settings.database.deadline(), insert).await?;
    state.metrics.flow.ticket_issued();
    Ok(IssuedTicket { id, secret })
}

/// The usable ticket whose secret a browser presented.
pub async fn find_usable(
    state: &ConnectionService,
    presented: &str,
) -> Result<Option<Ticket>, sqlx::Error> {
    if presented.len() > MAX_TICKET_LEN {
        return Ok(None);
    }
    db::tickets::find_usable_by_hash(&state.db, &secret::sha256(presented)).await
}
