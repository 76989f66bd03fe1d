//! Storing a connection: its tokens sealed, its webhook event, the
//! connecting client's grant and the announcement to every instance, in
//! one transaction.

use secrecy::SecretString;
use uuid::Uuid;

use super::seal::{Kind, context, seal_bound};
use crate::{
    config::WebhookEvent,
    connect::{
        ConnectionService, events,
        outbox::{self, Detail},
    },
    crypto::{Purpose, Sealed},
    db::{
        self,
        connections::{ConnectionRow, ConnectionStatus, StoredTokens},
    },
    domain::{ProviderName, UserRef},
    providers::{Account, Provider, TokenSet},
};

pub struct NewConnection<'a> {
    pub user: UserRef<'a>,
    pub provider: &'a ProviderName,
    pub account: &'a Account,
    pub tokens: &'a TokenSet,
    pub requested_scopes: &'a [String],
    /// The MCP client that started the connect flow: the user's consent
    /// there grants it the use of this connection.
    pub client_id: Option<&'a str>,
}

/// A new account was not stored: the user has `limit` accounts at the
/// provider already (`flow.accounts_per_provider`), so that nobody can
/// grow the table without bound. Reconnecting one of them is allowed.
#[derive(Debug, thiserror::Error)]
#[error("the user has {limit} accounts at this provider already, the most allowed")]
pub struct TooManyAccounts {
    pub limit: u32,
}

/// How long the access token lives, from when the provider's answer came.
/// Its expiry is written by the statement that stores it, by the
/// database's clock ([`db::connections::Lifetime`]): every instance judges it by that
/// clock, whatever its own says. A provider's `expires_in` is untrusted:
/// anything beyond a year counts as "not said".
pub(super) fn lifetime(tokens: &TokenSet) -> Option<db::connections::Lifetime> {
    const YEAR: std::time::Duration = std::time::Duration::from_secs(366 * 24 * 3600);
    tokens
        .expires_in
        .filter(|d| *d <= YEAR)
        .map(|said| db::connections::Lifetime {
            said,
            since: tokens.received,
        })
}

/// Stores (or replaces) the user's connection to a provider and announces
/// it to every instance.
pub async fn store_connection(
    state: &ConnectionService,
    c: NewConnection<'_>,
) -> anyhow::Result<Uuid> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let id = store_in(state, &mut tx, c).await?;
    tx.commit().await?;
    state.metrics.flow.connection_stored();
    Ok(id)
}

/// [`store_connection`] inside the caller's transaction (the caller
/// commits, then counts it with `connection_stored`): the connection, its
/// webhook event, the connecting client's grant and the announcement all
/// happen or none does.
pub(in crate::connect) async fn store_in(
    state: &ConnectionService,
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    c: NewConnection<'_>,
) -> anyhow::Result<Uuid> {
    let id = db::connections::claim_id(tx, c.user, c.provider, &c.account.id).await?;
    // Locked by the claim until the transaction ends.
    let previous = db::connections::find_for_update(&mut **tx, id).await?;
    // A fresh claim is `revoked` until stored: anything else was connected before.
    let reconnected = previous
        .as_ref()
        .is_some_and(|r| r.status != ConnectionStatus::Revoked);
    if !reconnected {
        // Two new accounts stored at once: the second counts the first.
        db::connections::lock_labels(&mut **tx, c.user, id).await?;
        let limit = state.settings.flow.accounts_per_provider;
        let others = db::connections::count_other_accounts(tx, c.user, c.provider, id).await?;
        if others >= i64::from(limit) {
            return Err(TooManyAccounts { limit }.into());
        }
    }
    let seal =
        |secret: &SecretString, kind| seal_bound(state, (id, c.user, c.provider), kind, secret);
    let access = seal(&c.tokens.access_token, Kind::Access)?;
    let refresh = match &c.tokens.refresh_token {
        Some(r) => Some(seal(r, Kind::Refresh)?),
        None => previous
            .as_ref()
            .and_then(|row| kept_refresh_token(state, row)),
    };
    let scopes = c
        .tokens
        .scopes
        .clone()
        .unwrap_or_else(|| c.requested_scopes.to_vec());
    db::connections::store(
        &mut **tx,
        id,
        StoredTokens {
            account_id: &c.account.id,
            account_label: &c.account.label,
            scopes: &scopes,
            access_token: &access.bytes,
            refresh_token: refresh.as_ref().map(|r| r.bytes.as_slice()),
            key_id: &access.key_id,
            expires_in: lifetime(c.tokens),
        },
    )
    .await?;
    outbox::record(
        state,
        tx,
        WebhookEvent::ConnectionCreated,
        id,
        Detail::Reconnected(reconnected),
    )
    .await?;
    // The client that connected a new account may use it. An account
    // connected here already is not granted that way: the person chose it
    // at the provider (its chooser, or whoever was signed in there), not
    // on a page naming it, and may have removed this client's access to
    // it. Such a client's retry asks for approval, naming the account.
    if let Some(client_id) = c.client_id
        && !reconnected
    {
        crate::connect::grants::grant_connecting_client(state, tx, id, client_id).await?;
    }
    events::notify(&mut **tx, &state.keys, c.user, c.provider).await?;
    Ok(id)
}

/// A reconnect the provider answered without a refresh token (a consent it
/// had already given: Google without `prompt=consent`, Salesforce, many
/// others) leaves the one stored valid, so it is kept — re-sealed, as the
/// new access token is sealed by the current key and a row has one key id.
/// Not kept when the provider had already refused it (`needs_reauth`), nor
/// when it no longer opens (sealed by a key this ring lacks).
fn kept_refresh_token(state: &ConnectionService, row: &ConnectionRow) -> Option<Sealed> {
    if row.status != ConnectionStatus::Active {
        return None;
    }
    let sealed = Sealed {
        key_id: row.key_id.clone(),
        bytes: row.refresh_token.clone()?,
    };
    let ctx = context(row.id, row.user(), &row.provider, Kind::Refresh);
    match state.keys.reseal(Purpose::Token, &ctx, &sealed) {
        Ok(resealed) => Some(resealed),
        Err(e) => {
            tracing::warn!(
                connection = %row.id,
                key_id = %row.key_id,
                "the stored refresh token does not open ({e}); the reconnect stores none"
            );
            None
        }
    }
}

/// A connection stored by a version whose account ids did not carry their
/// scope (`42` where it now is `42@https://git.example.org`) is this
/// account when its parameters match: renamed, so connecting it again
/// updates it instead of adding a second connection beside it.
pub(in crate::connect) async fn adopt_unscoped(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    user: UserRef<'_>,
    provider: &Provider,
    account: &Account,
    params: &db::params::Params,
) -> Result<(), sqlx::Error> {
    let Some(suffix) = provider.account_id_suffix(params) else {
        return Ok(());
    };
    let Some(unscoped) = account.id.strip_suffix(&suffix) else {
        return Ok(());
    };
    let scope: db::params::Params = provider
        .account_scope_values(params)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    if db::connections::adopt_unscoped(tx, user, provider.name(), unscoped, &account.id, &scope)
        .await?
    {
        tracing::info!(provider = %provider.name(), "a connection stored before account ids carried their site was renamed");
    }
    Ok(())
}
