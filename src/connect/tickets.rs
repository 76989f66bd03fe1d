//! Connect tickets: the one-time secret in a `/connect?ticket=…` link, made
//! for one person, one client and one provider. Only the SHA-256 of the
//! secret is stored. [`TicketSecret`] is the one way to make, read and hash
//! a ticket's secret.

use crate::domain::{ProviderName, UserRef};
use uuid::Uuid;

use super::ConnectionService;
use crate::{
    crypto::secret,
    db::{self, tickets::Ticket},
    providers::Provider,
};

/// A ticket's secret: 256 random bits, base64url. Made only by
/// [`TicketSecret::generate`]; one a browser presents becomes one only
/// through [`TicketSecret::parse`], which checks its shape before anything
/// is hashed or looked up; the database sees only [`TicketSecret::hash`].
#[derive(Clone, PartialEq, Eq)]
pub struct TicketSecret(String);

impl TicketSecret {
    pub fn generate() -> Self {
        Self(secret::random_value())
    }

    /// `None` for anything this server cannot have issued.
    pub fn parse(presented: &str) -> Option<Self> {
        secret::is_random_value(presented).then(|| Self(presented.to_owned()))
    }

    /// What is stored and looked up: SHA-256 of the secret.
    pub fn hash(&self) -> Vec<u8> {
        secret::sha256(&self.0)
    }

    /// The secret itself, for the link and the sealed round state only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TicketSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketSecret(…)")
    }
}

/// A ticket just issued: its id and the secret for the link (never stored).
pub struct IssuedTicket {
    pub id: Uuid,
    pub secret: TicketSecret,
}

/// The connect link for a ticket's secret.
pub fn connect_url(state: &ConnectionService, ticket: &TicketSecret) -> String {
    format!("{}/connect?ticket={}", state.base_url, ticket.expose())
}

/// What the ticket asks of the provider: the provider's defaults and the
/// ticket's own scopes.
pub fn requested_scopes(provider: &Provider, ticket: &Ticket) -> Vec<String> {
    with_defaults(provider, &ticket.scopes)
}

/// The provider's defaults, then each of `extra` they lack: what a request
/// (a tool's, a ticket's, a flow's) asks of the provider. A tool's `scopes`
/// are extra: asking for one more must not drop what a connection is built
/// on (Google's `openid email profile` that name the account, Microsoft's
/// `offline_access` that brings a refresh token).
pub fn with_defaults(provider: &Provider, extra: &[String]) -> Vec<String> {
    let mut scopes = provider.default_scopes().to_vec();
    for scope in extra {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
    scopes
}

/// Mints a ticket and stores its hash (with its audit row, one statement).
pub async fn issue(
    state: &ConnectionService,
    user: UserRef<'_>,
    client_id: &str,
    provider: &ProviderName,
    scopes: &[String],
) -> anyhow::Result<IssuedTicket> {
    insert(state, user, client_id, provider, scopes, TicketFor::Connect).await
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
/// `None`: the connection was deleted meanwhile.
pub async fn issue_approval(
    state: &ConnectionService,
    user: UserRef<'_>,
    client_id: &str,
    provider: &ProviderName,
    connection_id: Uuid,
) -> anyhow::Result<Option<IssuedTicket>> {
    let issued = insert(
        state,
        user,
        client_id,
        provider,
        &[],
        TicketFor::Approval(connection_id),
    )
    .await;
    match issued {
        Ok(ticket) => Ok(Some(ticket)),
        // Deleted since it was read (disconnected in another tab): no
        // ticket can name it.
        Err(e) if names_a_deleted_row(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `e` is a foreign key the statement named that is gone.
fn names_a_deleted_row(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<sqlx::Error>(),
        Some(sqlx::Error::Database(d)) if d.is_foreign_key_violation()
    )
}

/// Mints a ticket for `purpose` and stores its hash (with its audit row,
/// one statement).
pub(crate) async fn insert(
    state: &ConnectionService,
    user: UserRef<'_>,
    client_id: &str,
    provider: &ProviderName,
    scopes: &[String],
    purpose: TicketFor,
) -> anyhow::Result<IssuedTicket> {
    let secret = TicketSecret::generate();
    // Time-ordered: every ask inserts one, and a random key would put each
    // new entry of the primary key index on a page of its own — on a busy
    // table one Postgres has not written since its last checkpoint, so a
    // full-page image in the WAL per ask. The id grants nothing by itself
    // (the secret does), so its creation time is no secret either.
    let id = Uuid::now_v7();
    let ticket_hash = secret.hash();
    let insert = state.hot_db.run(async |conn| {
        db::tickets::insert(
            conn,
            db::tickets::NewTicket {
                id,
                ticket_hash: &ticket_hash,
                user,
                client_id,
                provider,
                scopes,
                ttl: state.settings.flow.ticket_ttl(),
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
    let Some(secret) = TicketSecret::parse(presented) else {
        return Ok(None);
    };
    db::tickets::find_usable_by_hash(&state.db, &secret.hash()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_secrets_of_the_issued_shape_are_read() {
        let issued = TicketSecret::generate();
        let presented = TicketSecret::parse(issued.expose()).expect("an issued secret parses");
        assert_eq!(presented.hash(), issued.hash());
        assert_ne!(TicketSecret::generate().hash(), issued.hash());
        for bad in [
            "",
            "short",
            &"a".repeat(44),
            &format!("{}=", &issued.expose()[..42]),
        ] {
            assert!(TicketSecret::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn debug_output_never_shows_the_secret() {
        let secret = TicketSecret::generate();
        assert!(!format!("{secret:?}").contains(secret.expose()));
    }
}
