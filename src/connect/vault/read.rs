//! Handing out a usable token: the one read, the scope check, a refresh
//! when the token is about to expire, the use recorded; and the provider's
//! refusal of a token handed out.

use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use super::{
    NoTurnInTime,
    refresh::{Why, needs_refresh, refresh},
    refused::Refusal,
    seal::{Binding, Kind, open_bound},
};
use crate::{
    config::WebhookEvent,
    connect::{
        ConnectionService,
        outbox::{self, Detail},
    },
    db::{
        self,
        connections::{ConnectionRow, ConnectionStatus},
    },
    domain::{ProviderName, UserRef},
    providers::{Credential, Provider, ProviderError},
};

/// A token ready for a call to the provider, and what it belongs to.
pub struct UsableToken {
    pub connection_id: Uuid,
    pub access_token: SecretString,
    pub account_id: String,
    pub account_label: String,
    pub scopes: Vec<String>,
    /// The connection's provider parameters (a Datadog site).
    pub params: db::params::Params,
    /// The tokens as stored: the access token to tell whether it was
    /// replaced since, the refresh token to be opened only by a call that
    /// needs it ([`ConnectionService::refresh_token_of`]). Boxed: it is
    /// read only on the rare paths, and keeps the token small to move.
    sealed: Box<SealedTokens>,
}

/// A connection's tokens as stored, and what their seal is bound to.
struct SealedTokens {
    issuer: String,
    subject: String,
    provider: ProviderName,
    key_id: String,
    access: Vec<u8>,
    refresh: Option<Vec<u8>>,
}

impl UsableToken {
    fn new(row: ConnectionRow, access_token: SecretString) -> Self {
        Self {
            connection_id: row.id,
            access_token,
            account_id: row.account_id,
            account_label: row.account_label,
            scopes: row.scopes,
            params: row.params.0,
            sealed: Box::new(SealedTokens {
                issuer: row.issuer,
                subject: row.subject,
                provider: row.provider,
                key_id: row.key_id,
                access: row.access_token,
                refresh: row.refresh_token,
            }),
        }
    }

    /// The credential as provider calls take it: for API-key and Basic
    /// connections, `access_token` holds the sealed fields. Without the
    /// refresh token: a call whose answer must not show it passes the one
    /// [`ConnectionService::refresh_token_of`] opens.
    pub fn credential(&self) -> Credential<'_> {
        Credential {
            secret: self.access_token.expose_secret(),
            refresh_token: None,
            params: &self.params,
        }
    }
}

impl ConnectionService {
    /// The refresh token of the connection `token` came from, opened;
    /// `None`: it has none. Only a call that must hide it from what the
    /// provider answers (`api_request`) needs it, so nothing else opens it:
    /// a tool call holds no secret in the clear beyond the one it sends.
    pub fn refresh_token_of(&self, token: &UsableToken) -> anyhow::Result<Option<SecretString>> {
        let sealed = &token.sealed;
        let Some(bytes) = &sealed.refresh else {
            return Ok(None);
        };
        let binding = Binding {
            id: token.connection_id,
            user: UserRef::new(&sealed.issuer, &sealed.subject),
            provider: &sealed.provider,
            key_id: &sealed.key_id,
        };
        open_bound(self, &binding, Kind::Refresh, bytes).map(Some)
    }
}

impl std::fmt::Debug for UsableToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsableToken")
            .field("connection_id", &self.connection_id)
            .field("account_label", &self.account_label)
            .finish_non_exhaustive()
    }
}

/// Where a user stands with a provider.
#[derive(Debug)]
pub enum TokenState {
    Usable(UsableToken),
    /// Never connected (or disconnected).
    Missing,
    /// Connected once, but the provider no longer accepts it; `granted`:
    /// the scopes it had, for the new connect to ask for again.
    NeedsReauth {
        granted: Vec<String>,
    },
    /// The token has expired and the provider's token endpoint could not
    /// renew it (down, slow, an error answer): nothing for the user to
    /// do, the call may be tried again later.
    ProviderUnavailable,
    /// Connected, without some of the scopes asked for.
    LacksScopes {
        granted: Vec<String>,
    },
    /// The token has expired and the provider refuses to renew it, without
    /// saying the grant is dead: the connection stays as it is.
    RefreshRefused(Refusal),
}

/// Tokens stored more recently than this are not refreshed when the
/// provider refuses them: the refusal is about the request (a provider
/// that answers a missing scope with 401), and a model asking for such a
/// request again and again must not make a refresh of each.
const FRESH_FOR: chrono::Duration = chrono::Duration::minutes(1);

/// How many connections' last refusal refreshes this instance remembers
/// before it forgets those over a minute old.
const REMEMBERED_REFUSALS: usize = 1024;

/// The provider refused `token` before its time (revoked and re-issued,
/// a lifetime shorter than it said, a clock apart): its tokens refreshed
/// once, to try again with. `None`: nothing better to try — no refresh
/// token, tokens stored within the last minute, a refresh for a refusal
/// tried within the last minute, or the refresh refused (the connection is
/// then marked to connect again) or failed (the provider's refusal stands,
/// and the caller answers with it).
pub async fn refreshed_after_refusal(
    state: &ConnectionService,
    token: &UsableToken,
    provider: &Provider,
) -> Option<UsableToken> {
    if token.sealed.refresh.is_none() || !first_in_a_minute(state, token.connection_id) {
        return None;
    }
    match refresh_refused(state, token, provider).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(
                connection = %token.connection_id, error = %e,
                "refreshing a refused token failed; the refusal stands"
            );
            None
        }
    }
}

/// Whether this instance tried no refresh for a refusal of `connection`
/// within the last minute; notes this one. A provider that keeps refusing
/// (or a token endpoint that is down) costs one refresh a minute, not one
/// per call.
fn first_in_a_minute(state: &ConnectionService, connection: Uuid) -> bool {
    let now = std::time::Instant::now();
    let minute = std::time::Duration::from_secs(60);
    let mut tried = state
        .refusal_refreshes
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if tried
        .get(&connection)
        .is_some_and(|at| now.duration_since(*at) < minute)
    {
        return false;
    }
    if tried.len() >= REMEMBERED_REFUSALS {
        tried.retain(|_, at| now.duration_since(*at) < minute);
    }
    tried.insert(connection, now);
    true
}

async fn refresh_refused(
    state: &ConnectionService,
    token: &UsableToken,
    provider: &Provider,
) -> anyhow::Result<Option<UsableToken>> {
    let user = UserRef::new(&token.sealed.issuer, &token.sealed.subject);
    let again = read_again_locked(state, user, &token.sealed.provider, token.connection_id);
    let (Now::Active(row), _turn) = again.await? else {
        return Ok(None);
    };
    let row = if row.access_token != token.sealed.access {
        // Refreshed (or reconnected) since this token was read.
        row
    } else if row.tokens_stored_at > row.read_at - FRESH_FOR {
        // Both by the database's clock, which wrote the one.
        return Ok(None);
    } else {
        match refresh(state, &row, provider, Why::Refused).await? {
            Some(row) if row.access_token != token.sealed.access => row,
            _ => return Ok(None),
        }
    };
    // Refreshed by another instance meanwhile, with a key this one lacks:
    // not ours to open, nor to judge.
    if !state.keys.has_key(&row.key_id) {
        return Ok(None);
    }
    let access_token = open_bound(state, &Binding::of(&row), Kind::Access, &row.access_token)?;
    Ok(Some(UsableToken::new(row, access_token)))
}

/// The provider refused `token` (HTTP 401): the user must connect again —
/// unless the token was refreshed or replaced in the meantime, in which
/// case the refusal was for a token nobody uses any more, or a refresh is
/// under way that may replace it. `true` when the connection was marked.
pub async fn token_rejected(
    state: &ConnectionService,
    token: &UsableToken,
) -> anyhow::Result<bool> {
    state.metrics.flow.token_refused();
    // A refresh of it this instance has begun (for another call's refusal
    // of the same token) may not have claimed the row yet, and would
    // replace the token: judged once it has ended (marking compares the
    // token). One that does not end in time may still replace it: the
    // refusal is the call's answer, and the connection is left as it is.
    let Ok(_turn) = super::own_refresh_turn(state, token.connection_id).await else {
        tracing::warn!(
            connection = %token.connection_id,
            "provider refused the access token while a refresh of it is under way; left as it is"
        );
        return Ok(false);
    };
    let marked = mark_needs_reauth(
        state,
        token.connection_id,
        &token.sealed.access,
        "token_rejected",
        // The refusal may be of the token a refresh under way elsewhere
        // replaces.
        true,
    )
    .await?;
    tracing::info!(
        connection = %token.connection_id,
        marked,
        "provider refused the access token"
    );
    Ok(marked)
}

/// Marks the connection `needs_reauth` if its access token is still
/// `sealed_access_token` (and, `unless_refreshing`, no refresh of it is
/// claimed), with its event, in one transaction. `true` when it was
/// marked.
pub(in crate::connect) async fn mark_needs_reauth(
    state: &ConnectionService,
    id: Uuid,
    sealed_access_token: &[u8],
    reason: &'static str,
    unless_refreshing: bool,
) -> Result<bool, sqlx::Error> {
    // Within the database's deadline, as every step a request waits for:
    // a frozen server would hold the call for as long as TCP waits.
    db::faults::deadline(state.settings.database.deadline(), async {
        let mut tx = crate::db::transaction::begin(&state.db).await?;
        let marked = db::connections::mark_needs_reauth_if_current(
            &mut *tx,
            id,
            sealed_access_token,
            unless_refreshing,
        )
        .await?;
        if marked {
            outbox::record(
                state,
                &mut tx,
                WebhookEvent::ConnectionReauthRequired,
                id,
                Detail::Reason(reason),
            )
            .await?;
        }
        tx.commit().await?;
        Ok(marked)
    })
    .await
}

/// The user's token for `provider`, refreshed if need be.
pub async fn usable_token(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    required_scopes: &[String],
) -> anyhow::Result<TokenState> {
    usable_token_of(state, user, provider, None, required_scopes).await
}

/// [`usable_token`] of one account (`connection`); `None`: the only (or
/// oldest) one.
pub async fn usable_token_of(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    connection: Option<Uuid>,
    required_scopes: &[String],
) -> anyhow::Result<TokenState> {
    let limit = state.settings.database.deadline();
    let found = db::faults::deadline(
        limit,
        state.hot_db.run(async |conn| {
            db::connections::find_account(conn, user, provider.name(), connection).await
        }),
    )
    .await?;
    token_state(state, found, provider, required_scopes).await
}

/// Where the user stands with the connection `found` (read by the caller,
/// as a tool call's one read does: `db::call_accounts`); `None`: there is
/// none. Refreshes the token if need be.
pub(in crate::connect) async fn token_state(
    state: &ConnectionService,
    found: Option<ConnectionRow>,
    provider: &Provider,
    required_scopes: &[String],
) -> anyhow::Result<TokenState> {
    let limit = state.settings.database.deadline();
    let Some(row) = found else {
        return Ok(TokenState::Missing);
    };
    match row.status {
        ConnectionStatus::Active => {}
        ConnectionStatus::NeedsReauth => {
            return Ok(TokenState::NeedsReauth {
                granted: row.scopes,
            });
        }
        ConnectionStatus::Revoked => return Ok(TokenState::Missing),
    }
    if !state.keys.has_key(&row.key_id) {
        return Err(crate::connect::stale_keys::KeyMissing::of(&row).into());
    }
    if !required_scopes
        .iter()
        .all(|s| provider.scope_granted(&row.scopes, s))
    {
        return Ok(TokenState::LacksScopes {
            granted: row.scopes.clone(),
        });
    }
    let row = if needs_refresh(&row) {
        match refresh_due(state, row, provider).await? {
            Due::Serve(row) => row,
            Due::Answer(answer) => return Ok(answer),
        }
    } else {
        row
    };
    // Record the use at most once a minute: keeps the hot path read-only.
    // A note of the use that fails is no reason to fail the use. By the
    // database's clock, which wrote `last_used_at`: an instance whose own
    // is ahead would note every use, one behind none for as long.
    if row
        .last_used_at
        .is_none_or(|at| at < row.read_at - chrono::Duration::minutes(1))
    {
        let touched = db::faults::deadline(
            limit,
            state
                .hot_db
                .run(async |conn| db::connections::touch(conn, row.id).await),
        )
        .await;
        if let Err(e) = touched {
            tracing::warn!(connection = %row.id, error = %e, "noting the connection's use failed");
        }
    }
    let opened = open_bound(state, &Binding::of(&row), Kind::Access, &row.access_token);
    match opened {
        Ok(access_token) => Ok(TokenState::Usable(UsableToken::new(row, access_token))),
        Err(e) if e.chain().any(|c| c.is::<crate::crypto::CryptoError>()) => {
            crate::connect::stale_keys::unreadable(state, &row, "does_not_open").await;
            Ok(TokenState::NeedsReauth {
                granted: row.scopes,
            })
        }
        Err(e) => Err(e),
    }
}

/// What a refresh that came due ended in: the row to serve, or the call's
/// answer instead.
enum Due {
    Serve(ConnectionRow),
    Answer(TokenState),
}

/// A connection as it is now, read again: what a refresh that came due,
/// a refresh for a refusal and a refresh that had no turn in time decide
/// on.
enum Now {
    /// Active, and sealed by a key this instance holds.
    Active(ConnectionRow),
    /// Deleted (disconnected) meanwhile.
    Gone,
    /// No longer active: it needs its user again, or was revoked.
    Inactive(ConnectionRow),
    /// Re-sealed meanwhile by another instance, with a key this one lacks
    /// (the first to have a new key seals with it, in a rolling rotation):
    /// that says nothing about the connection, which is not this
    /// instance's to open nor to judge.
    KeyMissing(ConnectionRow),
}

/// Reads connection `id` of `user` at `provider` again, within the
/// database's deadline.
async fn read_now(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
    id: Uuid,
) -> anyhow::Result<Now> {
    let limit = state.settings.database.deadline();
    let again = db::connections::find_account(&state.db, user, provider, Some(id));
    let Some(row) = db::faults::deadline(limit, again).await? else {
        return Ok(Now::Gone);
    };
    Ok(if row.status != ConnectionStatus::Active {
        Now::Inactive(row)
    } else if !state.keys.has_key(&row.key_id) {
        Now::KeyMissing(row)
    } else {
        Now::Active(row)
    })
}

/// Reads connection `id` again once this instance's own refresh of it (if
/// any) has ended — one refresh of a row at a time within this instance —
/// without holding a database connection while it waits. The lock is
/// held until the guard returned is dropped.
async fn read_again_locked(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
    id: Uuid,
) -> anyhow::Result<(Now, tokio::sync::OwnedMutexGuard<()>)> {
    // After that the refresh under way is stuck, and the caller may retry.
    let turn = super::own_refresh_turn(state, id).await?;
    Ok((read_now(state, user, provider, id).await?, turn))
}

/// Refreshes `row`'s token, which is due, once the row read again
/// ([`read_again_locked`]) still needs it: this instance's refresh that
/// was under way may have done it.
async fn refresh_due(
    state: &ConnectionService,
    row: ConnectionRow,
    provider: &Provider,
) -> anyhow::Result<Due> {
    let again = match read_again_locked(state, row.user(), provider.name(), row.id).await {
        Ok(again) => again,
        // This instance's refresh of it outlasted the wait (its provider
        // hangs): a token that has not expired still serves.
        Err(e) if NoTurnInTime::is_of(&e) => return serve_if_unchanged(state, &row, e).await,
        Err(e) => return Err(e),
    };
    let (row, _turn) = match again {
        (Now::Active(row), turn) => (row, turn),
        (Now::Gone, _) => return Ok(Due::Answer(TokenState::Missing)),
        (Now::Inactive(row), _) => {
            return Ok(Due::Answer(TokenState::NeedsReauth {
                granted: row.scopes,
            }));
        }
        // As when the call's first read finds it so: retryable, the row
        // left alone.
        (Now::KeyMissing(row), _) => {
            return Err(crate::connect::stale_keys::KeyMissing::of(&row).into());
        }
    };
    if !needs_refresh(&row) {
        return Ok(Due::Serve(row));
    }
    if let Some(refusal) = state.refused_refreshes.standing(row.id, &row.access_token) {
        // Refused within the last minute: not asked again yet. A token
        // that has not expired still serves.
        return Ok(if row.access_token_expired() {
            Due::Answer(TokenState::RefreshRefused(refusal))
        } else {
            Due::Serve(row)
        });
    }
    // The refresh may wait for another's lock or claim and for the
    // provider: whether the token has expired is judged at its end.
    let read = std::time::Instant::now();
    match refresh(state, &row, provider, Why::Expiring).await {
        // Refreshed meanwhile by another instance (whose tokens this one
        // waited for), sealed with a key this one lacks.
        Ok(Some(row)) if !state.keys.has_key(&row.key_id) => {
            Err(crate::connect::stale_keys::KeyMissing::of(&row).into())
        }
        Ok(Some(row)) => Ok(Due::Serve(row)),
        // Marked as needing its user (by this refresh or another
        // instance's), or deleted while the refresh waited for another's
        // claim (a disconnect): then it is not connected any more, and a
        // connect asks for no scopes of the connection that went.
        Ok(None) => Ok(Due::Answer(
            match read_now(state, row.user(), &row.provider, row.id).await? {
                Now::Gone => TokenState::Missing,
                _ => TokenState::NeedsReauth {
                    granted: row.scopes,
                },
            },
        )),
        Err(e) if NoTurnInTime::is_of(&e) => serve_if_unchanged(state, &row, e).await,
        Err(e) => refresh_failed(state, row, read.elapsed(), e),
    }
}

/// No turn to refresh `row` came in time (refreshes of other connections,
/// or this one's, wait for a slow provider): the connection as it is now
/// answers. Its token serves while it lives if it is unchanged, or if
/// another instance refreshed it meanwhile; disconnected or marked
/// meanwhile, that is the answer; otherwise `e`, retryable.
async fn serve_if_unchanged(
    state: &ConnectionService,
    row: &ConnectionRow,
    e: anyhow::Error,
) -> anyhow::Result<Due> {
    let now = match read_now(state, row.user(), &row.provider, row.id).await? {
        Now::Gone => return Ok(Due::Answer(TokenState::Missing)),
        Now::Inactive(now) => {
            return Ok(Due::Answer(TokenState::NeedsReauth {
                granted: now.scopes,
            }));
        }
        Now::Active(now) | Now::KeyMissing(now) => now,
    };
    let unchanged = now.access_token == row.access_token && !now.access_token_expired();
    let refreshed = !needs_refresh(&now) && state.keys.has_key(&now.key_id);
    if unchanged || refreshed {
        tracing::warn!(connection = %row.id, provider = %row.provider, refreshed, "no turn to refresh the token came in time; it serves while it lives");
        return Ok(Due::Serve(now));
    }
    Err(e)
}

/// The token endpoint failed or refused, without saying the grant is
/// dead: a token that has not expired yet still serves (it is refreshed
/// ahead of its expiry), one that has cannot. A lasting refusal is
/// remembered for a minute ([`super::RefusedRefreshes`]). `since_read`:
/// how long ago `row` was read.
fn refresh_failed(
    state: &ConnectionService,
    row: ConnectionRow,
    since_read: std::time::Duration,
    e: anyhow::Error,
) -> anyhow::Result<Due> {
    let Some(refusal) = e.chain().find_map(|c| c.downcast_ref::<ProviderError>()) else {
        return Err(e);
    };
    let expired = row.access_token_expired_after(since_read);
    let error = format!("{e:#}");
    if refusal.is_passing() {
        tracing::warn!(connection = %row.id, provider = %row.provider, expired, error, "the token could not be refreshed");
        if expired {
            return Ok(Due::Answer(TokenState::ProviderUnavailable));
        }
        return Ok(Due::Serve(row));
    }
    // A lasting refusal: of this server's client (a wrong secret, the
    // operator's to mend), or of the grant in words no entry names
    // (connecting again may mend it). The user is told which.
    if refusal.refuses_the_client() {
        tracing::error!(connection = %row.id, provider = %row.provider, expired, error, "the provider refuses this server's client at its token endpoint; check the provider's client settings");
    } else {
        tracing::warn!(connection = %row.id, provider = %row.provider, expired, error, "the provider refuses to refresh the token");
    }
    let refusal = Refusal {
        reason: refusal.to_string(),
        client_refused: refusal.refuses_the_client(),
    };
    state
        .refused_refreshes
        .remember(row.id, &row.access_token, refusal.clone());
    Ok(if expired {
        Due::Answer(TokenState::RefreshRefused(refusal))
    } else {
        Due::Serve(row)
    })
}
