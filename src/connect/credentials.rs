//! Connecting an API-key or Basic provider on the connect page. What the
//! person typed is checked against the entry first (nothing is sent for a
//! value that does not match its pattern), then at the provider's identity
//! URL; only a credential the provider accepts is stored — sealed like
//! tokens, with the connection's parameters and a masked hint — in the
//! transaction that redeems the ticket, as Continue does for OAuth. There
//! is no flow row: nothing comes back from the provider later.

use crate::domain::UserRef;
use std::collections::BTreeMap;

use uuid::Uuid;

use super::{
    ConnectionService,
    flows::provider_of,
    tickets::requested_scopes,
    vault::{self, NewConnection},
};
use crate::{
    db::{self, params::Holder, tickets::Ticket},
    providers::{Account, FormProblem, ProviderError, TokenSet},
};

/// What became of a submitted credential.
pub enum CredentialOutcome {
    Connected {
        connection_id: Uuid,
        account: Account,
        /// The ticket as redeemed.
        ticket: Box<Ticket>,
    },
    /// Values refused before anything was sent.
    Invalid(Vec<FormProblem>),
    /// The provider refused the credential (HTTP 401 or 403); not stored.
    Refused { status: String },
    /// The provider could not check it (unreachable, another status, an
    /// unexpected answer); not stored.
    Unchecked(ProviderError),
    /// The ticket was no longer usable (used, declined, expired, or a
    /// concurrent submit won).
    TicketGone,
    /// The user had their share of checks for now; nothing was sent.
    TooManyChecks(std::time::Duration),
    /// A new account, and the user has `limit` at the provider already
    /// (`flow.accounts_per_provider`); not stored, the ticket still usable.
    TooManyAccounts { limit: u32 },
}

/// Credentials checked at providers per user and minute, in this
/// instance: a person retyping a key needs a few; more is someone using
/// this server to test keys (each check is a request to the provider, and
/// the page says whether it took).
pub const CHECKS_PER_MINUTE: u32 = 10;

/// The form as the page posted it: field values and parameter values by name.
pub struct SubmittedCredential<'a> {
    pub fields: &'a BTreeMap<String, String>,
    pub params: &'a BTreeMap<String, String>,
}

pub(super) async fn connect(
    state: &ConnectionService,
    ticket: &Ticket,
    user: UserRef<'_>,
    session_id: Uuid,
    submitted: SubmittedCredential<'_>,
) -> anyhow::Result<CredentialOutcome> {
    // Before anything is sent: a used or expired ticket checks nothing.
    if !ticket.usable() {
        return Ok(CredentialOutcome::TicketGone);
    }
    let provider = provider_of(state, ticket)?;
    if provider.is_oauth() {
        anyhow::bail!(
            "provider `{}` connects through OAuth, not with a credential",
            provider.name()
        );
    }
    let checked = match provider.check_credential_form(submitted.fields, submitted.params) {
        Ok(checked) => checked,
        Err(problems) => return Ok(CredentialOutcome::Invalid(problems)),
    };
    if let Err(wait) = state.credential_checks.take(user) {
        return Ok(CredentialOutcome::TooManyChecks(wait));
    }
    let account = match provider
        .verify_credential(&state.http, &checked.credential, &checked.params)
        .await
    {
        Ok(account) => account,
        Err(ProviderError::Denied(status)) => return Ok(CredentialOutcome::Refused { status }),
        Err(e) => return Ok(CredentialOutcome::Unchecked(e)),
    };
    let tokens = TokenSet {
        access_token: checked.credential.to_secret(),
        refresh_token: None,
        expires_in: None,
        received: std::time::Instant::now(),
        scopes: Some(Vec::new()),
        token_type: provider.credential_kind().to_owned(),
    };
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let Some(ticket) = db::tickets::redeem(&mut *tx, ticket.id, user).await? else {
        return Ok(CredentialOutcome::TicketGone);
    };
    let requested = requested_scopes(provider, &ticket);
    vault::adopt_unscoped(&mut tx, user, provider, &account, &checked.params).await?;
    let stored = vault::store_in(
        state,
        &mut tx,
        NewConnection {
            user,
            provider: provider.name(),
            account: &account,
            tokens: &tokens,
            requested_scopes: &requested,
            client_id: Some(&ticket.client_id),
        },
    )
    .await;
    let connection_id = match stored.map_err(anyhow::Error::downcast::<vault::TooManyAccounts>) {
        Ok(id) => id,
        // Rolled back with the ticket's redemption: it can be used again.
        Err(Ok(too_many)) => {
            return Ok(CredentialOutcome::TooManyAccounts {
                limit: too_many.limit,
            });
        }
        Err(Err(e)) => return Err(e),
    };
    db::params::set(&mut *tx, Holder::Connection, connection_id, &checked.params).await?;
    db::tickets::set_stored_connection(&mut *tx, ticket.id, connection_id).await?;
    let hint = provider.credential_hint(&checked.credential);
    db::connections::set_credential_hint(&mut *tx, connection_id, Some(&hint)).await?;
    db::web_sessions::clear_pending_ticket(&mut *tx, session_id, ticket.id).await?;
    tx.commit().await?;
    state.metrics.flow.connection_stored();
    Ok(CredentialOutcome::Connected {
        connection_id,
        account,
        ticket: Box::new(ticket),
    })
}
