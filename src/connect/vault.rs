//! The token vault: third-party tokens sealed with the key ring (purpose
//! `token`), bound to the connection's id, user, provider and kind (access
//! or refresh), so a sealed token copied to another row never opens.
//!
//! A usable access token is handed out only here, refreshed lazily when it
//! is within a minute of expiry — one refresh per connection at a time
//! across all instances (row lock, then re-read: the winner's new tokens
//! serve everyone who waited).

use crate::domain::UserRef;
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use uuid::Uuid;

use super::{
    events,
    outbox::{self, Detail},
};
use crate::{
    config::WebhookEvent,
    connect::ConnectionService,
    crypto::{Purpose, Sealed},
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        connections::{ConnectionRow, ConnectionStatus, StoredTokens},
    },
    metrics::Refresh,
    providers::{Account, Credential, Provider, ProviderError, TokenHint, TokenSet},
};

/// Refresh when the access token expires within this long — or within half
/// its lifetime, if that is shorter: a provider issuing one-minute tokens
/// would otherwise be asked for a new one on every call.
const REFRESH_MARGIN: chrono::Duration = chrono::Duration::seconds(60);
/// How long a refresh or a disconnect waits for the row another instance
/// holds while it refreshes (a slow provider must not pin us forever).
const REFRESH_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// A token ready for a call to the provider, and what it belongs to.
pub struct UsableToken {
    pub connection_id: Uuid,
    pub access_token: SecretString,
    /// Only to be hidden from what the provider answers.
    pub refresh_token: Option<SecretString>,
    pub account_id: String,
    pub account_label: String,
    pub scopes: Vec<String>,
    /// The connection's provider parameters (a Datadog site).
    pub params: db::params::Params,
    /// The token as stored, to tell whether it was replaced since.
    sealed_access_token: Vec<u8>,
}

impl UsableToken {
    /// The credential as provider calls take it: for API-key and Basic
    /// connections, `access_token` holds the sealed fields.
    pub fn credential(&self) -> Credential<'_> {
        Credential {
            secret: self.access_token.expose_secret(),
            refresh_token: self.refresh_token.as_ref().map(|t| t.expose_secret()),
            params: &self.params,
        }
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
    /// Connected once, but the provider no longer accepts it.
    NeedsReauth,
    /// Connected, without some of the scopes asked for.
    LacksScopes {
        granted: Vec<String>,
    },
}

pub struct NewConnection<'a> {
    pub user: UserRef<'a>,
    pub provider: &'a str,
    pub account: &'a Account,
    pub tokens: &'a TokenSet,
    pub requested_scopes: &'a [String],
    /// The MCP client that started the connect flow: the user's consent
    /// there grants it the use of this connection.
    pub client_id: Option<&'a str>,
}

#[derive(Clone, Copy)]
enum Kind {
    Access,
    Refresh,
}

fn context(id: Uuid, user: UserRef<'_>, provider: &str, kind: Kind) -> Vec<u8> {
    let kind = match kind {
        Kind::Access => "access",
        Kind::Refresh => "refresh",
    };
    let mut ctx = Vec::new();
    for part in [
        id.to_string().as_str(),
        user.issuer(),
        user.subject(),
        provider,
        kind,
    ] {
        ctx.extend_from_slice(&(part.len() as u32).to_be_bytes());
        ctx.extend_from_slice(part.as_bytes());
    }
    ctx
}

/// When the access token expires. A provider's `expires_in` is untrusted:
/// anything beyond a year (or unrepresentable) counts as "not said".
fn expiry(tokens: &TokenSet) -> Option<DateTime<Utc>> {
    const YEAR: u64 = 366 * 24 * 3600;
    let secs = tokens.expires_in?.as_secs();
    if secs > YEAR {
        return None;
    }
    Utc::now().checked_add_signed(chrono::TimeDelta::try_seconds(i64::try_from(secs).ok()?)?)
}

/// Stores (or replaces) the user's connection to a provider and announces
/// it to every instance.
pub async fn store_connection(
    state: &ConnectionService,
    c: NewConnection<'_>,
) -> anyhow::Result<Uuid> {
    let mut tx = state.db.begin().await?;
    let id = store_in(state, &mut tx, c).await?;
    tx.commit().await?;
    state.metrics.flow.connection_stored();
    Ok(id)
}

/// [`store_connection`] inside the caller's transaction (the caller
/// commits, then counts it with `connection_stored`): the connection, its
/// webhook event, the connecting client's grant and the announcement all
/// happen or none does.
pub(super) async fn store_in(
    state: &ConnectionService,
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    c: NewConnection<'_>,
) -> anyhow::Result<Uuid> {
    let id = db::connections::claim_id(tx, c.user, c.provider, &c.account.id).await?;
    // A fresh claim is `revoked` until stored: anything else was connected before.
    let reconnected = if state.wants_event(WebhookEvent::ConnectionCreated) {
        db::connections::find_ref(&mut **tx, id)
            .await?
            .is_some_and(|r| r.status != ConnectionStatus::Revoked)
    } else {
        false
    };
    let seal = |secret: &SecretString, kind| {
        state.keys.seal(
            Purpose::Token,
            &context(id, c.user, c.provider, kind),
            secret.expose_secret().as_bytes(),
        )
    };
    let access = seal(&c.tokens.access_token, Kind::Access)?;
    let refresh = c
        .tokens
        .refresh_token
        .as_ref()
        .map(|r| seal(r, Kind::Refresh))
        .transpose()?;
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
            expires_at: expiry(c.tokens),
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
    if let Some(client_id) = c.client_id {
        super::grants::grant_connecting_client(state, tx, id, client_id).await?;
    }
    events::notify(&mut **tx, &events::key(c.user, c.provider)).await?;
    Ok(id)
}

fn open(
    state: &ConnectionService,
    row: &ConnectionRow,
    kind: Kind,
) -> anyhow::Result<Option<SecretString>> {
    let bytes = match kind {
        Kind::Access => Some(&row.access_token),
        Kind::Refresh => row.refresh_token.as_ref(),
    };
    let Some(bytes) = bytes else { return Ok(None) };
    let sealed = Sealed {
        key_id: row.key_id.clone(),
        bytes: bytes.clone(),
    };
    let plain = state
        .keys
        .open(
            Purpose::Token,
            &context(row.id, row.user(), &row.provider, kind),
            &sealed,
        )
        .map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "stored token of connection {} does not open",
                row.id
            ))
        })?;
    Ok(Some(SecretString::from(String::from_utf8(plain)?)))
}

fn needs_refresh(row: &ConnectionRow) -> bool {
    row.access_token_expires_at
        .is_some_and(|at| at - refresh_margin(row.updated_at, at) <= Utc::now())
}

/// How long before `expires_at` a token stored at `stored_at` is refreshed.
fn refresh_margin(stored_at: DateTime<Utc>, expires_at: DateTime<Utc>) -> chrono::Duration {
    let half_life = (expires_at - stored_at) / 2;
    REFRESH_MARGIN.min(half_life.max(chrono::Duration::zero()))
}

fn usable(state: &ConnectionService, row: &ConnectionRow) -> anyhow::Result<UsableToken> {
    let access_token =
        open(state, row, Kind::Access)?.ok_or_else(|| anyhow::anyhow!("no access token"))?;
    Ok(UsableToken {
        connection_id: row.id,
        access_token,
        refresh_token: open(state, row, Kind::Refresh)?,
        account_id: row.account_id.clone(),
        account_label: row.account_label.clone(),
        scopes: row.scopes.clone(),
        params: row.params.0.clone(),
        sealed_access_token: row.access_token.clone(),
    })
}

/// The provider refused `token` (HTTP 401): the user must connect again —
/// unless the token was refreshed or replaced in the meantime, in which
/// case the refusal was for a token nobody uses any more. `true` when the
/// connection was marked.
pub async fn token_rejected(
    state: &ConnectionService,
    token: &UsableToken,
) -> anyhow::Result<bool> {
    state.metrics.flow.token_refused();
    let marked = mark_needs_reauth(
        state,
        token.connection_id,
        &token.sealed_access_token,
        "token_rejected",
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
/// `sealed_access_token`, with its event, in one transaction. `true` when
/// it was marked.
pub(super) async fn mark_needs_reauth(
    state: &ConnectionService,
    id: Uuid,
    sealed_access_token: &[u8],
    reason: &'static str,
) -> Result<bool, sqlx::Error> {
    let mut tx = state.db.begin().await?;
    let marked =
        db::connections::mark_needs_reauth_if_current(&mut *tx, id, sealed_access_token).await?;
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
pub(super) async fn token_state(
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
        ConnectionStatus::NeedsReauth => return Ok(TokenState::NeedsReauth),
        ConnectionStatus::Revoked => return Ok(TokenState::Missing),
    }
    if !state.keys.has_key(&row.key_id) {
        super::stale_keys::unreadable(state, &row, "unknown_key").await;
        return Ok(TokenState::NeedsReauth);
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
        // Wait for this instance's own refresh of the row, if any, without
        // holding a database connection; then look again.
        let lock = state.refresh_locks.get(row.id);
        let _turn = lock.lock().await;
        let again =
            db::connections::find_account(&state.db, row.user(), provider.name(), Some(row.id));
        let Some(row) = db::faults::deadline(limit, again).await? else {
            return Ok(TokenState::Missing);
        };
        if row.status != ConnectionStatus::Active {
            return Ok(TokenState::NeedsReauth);
        }
        if needs_refresh(&row) {
            match refresh(state, &row, provider).await? {
                Some(row) => row,
                None => return Ok(TokenState::NeedsReauth),
            }
        } else {
            row
        }
    } else {
        row
    };
    // Record the use at most once a minute: keeps the hot path read-only.
    if row
        .last_used_at
        .is_none_or(|at| at < Utc::now() - chrono::Duration::minutes(1))
    {
        db::faults::deadline(
            limit,
            state
                .hot_db
                .run(async |conn| db::connections::touch(conn, row.id).await),
        )
        .await?;
    }
    match usable(state, &row) {
        Ok(token) => Ok(TokenState::Usable(token)),
        Err(e) if e.chain().any(|c| c.is::<crate::crypto::CryptoError>()) => {
            super::stale_keys::unreadable(state, &row, "does_not_open").await;
            Ok(TokenState::NeedsReauth)
        }
        Err(e) => Err(e),
    }
}

/// Refreshes under the row lock. `None`: the provider refused the refresh
/// token (the user must connect again).
async fn refresh(
    state: &ConnectionService,
    stale: &ConnectionRow,
    provider: &Provider,
) -> anyhow::Result<Option<ConnectionRow>> {
    let mut tx = state.db.begin().await?;
    // Another instance refreshing a slow provider must not pin us forever.
    db::transaction::set_lock_timeout(&mut *tx, REFRESH_LOCK_TIMEOUT).await?;
    let Some(row) = db::connections::find_for_update(&mut *tx, stale.id).await? else {
        return Ok(None);
    };
    if row.status != ConnectionStatus::Active {
        return Ok(None);
    }
    if !needs_refresh(&row) {
        // Someone else refreshed while we waited for the lock.
        return Ok(Some(row));
    }
    let Some(refresh_token) = open(state, &row, Kind::Refresh)? else {
        give_up(state, tx, &row, "no_refresh_token").await?;
        return Ok(None);
    };
    match provider
        .refresh_learning(&state.http, refresh_token.expose_secret(), &row.params.0)
        .await
    {
        Ok(refreshed) => {
            let tokens = refreshed.tokens;
            let params = relearned(&mut tx, &row, refreshed.params, &refreshed.refused).await?;
            let ctx = |kind| context(row.id, row.user(), &row.provider, kind);
            let access = state.keys.seal(
                Purpose::Token,
                &ctx(Kind::Access),
                tokens.access_token.expose_secret().as_bytes(),
            )?;
            // Providers that do not rotate refresh tokens send none back: keep ours.
            let new_refresh = tokens.refresh_token.as_ref().unwrap_or(&refresh_token);
            let refresh = state.keys.seal(
                Purpose::Token,
                &ctx(Kind::Refresh),
                new_refresh.expose_secret().as_bytes(),
            )?;
            let expires_at = expiry(&tokens);
            db::connections::store_refreshed(
                &mut *tx,
                row.id,
                &access.bytes,
                Some(&refresh.bytes),
                &access.key_id,
                expires_at,
            )
            .await?;
            tx.commit().await?;
            audit_refresh(state, &row, AuditKind::Refreshed, json!({})).await;
            Ok(Some(ConnectionRow {
                access_token: access.bytes,
                refresh_token: Some(refresh.bytes),
                key_id: access.key_id,
                access_token_expires_at: expires_at,
                updated_at: Utc::now(),
                params: sqlx::types::Json(params),
                ..row
            }))
        }
        Err(ProviderError::InvalidGrant) => {
            give_up(state, tx, &row, "invalid_grant").await?;
            Ok(None)
        }
        Err(e) => {
            state.metrics.flow.refresh(Refresh::Error);
            Err(anyhow::anyhow!(
                "refreshing the {} token failed: {e}",
                row.provider
            ))
        }
    }
}

/// Stores the parameters a refresh answer told again (a moved org host)
/// when they changed; refused ones were kept as stored, and are logged.
async fn relearned(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    row: &ConnectionRow,
    params: db::params::Params,
    refused: &[ProviderError],
) -> anyhow::Result<db::params::Params> {
    for e in refused {
        tracing::warn!(provider = %row.provider, connection = %row.id, error = %e, "refresh answer named a value refused; the stored one is kept");
    }
    if params != row.params.0 {
        db::params::set(&mut **tx, db::params::Holder::Connection, row.id, &params).await?;
    }
    Ok(params)
}

/// The token cannot be refreshed: the connection needs the user again
/// (marked in `tx`, committed), and the failure is audited with `reason`.
async fn give_up(
    state: &ConnectionService,
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    row: &ConnectionRow,
    reason: &'static str,
) -> anyhow::Result<()> {
    db::connections::set_status(&mut *tx, row.id, ConnectionStatus::NeedsReauth).await?;
    for event in [
        WebhookEvent::ConnectionRefreshFailed,
        WebhookEvent::ConnectionReauthRequired,
    ] {
        outbox::record(state, &mut tx, event, row.id, Detail::Reason(reason)).await?;
    }
    tx.commit().await?;
    audit_refresh(
        state,
        row,
        AuditKind::RefreshFailed,
        json!({ "reason": reason }),
    )
    .await;
    Ok(())
}

/// Records a refresh's end in the audit log and the metrics.
async fn audit_refresh(
    state: &ConnectionService,
    row: &ConnectionRow,
    kind: AuditKind,
    detail: serde_json::Value,
) {
    state.metrics.flow.refresh(match kind {
        AuditKind::Refreshed => Refresh::Ok,
        // `RefreshFailed`: the user must connect again.
        _ => Refresh::NeedsReauth,
    });
    db::audit::record_or_log(
        &state.db,
        AuditEvent::new(kind)
            .user(row.user())
            .provider(&row.provider)
            .detail(detail),
    )
    .await;
}

/// Deletes the connection and revokes its tokens upstream (where the
/// provider supports RFC 7009). `false`: there was none.
///
/// The row is locked before it is read, so a refresh under way finishes
/// first and the tokens revoked are the last ones stored; once it is gone
/// nobody can refresh it again.
pub async fn disconnect(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &str,
) -> anyhow::Result<bool> {
    disconnect_account(state, user, provider, None).await
}

/// [`disconnect`] of one account (`connection`); `None`: the only (or
/// oldest) one.
pub async fn disconnect_account(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &str,
    connection: Option<Uuid>,
) -> anyhow::Result<bool> {
    let Some(found) = db::connections::find_account(&state.db, user, provider, connection).await?
    else {
        return Ok(false);
    };
    let mut tx = state.db.begin().await?;
    // As long as a refresh may take, and no longer.
    db::transaction::set_lock_timeout(&mut *tx, REFRESH_LOCK_TIMEOUT).await?;
    let Some(row) = db::connections::find_for_update(&mut *tx, found.id).await? else {
        return Ok(false);
    };
    outbox::record(
        state,
        &mut tx,
        WebhookEvent::ConnectionDeleted,
        row.id,
        Detail::None,
    )
    .await?;
    let deleted = db::connections::delete(&mut *tx, row.id).await?;
    tx.commit().await?;
    let mut revoked = false;
    if let Some(p) = state.providers.get(provider)
        && p.supports_revocation()
    {
        // Revoking the refresh token ends the whole grant at most providers;
        // the access token too, for those that keep them separate.
        for (kind, hint) in [
            (Kind::Refresh, TokenHint::RefreshToken),
            (Kind::Access, TokenHint::AccessToken),
        ] {
            match open(state, &row, kind) {
                Ok(Some(token)) => match p
                    .revoke(&state.http, token.expose_secret(), hint, &row.params.0)
                    .await
                {
                    Ok(()) => revoked = true,
                    Err(e) => {
                        tracing::warn!(provider, error = %e, "revocation failed; the connection is deleted anyway")
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(provider, error = %e, "stored token unreadable; the connection is deleted anyway")
                }
            }
        }
    }
    db::audit::record_or_log(
        &state.db,
        AuditEvent::new(AuditKind::Disconnected)
            .user(user)
            .provider(provider)
            .detail(json!({ "revoked_upstream": revoked })),
    )
    .await;
    Ok(deleted)
}

/// Re-seals every stored token not sealed by the current key (the second
/// phase of a key rotation, so the old key can be retired). Each row is
/// locked while it changes. Returns how many connections were re-sealed.
pub async fn rekey_all(state: &ConnectionService) -> anyhow::Result<u64> {
    let current = state.keys.current_key_id().to_owned();
    let ids = db::connections::ids_not_sealed_by(&state.db, &current).await?;
    let mut done = 0;
    for id in ids {
        let mut tx = state.db.begin().await?;
        let Some(row) = db::connections::find_for_update(&mut *tx, id).await? else {
            continue;
        };
        // Sealed by a key this ring lacks: left as it is, and reported.
        if row.key_id == current || !state.keys.has_key(&row.key_id) {
            continue;
        }
        let ctx = |kind| context(row.id, row.user(), &row.provider, kind);
        let reseal = |bytes: &Vec<u8>, kind| {
            let sealed = Sealed {
                key_id: row.key_id.clone(),
                bytes: bytes.clone(),
            };
            state.keys.reseal(Purpose::Token, &ctx(kind), &sealed)
        };
        let access = reseal(&row.access_token, Kind::Access)
            .map_err(|e| anyhow::anyhow!("connection {id}: {e}"))?;
        let refresh = match &row.refresh_token {
            Some(bytes) => Some(
                reseal(bytes, Kind::Refresh)
                    .map_err(|e| anyhow::anyhow!("connection {id}: {e}"))?,
            ),
            None => None,
        };
        db::connections::store_refreshed(
            &mut *tx,
            id,
            &access.bytes,
            refresh.as_ref().map(|r| r.bytes.as_slice()),
            &access.key_id,
            row.access_token_expires_at,
        )
        .await?;
        tx.commit().await?;
        done += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refresh_margin_is_a_minute_or_half_the_lifetime_if_shorter() {
        let stored = Utc::now();
        let minutes = |m| stored + chrono::Duration::minutes(m);
        let seconds = |s| stored + chrono::Duration::seconds(s);
        assert_eq!(
            refresh_margin(stored, minutes(60)),
            chrono::Duration::seconds(60)
        );
        assert_eq!(
            refresh_margin(stored, seconds(30)),
            chrono::Duration::seconds(15)
        );
        // A token that was already expired when stored is refreshed at once.
        assert_eq!(
            refresh_margin(stored, seconds(-5)),
            chrono::Duration::zero()
        );
    }
}
