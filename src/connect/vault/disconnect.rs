//! Disconnecting: the row locked (a refresh under way finishes first),
//! deleted with its webhook event, its audit row and — where the provider
//! supports revocation — the revocation it is owed, all in one
//! transaction; then the revocation tried at once ([`super::owed`]: a
//! failed one is tried again later, by any instance).

use serde_json::json;
use uuid::Uuid;

use super::{
    REFRESH_LOCK_TIMEOUT,
    claim::{Held, hold_refreshes},
    owed::{FIRST_TRY_GRACE, Outcome, Try},
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
        pending_revocations::PendingRevocation,
    },
    domain::{ProviderName, UserRef},
};

/// What the provider was told when a connection was deleted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revocation {
    /// The provider accepted the revocation: the grant has ended there.
    Revoked,
    /// The provider offers no revocation: its tokens end when they expire,
    /// or when the user removes the access at the provider.
    NotOffered,
    /// The provider offers revocation but refused it or could not be
    /// reached: the access may still be live there. It is tried again for
    /// `revocation.retry_hours`.
    Retrying,
    /// The provider offers revocation, but it cannot be done from here
    /// (the tokens do not open, or were dropped with a forgotten key): the
    /// access may still be live there.
    Failed,
    /// Not revoked, on purpose: the same account is also connected here
    /// (by someone else, or by this person since), and at this provider
    /// revoking would end that connection too. The access stays live
    /// there for it.
    Shared,
}

/// Deletes the connection and revokes its tokens upstream (where the
/// provider offers revocation). `false`: there was none.
///
/// The connection's refresh is claimed and its row locked before it is
/// read, so a refresh under way finishes first and the tokens revoked are
/// the last ones stored; once it is gone nobody can refresh it again.
pub async fn disconnect(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
) -> anyhow::Result<bool> {
    Ok(disconnect_account(state, user, provider, None)
        .await?
        .is_some())
}

/// [`disconnect`] of one account (`connection`); `None`: the only (or
/// oldest) one. What the provider was told, or `None`: there was none.
///
/// Runs in a task of its own ([`ConnectionService::run_to_the_end`]):
/// once the row is deleted, the revocation and the audit row must follow,
/// whatever becomes of the page or call that asked (its time limit, a
/// browser gone), and the wait for a refresh under way may be long.
pub async fn disconnect_account(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
    connection: Option<Uuid>,
) -> anyhow::Result<Option<Revocation>> {
    let (issuer, subject) = (user.issuer().to_owned(), user.subject().to_owned());
    let provider = provider.clone();
    state
        .to_the_end_of("a disconnect", |service| async move {
            let user = UserRef::new(&issuer, &subject);
            let disconnected = disconnect_now(&service, user, &provider, connection).await;
            // Told here too: the page that asked may have stopped waiting.
            // A stopping server ends the wait for a claim on purpose.
            match &disconnected {
                Err(e) if service.is_stopping() => {
                    tracing::info!(provider = %provider, error = %format!("{e:#}"), "a disconnect ended with the server's stop");
                }
                Err(e) => {
                    tracing::warn!(provider = %provider, error = %format!("{e:#}"), "a disconnect failed");
                }
                Ok(_) => {}
            }
            disconnected
        })
        .await
}

/// [`disconnect_account`], in the task that runs it.
async fn disconnect_now(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &ProviderName,
    connection: Option<Uuid>,
) -> anyhow::Result<Option<Revocation>> {
    let limit = state.settings.database.deadline();
    let find = db::connections::find_account(&state.db, user, provider, connection);
    let Some(found) = db::faults::deadline(limit, find).await? else {
        return Ok(None);
    };
    // A refresh still writing the tokens the provider answered after its
    // transaction was lost holds no row lock, only its claim: the tokens
    // revoked must be the ones it writes, not those it replaces.
    let claim = match hold_refreshes(state, found.id).await? {
        Held::Claim(claim) => Some(claim),
        Held::Gone => return Ok(None),
        Held::Unclaimed => None,
    };
    // A frozen database cancels nothing by itself (`db::faults`): the
    // whole transaction, its wait for a refresh's row lock included, ends
    // in bounded time. One cut off before its commit changed nothing (the
    // disconnect may be asked again); one whose commit was sent left the
    // revocation owed with the row gone, for a later sweep.
    let deleted =
        db::faults::deadline(REFRESH_LOCK_TIMEOUT + limit, delete_locked(state, found.id)).await;
    // Deleted with the row; released all the same on every other ending
    // (a command may exit before a release left to the background runs).
    if let Some(claim) = claim {
        claim.release().await;
    }
    let Some(deleted) = deleted? else {
        return Ok(None);
    };
    Ok(Some(match deleted {
        Deleted::Owed(owed) => match super::owed::attempt(state, &owed, Try::First).await {
            Outcome::Revoked => Revocation::Revoked,
            Outcome::Retrying => Revocation::Retrying,
            Outcome::GivenUp => Revocation::Failed,
            Outcome::Spared => Revocation::Shared,
        },
        Deleted::NotOffered => Revocation::NotOffered,
        Deleted::TokensGone => Revocation::Failed,
    }))
}

/// What a deleted connection's revocation is.
enum Deleted {
    /// Owed, to be tried now.
    Owed(Box<PendingRevocation>),
    /// The provider (as configured here) offers none.
    NotOffered,
    /// The row held no tokens any more (dropped with a forgotten key).
    TokensGone,
}

/// Deletes connection `id` under its row lock, with its webhook event,
/// its `disconnected` audit row and the revocation it is owed; `None`: it
/// was gone. Whatever becomes of this instance after the commit, the
/// record and the revocation are there.
async fn delete_locked(state: &ConnectionService, id: Uuid) -> anyhow::Result<Option<Deleted>> {
    let mut tx = crate::db::transaction::begin(&state.db).await?;
    // As long as a refresh may take, and no longer.
    db::transaction::set_lock_timeout(&mut *tx, REFRESH_LOCK_TIMEOUT).await?;
    let Some(row) = db::connections::find_for_update(&mut *tx, id).await? else {
        return Ok(None);
    };
    // A provider this instance's configuration lacks (`users remove` run
    // with part of it, a rolling change) may offer revocation elsewhere:
    // owed all the same, and left to the instances that have it.
    let offered = state
        .providers
        .get(&row.provider)
        .is_none_or(|p| p.supports_revocation());
    // Copied before the row goes: the tokens stay sealed as they were.
    let deleted = if !offered {
        Deleted::NotOffered
    } else {
        match db::pending_revocations::owe_for_connection(&mut *tx, row.id, FIRST_TRY_GRACE).await?
        {
            Some(owed) => Deleted::Owed(Box::new(owed)),
            None => Deleted::TokensGone,
        }
    };
    outbox::record(
        state,
        &mut tx,
        WebhookEvent::ConnectionDeleted,
        row.id,
        Detail::None,
    )
    .await?;
    if !db::connections::delete(&mut *tx, row.id).await? {
        return Ok(None);
    }
    // Which of the person's accounts at the provider went, named as the
    // `connected` row named it (the label, which may be an address the
    // person chose to show, is left out as it is there). What the
    // provider answers is audited apart, when it answers.
    let revocation = match &deleted {
        Deleted::Owed(_) => "pending",
        Deleted::NotOffered => "not_offered",
        Deleted::TokensGone => "tokens_gone",
    };
    let detail = json!({
        "connection_id": row.id,
        "account_id": row.account_id,
        "revocation": revocation,
    });
    db::audit::record(
        &mut *tx,
        AuditEvent::new(AuditKind::Disconnected)
            .user(row.user())
            .provider(&row.provider)
            .detail(detail),
    )
    .await?;
    tx.commit().await?;
    Ok(Some(deleted))
}
