//! The browser half of connecting: starting the provider's authorization
//! once the person said Continue (the ticket redeemed and the flow recorded
//! with the connection's parameters in one transaction), and finishing it
//! when the provider sends the browser back (with the PKCE verifier its
//! caller opened, the code exchanged at the endpoint the parameters make, the values consent
//! tells learned and checked, the account read and the connection stored
//! with all of its parameters).

use crate::domain::UserRef;
use secrecy::ExposeSecret;
use uuid::Uuid;

use super::{
    ConnectionService,
    tickets::{requested_scopes, with_defaults},
    vault::{self, NewConnection, UnusedAccess},
};
use crate::{
    crypto::{Purpose, Sealed, secret},
    db::{
        self,
        oauth_flows::{FlowKind, NewFlow, OAuthFlow},
        params::{Holder, Params},
        tickets::Ticket,
    },
    providers::{Account, Learned, PkcePair, Provider, ProviderError, TokenSet},
};

/// A connect flow's `return_to` when the person asked for it on their
/// connections page rather than an MCP client.
pub const CONNECTIONS_PAGE: &str = "/connections";

/// How long a started connect flow waits for the provider's callback.
const FLOW_TTL: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// A connect flow under way: where to send the browser.
pub struct StartedFlow {
    /// The ticket as redeemed.
    pub ticket: Ticket,
    /// The scopes asked of the provider.
    pub scopes: Vec<String>,
    pub authorize_url: url::Url,
}

/// Why finishing a flow failed.
#[derive(Debug, thiserror::Error)]
pub enum FinishError {
    /// The provider refused the code or did not answer as expected.
    #[error("{0:#}")]
    Upstream(anyhow::Error),
    /// A value the provider told after consent (an org host, a site id) was
    /// refused; `access` says what became of the tokens.
    #[error("{provider} named a {label} this server does not accept (access: {access:?})")]
    Unaccepted {
        provider: String,
        label: String,
        access: UnusedAccess,
    },
    /// The browser's sign-in ended (signed out elsewhere, or the person
    /// was removed) while the connection was being stored: nothing was.
    #[error("the sign-in ended while the connection was being stored; nothing was stored")]
    SignInEnded,
    /// The account is a new one and the person has as many at the
    /// provider as allowed: not stored; `access` says what became of the
    /// tokens.
    #[error("{provider}: the most accounts allowed ({limit}) are connected (access: {access:?})")]
    TooManyAccounts {
        provider: String,
        limit: u32,
        access: UnusedAccess,
    },
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The provider a ticket names; a ticket for a provider no longer
/// configured is an internal error, not the person's.
pub(super) fn provider_of<'s>(
    state: &'s ConnectionService,
    ticket: &Ticket,
) -> anyhow::Result<&'s Provider> {
    state.providers.get(&ticket.provider).ok_or_else(|| {
        anyhow::anyhow!(
            "ticket {} names provider `{}`, which is not configured",
            ticket.id,
            ticket.provider
        )
    })
}

/// Redeems the ticket for this person and records the flow bound to their
/// browser session, together: a failure leaves the ticket usable. `None`
/// when the ticket was no longer usable (a concurrent Continue won).
pub(super) async fn start(
    state: &ConnectionService,
    ticket: &Ticket,
    user: UserRef<'_>,
    session_id: Uuid,
    params: &Params,
) -> anyhow::Result<Option<StartedFlow>> {
    let provider = provider_of(state, ticket)?;
    if !provider.is_oauth() {
        anyhow::bail!(
            "provider `{}` takes its credential on the connect page, not through OAuth",
            provider.name()
        );
    }
    let flow_state = secret::random_value();
    let pkce = PkcePair::generate();
    let scopes = requested_scopes(provider, ticket);
    // Built before anything is written: parameters the entry refuses
    // leave the ticket as it was.
    let choose_account = shows_account_chooser(state, ticket).await?;
    let authorize_url = provider
        .authorize_url_for(
            &flow_state,
            &pkce.challenge,
            &scopes,
            choose_account,
            params,
        )?
        .ok_or_else(|| anyhow::anyhow!("provider `{}` has no authorize URL", provider.name()))?;
    let flow_id = Uuid::new_v4();
    let sealed = state.keys.seal(
        Purpose::PkceVerifier,
        flow_id.as_bytes(),
        pkce.verifier.expose_secret().as_bytes(),
    )?;
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    let redeemed = db::tickets::redeem(&mut *tx, ticket.id, user).await?;
    let Some(ticket) = redeemed else {
        return Ok(None);
    };
    db::oauth_flows::insert(
        &mut *tx,
        NewFlow {
            id: flow_id,
            state_hash: &secret::sha256(&flow_state),
            kind: FlowKind::Connect,
            ticket_id: Some(ticket.id),
            session_id: Some(session_id),
            browser_binding: None,
            provider: Some(provider.name()),
            pkce_verifier: &sealed.bytes,
            nonce: None,
            key_id: &sealed.key_id,
            return_to: state
                .asked_on_connections_page(&ticket)
                .then_some(CONNECTIONS_PAGE),
            ttl: FLOW_TTL,
        },
    )
    .await?;
    db::params::set(&mut *tx, Holder::Flow, flow_id, params).await?;
    db::web_sessions::clear_pending_ticket(&mut *tx, session_id, ticket.id).await?;
    tx.commit().await?;
    Ok(Some(StartedFlow {
        ticket,
        scopes,
        authorize_url,
    }))
}

/// A second Continue for a ticket this browser session already went on
/// with (a double click, whose first redirect the browser dropped; Back
/// and Continue again), with the parameters it went on with: the same
/// flow under a new `state` and a new PKCE verifier — the first
/// redirect's `state` neither finds nor completes it from now — sent to
/// the provider again with the same scopes. `None` when this session has
/// no such flow (another browser's Continue, or it finished or expired),
/// or the parameters differ (the person changed them: not this flow).
pub(super) async fn resume(
    state: &ConnectionService,
    ticket: &Ticket,
    session_id: Uuid,
    params: &Params,
) -> anyhow::Result<Option<StartedFlow>> {
    let provider = provider_of(state, ticket)?;
    let Some(flow) =
        db::oauth_flows::find_open_for_ticket(&state.db, ticket.id, session_id).await?
    else {
        return Ok(None);
    };
    let stored = db::params::get(&state.db, Holder::Flow, flow.id)
        .await?
        .unwrap_or_default();
    if &stored != params {
        return Ok(None);
    }
    let pkce = PkcePair::generate();
    let sealed = state.keys.seal(
        Purpose::PkceVerifier,
        flow.id.as_bytes(),
        pkce.verifier.expose_secret().as_bytes(),
    )?;
    let scopes = requested_scopes(provider, ticket);
    let flow_state = secret::random_value();
    let choose_account = shows_account_chooser(state, ticket).await?;
    let authorize_url = provider
        .authorize_url_for(
            &flow_state,
            &pkce.challenge,
            &scopes,
            choose_account,
            params,
        )?
        .ok_or_else(|| anyhow::anyhow!("provider `{}` has no authorize URL", provider.name()))?;
    let restated = db::oauth_flows::restate(
        &state.db,
        flow.id,
        &secret::sha256(&flow_state),
        &sealed.bytes,
        &sealed.key_id,
    )
    .await?;
    if !restated {
        return Ok(None);
    }
    Ok(Some(StartedFlow {
        ticket: ticket.clone(),
        scopes,
        authorize_url,
    }))
}

/// Whether the provider is asked to show its account chooser: for another
/// account, and for a reconnect by someone with several accounts there —
/// not the account signed in there, which may be another of them (and at
/// the limit of accounts the chooser is the only way to reach the rest).
async fn shows_account_chooser(
    state: &ConnectionService,
    ticket: &Ticket,
) -> Result<bool, sqlx::Error> {
    if ticket.add_account {
        return Ok(true);
    }
    let accounts = db::connections::accounts(&state.db, ticket.user(), &ticket.provider);
    Ok(accounts.await?.len() > 1)
}

/// Opens the PKCE verifier sealed on a flow row. It does not open once the
/// key that sealed it has left the ring (retired sooner than a flow lives,
/// 10 minutes): nothing can finish the flow then, and the person can only
/// start again, as after it expired.
pub fn open_verifier(
    keys: &crate::crypto::KeyRing,
    flow: &OAuthFlow,
) -> anyhow::Result<secrecy::SecretString> {
    let sealed = Sealed {
        key_id: flow.key_id.clone(),
        bytes: flow.pkce_verifier.clone(),
    };
    let verifier = keys
        .open(Purpose::PkceVerifier, flow.id.as_bytes(), &sealed)
        .map_err(|e| anyhow::anyhow!("cannot open the PKCE verifier: {e}"))?;
    let verifier =
        String::from_utf8(verifier).map_err(|_| anyhow::anyhow!("PKCE verifier is not UTF-8"))?;
    Ok(secrecy::SecretString::from(verifier))
}

/// What the provider's redirect back from consent brought, with the
/// verifier it is exchanged with.
pub struct Callback<'a> {
    pub code: &'a str,
    /// The flow's PKCE verifier, opened ([`open_verifier`]) by the caller
    /// when it checked the flow: once, so that the exchange uses the very
    /// value found usable.
    pub verifier: &'a secrecy::SecretString,
    /// Its `scope` parameter: the accepted scopes, where the provider's
    /// entry says it names them (`granted_scopes_in_callback`).
    pub scope: Option<&'a str>,
}

/// Exchanges the provider's code, reads the account and stores the
/// connection for `user`. The flow was already marked completed.
pub(super) async fn finish(
    state: &ConnectionService,
    flow: &OAuthFlow,
    provider: &Provider,
    callback: Callback<'_>,
    user: UserRef<'_>,
) -> Result<(Uuid, Account), FinishError> {
    let code = callback.code;
    let name = provider.name();
    let upstream = |step: &str, e: ProviderError| {
        FinishError::Upstream(anyhow::anyhow!("{name}: {step}: {e}"))
    };
    let flow_params = db::params::get(&state.db, Holder::Flow, flow.id)
        .await
        .map_err(anyhow::Error::from)?
        .unwrap_or_default();
    let mut params = flow_params.clone();
    let (mut tokens, learned) = provider
        .exchange_code_learning(
            &state.http,
            code,
            callback.verifier.expose_secret(),
            &params,
        )
        .await
        .map_err(|e| upstream("code exchange", e))?;
    let account = match learn_and_read(state, provider, &tokens, learned, &mut params).await {
        Ok(account) => account,
        Err((step, e)) => {
            // The tokens were issued but will not be stored: end the grant.
            let access =
                vault::revoke_unused(state, user, provider, &tokens, &flow_params, None).await;
            tracing::warn!(provider = %name, step, error = %e, access = ?access, "connect failed after consent; tokens not stored");
            return Err(match e {
                ProviderError::Unaccepted { label, .. } => FinishError::Unaccepted {
                    provider: provider.display_name().to_owned(),
                    label,
                    access,
                },
                e => upstream(step, e),
            });
        }
    };
    // Owed until stored, so that a commit whose outcome is lost leaves
    // the tokens either stored or owed their revocation.
    let owed =
        vault::owe_until_stored(state, user, provider, &tokens, &flow_params, &account.id).await;
    let (owed, stored) = match owed {
        Ok(owed) => {
            let stored = store(
                state,
                flow,
                provider,
                &callback,
                user,
                &account,
                &mut tokens,
                &params,
                owed.as_ref(),
            )
            .await;
            (owed, stored)
        }
        // The row may be there: not stored, revoked as below (a second
        // revocation of the same tokens, should it be, ends nothing more).
        // Its cause kept, the page tells a database that failed in passing.
        Err(e) => (None, Err(Stored::Failed(FinishError::Internal(e)))),
    };
    match stored {
        Ok(connection_id) => {
            state.metrics.flow.connection_stored();
            Ok((connection_id, account))
        }
        Err(Stored::Failed(e)) => {
            // Issued, and now stored nowhere: a grant nobody could use or
            // end from here, ended at the provider as when the account
            // could not be read — unless a working connection here holds
            // the same account (this person's: a reconnect, a scope
            // upgrade; or someone else's) at a provider where revoking
            // these tokens may end the whole grant, and so that connection
            // (`revoke_unused` checks, and keeps them then).
            let access = match owed {
                Some(owed) => owed.attempt(state).await,
                None => {
                    let account = Some(account.id.as_str());
                    vault::revoke_unused(state, user, provider, &tokens, &flow_params, account)
                        .await
                }
            };
            tracing::warn!(provider = %name, access = ?access, error = %e, "connect failed while storing; tokens not stored");
            Err(match e {
                FinishError::TooManyAccounts {
                    provider, limit, ..
                } => FinishError::TooManyAccounts {
                    provider,
                    limit,
                    access,
                },
                e => e,
            })
        }
        // The commit's outcome is unknown (the connection may be stored):
        // revoking now could end a connection that works. Owed until
        // stored, the tokens are revoked by a sweep if it did not land.
        Err(Stored::Unknown(e)) => {
            match &owed {
                Some(owed) => {
                    tracing::warn!(provider = %name, error = %e, due_at = %owed.due_at(), "connect's commit failed: if it did not land, a sweep revokes the tokens once due");
                }
                None => {
                    tracing::warn!(provider = %name, error = %e, "connect's commit failed: if it did not land, the tokens stay live at the provider");
                }
            }
            Err(e)
        }
    }
}

/// Why [`store`] did not store the connection.
enum Stored {
    /// Nothing was stored.
    Failed(FinishError),
    /// The commit failed: it may have been made.
    Unknown(FinishError),
}

/// Stores the connection the consent made, with its parameters, and
/// records it on the flow and the ticket, in one transaction.
#[allow(clippy::too_many_arguments)]
async fn store(
    state: &ConnectionService,
    flow: &OAuthFlow,
    provider: &Provider,
    callback: &Callback<'_>,
    user: UserRef<'_>,
    account: &Account,
    tokens: &mut TokenSet,
    params: &Params,
    owed: Option<&vault::OwedUntilStored>,
) -> Result<Uuid, Stored> {
    let failed = |e: anyhow::Error| Stored::Failed(FinishError::Internal(e));
    let name = provider.name();
    let ticket = match flow.ticket_id {
        Some(id) => db::tickets::find_by_id(&state.db, id)
            .await
            .map_err(|e| failed(e.into()))?,
        None => None,
    };
    let requested = match &ticket {
        Some(t) => requested_scopes(provider, t),
        None => with_defaults(provider, &[]),
    };
    if tokens.scopes.is_none()
        && provider.granted_scopes_in_callback()
        && let Some(accepted) = callback.scope
    {
        tokens.scopes = Some(accepted_of(&requested, accepted));
    }
    // The client that asked is allowed this connection (per-client grants).
    let client_id = ticket.as_ref().map(|t| t.client_id.as_str());
    let mut tx = crate::db::transaction::begin(&state.db)
        .await
        .map_err(|e| failed(e.into()))?;
    // A reconnect's row may be held by a refresh of it under way.
    vault::wait_for_refreshes(&mut tx, &state.settings.database)
        .await
        .map_err(|e| failed(e.into()))?;
    vault::adopt_unscoped(&mut tx, user, provider, account, params)
        .await
        .map_err(|e| failed(e.into()))?;
    let connection_id = vault::store_in(
        state,
        &mut tx,
        NewConnection {
            user,
            provider: name,
            account,
            tokens,
            requested_scopes: &requested,
            client_id,
        },
    )
    .await
    .map_err(|e| match e.downcast::<vault::TooManyAccounts>() {
        Ok(too_many) => Stored::Failed(FinishError::TooManyAccounts {
            provider: provider.display_name().to_owned(),
            limit: too_many.limit,
            access: UnusedAccess::Live,
        }),
        Err(e) => failed(e),
    })?;
    // Every later call (refresh, API, revocation) is made from these.
    db::params::set(&mut *tx, Holder::Connection, connection_id, params)
        .await
        .map_err(|e| failed(e.into()))?;
    // What a reload of the callback page shows, and what the client's
    // retry completes with. The flow goes with its browser session: gone
    // now, the person signed out (or an operator removed them) while the
    // code was exchanged, and nothing is stored. Holding the row until the
    // commit, this also makes a removal's delete of the session wait for
    // the commit, and then find the connection.
    let flow_still_there = db::oauth_flows::set_connection(&mut *tx, flow.id, connection_id)
        .await
        .map_err(|e| failed(e.into()))?;
    if !flow_still_there {
        return Err(Stored::Failed(FinishError::SignInEnded));
    }
    if let Some(ticket_id) = flow.ticket_id {
        db::tickets::set_stored_connection(&mut *tx, ticket_id, connection_id)
            .await
            .map_err(|e| failed(e.into()))?;
    }
    // Stored, the tokens are no longer owed their revocation: both or
    // neither, whatever becomes of the commit.
    if let Some(owed) = owed {
        owed.settle_in(&mut tx).await.map_err(failed)?;
    }
    tx.commit()
        .await
        .map_err(|e| Stored::Unknown(FinishError::Internal(e.into())))?;
    Ok(connection_id)
}

/// Those of the `requested` scopes that `accepted` (the callback's
/// `scope`, comma or space separated) names. Never more than was asked:
/// the parameter passed through the browser.
fn accepted_of(requested: &[String], accepted: &str) -> Vec<String> {
    let named: Vec<&str> = accepted
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .collect();
    requested
        .iter()
        .filter(|s| named.contains(&s.as_str()))
        .cloned()
        .collect()
}

/// The values the provider tells after consent, checked (from the token
/// answer, then by lookup) and added to `params`, then the account read
/// with them; on failure, the step and why.
async fn learn_and_read(
    state: &ConnectionService,
    provider: &Provider,
    tokens: &TokenSet,
    learned: Learned,
    params: &mut Params,
) -> Result<Account, (&'static str, ProviderError)> {
    params.extend(learned.map_err(|e| ("token answer", e))?);
    let access_token = tokens.access_token.expose_secret();
    let looked_up = provider
        .lookup_params(&state.http, access_token)
        .await
        .map_err(|e| ("lookup", e))?;
    params.extend(looked_up);
    provider
        .account_at(&state.http, access_token, params)
        .await
        .map_err(|e| ("account", e))
}
