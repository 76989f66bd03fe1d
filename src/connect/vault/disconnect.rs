//! Disconnecting: the row locked (a refresh under way finishes first),
//! deleted with its webhook event, then its tokens revoked upstream where
//! the provider supports it, and the whole audited.

use serde_json::json;
use uuid::Uuid;

use super::REFRESH_LOCK_TIMEOUT;
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
};

/// Deletes the connection and revokes its tokens upstream (where the
/// provider offers revocation). `false`: there was none.
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
    let mut tx = crate::db::transaction::begin(&state.db).await?;
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
    let revoked = match state.providers.get(provider) {
        Some(p) if p.supports_revocation() => super::revoke::upstream(state, &row, p).await,
        _ => false,
    };
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
