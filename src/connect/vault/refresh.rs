//! Refreshing an access token before it expires: one refresh per
//! connection at a time across all instances. The instance that refreshes
//! first claims it, in a statement of its own (`db::refresh_claims`), then
//! locks the row and reads it again; the others wait, and the winner's new
//! tokens serve them. Should the winner's transaction be lost after the
//! provider answered, its row lock is gone but its claim is not: the
//! others go on waiting for the tokens it is still writing instead of
//! spending the refresh token the provider has rotated; and the claim and
//! the refresh run in a task of their own, so that a caller going away
//! drops neither a claim half-taken nor what the provider answered. A refresh the provider
//! refuses, or one without a refresh token, ends the same way: the
//! connection needs the user again ([`give_up`]).

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;
use serde_json::json;

use super::{
    REFRESH_LOCK_TIMEOUT,
    claim::{CLAIM_POLL, Claim, Taken},
    seal::{Kind, open, seal_bound},
    store::lifetime,
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
        connections::{ConnectionRow, ConnectionStatus},
    },
    metrics::Refresh,
    providers::{Provider, ProviderError},
};

/// Refresh when the access token expires within this long — or within half
/// its lifetime, if that is shorter: a provider issuing one-minute tokens
/// would otherwise be asked for a new one on every call.
const REFRESH_MARGIN: chrono::Duration = chrono::Duration::seconds(60);

/// By the database's clock, which wrote both times: as of the read.
pub(super) fn needs_refresh(row: &ConnectionRow) -> bool {
    row.access_token_expires_at
        .is_some_and(|at| at - refresh_margin(row.tokens_stored_at, at) <= row.read_at)
}

/// How long before `expires_at` a token stored at `stored_at` is refreshed.
fn refresh_margin(stored_at: DateTime<Utc>, expires_at: DateTime<Utc>) -> chrono::Duration {
    let half_life = (expires_at - stored_at) / 2;
    REFRESH_MARGIN.min(half_life.max(chrono::Duration::zero()))
}

/// How many database deadlines a refresh's tokens are tried again for
/// after their transaction was lost (the waits between tries double from
/// a quarter second to four): by default eighteen seconds, long enough for
/// a Postgres restart or failover, short enough that the call still
/// answers well within a client's patience.
pub(super) const KEEP_FOR_DEADLINES: u32 = 3;

/// Writes a refresh's tokens after the transaction that held the row was
/// lost (Postgres restarted, or the connection broke, while the provider
/// answered). The provider has issued them, and one that rotates refresh
/// tokens has retired the one the row still holds: dropped here, they
/// would leave the user to connect again. Tried again on fresh
/// connections while the failure is a passing one, and written only over
/// the row as it was read (nobody changed it since).
/// `aborted`: the transaction failed before the tokens were written in
/// it, by an error of any kind; they are written without it all the same.
async fn keep_after_lost_transaction(
    state: &ConnectionService,
    row: &ConnectionRow,
    refreshed: db::connections::RefreshedTokens<'_>,
    lost: anyhow::Error,
    aborted: bool,
) -> anyhow::Result<db::connections::Refreshed> {
    let transient = lost
        .downcast_ref::<sqlx::Error>()
        .is_some_and(db::faults::is_transient);
    if !aborted && !transient {
        return Err(lost);
    }
    tracing::warn!(connection = %row.id, error = %lost, "writing refreshed tokens failed; trying again");
    let until = std::time::Instant::now() + state.settings.database.deadline() * KEEP_FOR_DEADLINES;
    let mut wait = std::time::Duration::from_millis(250);
    let mut last = lost;
    loop {
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(4));
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let attempt = db::faults::deadline(
            state.settings.database.deadline().min(left),
            db::connections::store_refreshed_if_current(
                &state.db,
                row.id,
                &row.access_token,
                refreshed,
            ),
        )
        .await;
        match attempt {
            Ok(Some(written)) => {
                tracing::info!(connection = %row.id, "refreshed tokens written on a second try");
                return Ok(written);
            }
            Ok(None) => {
                anyhow::bail!(
                    "connection {} changed while its refreshed tokens were written",
                    row.id
                )
            }
            Err(e) if db::faults::is_transient(&e) => last = e.into(),
            Err(e) => return Err(e.into()),
        }
    }
    tracing::error!(
        connection = %row.id,
        error = %last,
        "refreshed tokens could not be written; the user may have to connect again"
    );
    Err(last)
}

/// Why a connection's tokens are refreshed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// The access token expires soon (`needs_refresh`).
    Expiring,
    /// The provider refused the access token before its time.
    Refused,
}

/// Refreshes under this instance's claim and the row lock. `None`: the
/// provider refused the refresh token (the user must connect again).
pub(super) async fn refresh(
    state: &ConnectionService,
    stale: &ConnectionRow,
    provider: &Provider,
    why: Why,
) -> anyhow::Result<Option<ConnectionRow>> {
    let limit = state.settings.database.deadline();
    let waiting_ends = tokio::time::Instant::now() + REFRESH_LOCK_TIMEOUT;
    loop {
        // A turn to refresh (`ConnectionService::refreshes`), held while
        // claiming and refreshing, not while another instance is waited
        // for. Waiting for a turn holds nothing; a turn is as long as a
        // refresh may wait for the row.
        let turn = state.refreshes.clone().acquire_owned();
        let turn = tokio::time::timeout(REFRESH_LOCK_TIMEOUT, turn)
            .await
            .map_err(|_| super::NoTurnInTime::new())?
            .map_err(|closed| anyhow::anyhow!("refreshes closed: {closed}"))?;
        if let Attempt::Ended(row) = claim_and_refresh(state, turn, stale, provider, why).await? {
            return Ok(row);
        }
        // Another instance is refreshing, or still writing what the
        // provider answered after its transaction was lost: its tokens
        // will come, and asking again would spend a refresh token the
        // provider may have rotated.
        let read =
            db::connections::find_account(&state.db, stale.user(), &stale.provider, Some(stale.id));
        let Some(row) = db::faults::deadline(limit, read).await? else {
            return Ok(None);
        };
        if row.status != ConnectionStatus::Active {
            return Ok(None);
        }
        if refreshed_meanwhile(&row, stale, why) {
            return Ok(Some(row));
        }
        if tokio::time::Instant::now() + CLAIM_POLL >= waiting_ends {
            let valid = !row.access_token_expired();
            tracing::warn!(connection = %stale.id, valid, "another instance's refresh did not end in time");
            // Refreshed ahead of its expiry, the token still serves.
            if why == Why::Expiring && valid {
                return Ok(Some(row));
            }
            return Err(db::faults::timed_out().into());
        }
        tokio::time::sleep(CLAIM_POLL).await;
    }
}

/// What one try at a connection's refresh came to.
#[allow(
    clippy::large_enum_variant,
    reason = "one per try at a refresh, moved out once"
)]
enum Attempt {
    /// Refreshed, or found refreshed (`Some`); the user must connect again
    /// (`None`).
    Ended(Option<ConnectionRow>),
    /// Another claim holds the refresh.
    Elsewhere,
}

/// Claims the refresh and, with the claim, refreshes — in a task of its
/// own ([`ConnectionService::run_to_the_end`]), the claim included: a
/// caller that goes away (a cancelled tool call, a request past its
/// deadline) must not drop what the provider answers, as a provider that
/// rotates refresh tokens has retired the stored one, nor a claim
/// statement half-way (sent, it may commit after the release meant for
/// it, and hold every instance's refresh until it expires). The claim is
/// taken holding no connection (a refresh holds one pooled connection at a
/// time); the turn and the claim end with the task.
async fn claim_and_refresh(
    state: &ConnectionService,
    turn: tokio::sync::OwnedSemaphorePermit,
    stale: &ConnectionRow,
    provider: &Provider,
    why: Why,
) -> anyhow::Result<Attempt> {
    let (stale, name) = (stale.clone(), provider.name().clone());
    state
        .to_the_end_of("a refresh", |service| async move {
            let claim = match Claim::take(&service, stale.id).await? {
                Taken::Claim(claim) => claim,
                Taken::Gone => return Ok(Attempt::Ended(None)),
                Taken::Elsewhere => return Ok(Attempt::Elsewhere),
            };
            let refreshed = match service.providers.get(&name) {
                Some(provider) => refresh_locked(&service, &stale, provider, why).await,
                None => Err(anyhow::anyhow!("provider {name} is not configured")),
            };
            claim.release().await;
            drop(turn);
            refreshed.map(Attempt::Ended)
        })
        .await
}

/// Whether `row` holds tokens newer than `stale`'s, for `why`.
fn refreshed_meanwhile(row: &ConnectionRow, stale: &ConnectionRow, why: Why) -> bool {
    match why {
        Why::Expiring => !needs_refresh(row),
        Why::Refused => row.access_token != stale.access_token,
    }
}

/// Under the claim: locks the row, and refreshes unless someone did
/// meanwhile (an older release, which takes no claim, or a refresh that
/// ended just before the claim was taken).
async fn refresh_locked(
    state: &ConnectionService,
    stale: &ConnectionRow,
    provider: &Provider,
    why: Why,
) -> anyhow::Result<Option<ConnectionRow>> {
    let limit = state.settings.database.deadline();
    let mut tx = begin(state).await?;
    let locked = db::connections::find_for_update(&mut *tx, stale.id);
    let Some(row) = db::faults::deadline(REFRESH_LOCK_TIMEOUT + limit, locked).await? else {
        return Ok(None);
    };
    if row.status != ConnectionStatus::Active {
        return Ok(None);
    }
    if refreshed_meanwhile(&row, stale, why) {
        return Ok(Some(row));
    }
    // Re-sealed meanwhile (`tokens rekey` on an instance that has a new
    // key first): not this instance's to open, as when a call's first read
    // finds it so (retryable), rather than a failure to open it.
    if !state.keys.has_key(&row.key_id) {
        return Err(crate::connect::stale_keys::KeyMissing::of(&row).into());
    }
    refresh_claimed(state, tx, row, provider).await
}

/// The transaction a refresh locks its row in, within the database's
/// deadline (a frozen Postgres cancels nothing by itself: `db::faults`).
async fn begin(
    state: &ConnectionService,
) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
    db::faults::deadline(state.settings.database.deadline(), async {
        let mut tx = crate::db::transaction::begin(&state.db).await?;
        // Another instance refreshing a slow provider must not pin us forever.
        db::transaction::set_lock_timeout(&mut *tx, REFRESH_LOCK_TIMEOUT).await?;
        Ok(tx)
    })
    .await
}

/// The refresh itself, under the row lock of `tx` and this instance's
/// claim: asks the provider and stores what it answered.
async fn refresh_claimed(
    state: &ConnectionService,
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    row: ConnectionRow,
    provider: &Provider,
) -> anyhow::Result<Option<ConnectionRow>> {
    let limit = state.settings.database.deadline();
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
            // The provider has answered: whatever fails from here, its
            // tokens are written (below, or after a lost transaction), as
            // the one that rotates refresh tokens has retired ours.
            let relearned = db::faults::deadline(
                limit,
                relearned(&mut tx, &row, refreshed.params, &refreshed.refused),
            )
            .await;
            let (params, aborted) = match relearned {
                Ok(params) => (params, None),
                Err(e) => {
                    tracing::warn!(connection = %row.id, error = %e, "the parameters a refresh answer named could not be written; the stored ones are kept");
                    (row.params.0.clone(), Some(e))
                }
            };
            let bound = (row.id, row.user(), &row.provider);
            let access = seal_bound(state, bound, Kind::Access, &tokens.access_token)?;
            // Providers that do not rotate refresh tokens send none back: keep ours.
            let new_refresh = tokens.refresh_token.as_ref().unwrap_or(&refresh_token);
            let refresh = seal_bound(state, bound, Kind::Refresh, new_refresh)?;
            // Counted from the provider's answer, by the database's clock
            // when the tokens are written (`Lifetime`).
            let refreshed = db::connections::RefreshedTokens {
                access_token: &access.bytes,
                refresh_token: Some(&refresh.bytes),
                key_id: &access.key_id,
                expires_in: lifetime(&tokens),
            };
            let in_aborted_transaction = aborted.is_some();
            let written = match aborted {
                // The transaction failed with the parameters: the tokens
                // are written without it, below (it rolls back as it goes).
                Some(e) => {
                    drop(tx);
                    Err(e)
                }
                None => db::faults::deadline(limit, async {
                    let written =
                        db::connections::store_refreshed(&mut *tx, row.id, refreshed).await?;
                    tx.commit().await?;
                    Ok::<_, sqlx::Error>(written)
                })
                .await
                .map_err(anyhow::Error::from),
            };
            let written = match written {
                Ok(written) => written,
                Err(lost) => {
                    keep_after_lost_transaction(
                        state,
                        &row,
                        refreshed,
                        lost,
                        in_aborted_transaction,
                    )
                    .await?
                }
            };
            audit_refresh(state, &row, AuditKind::Refreshed, json!({})).await;
            Ok(Some(ConnectionRow {
                access_token: access.bytes,
                refresh_token: Some(refresh.bytes),
                key_id: access.key_id,
                access_token_expires_at: written.access_token_expires_at,
                tokens_stored_at: written.tokens_stored_at,
                read_at: written.read_at,
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
            // The provider's error stays in the chain: the caller tells a
            // token endpoint that failed from a database that did.
            Err(anyhow::Error::new(e)
                .context(format!("refreshing the {} token failed", row.provider)))
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
/// (marked in `tx`, committed within the database's deadline), and the
/// failure is audited with `reason` — under a deadline of its own, so that
/// a commit that took most of the first still leaves its audit row and
/// its log line.
async fn give_up(
    state: &ConnectionService,
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    row: &ConnectionRow,
    reason: &'static str,
) -> anyhow::Result<()> {
    let marked = async {
        db::connections::set_status(&mut *tx, row.id, ConnectionStatus::NeedsReauth).await?;
        for event in [
            WebhookEvent::ConnectionRefreshFailed,
            WebhookEvent::ConnectionReauthRequired,
        ] {
            outbox::record(state, &mut tx, event, row.id, Detail::Reason(reason)).await?;
        }
        tx.commit().await?;
        anyhow::Ok(())
    };
    db::faults::deadline(state.settings.database.deadline(), marked).await?;
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
        state.settings.database.deadline(),
        AuditEvent::new(kind)
            .user(row.user())
            .provider(&row.provider)
            .detail(detail),
    )
    .await;
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
