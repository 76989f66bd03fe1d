//! Disconnecting: the row locked (a refresh under way finishes first),
//! deleted with its webhook event, then its tokens revoked upstream where
//! the provider supports it, and the whole audited.

use secrecy::ExposeSecret;
use serde_json::json;
use uuid::Uuid;

use super::{
    REFRESH_LOCK_TIMEOUT,
    seal::{Kind, open},
};
use crate::{
    config::WebhookEvent,
    connect::{
        ConnectionService,
        outbox::{self, Detail},
    },
    db::{
        self,
        audit::{AuditEvent, AuditKind},
    },
    domain::{ProviderName, UserRef},
    providers::TokenHint,
};

/// Deletes the connection and revokes its tokens upstream (where the
/// provider supports RFC 7009). `false`: there was none.
///
/// The row is locked before it is read, so a refresh under way finishes
/// first and the tokens revoked are the last ones stored; once it is gone
/// nobody can refresh it again.
pub async fn disconnect(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
) -> anyhow::Result<bool> {
    disconnect_account(state, user, provider, None).await
}

/// [`disconnect`] of one account (`connection`); `None`: the only (or
/// oldest) one.
pub async fn disconnect_account(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
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
                        tracing::warn!(provider = %provider, error = %e, "revocation failed; the connection is deleted anyway")
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(provider = %provider, error = %e, "stored token unreadable; the connection is deleted anyway")
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
