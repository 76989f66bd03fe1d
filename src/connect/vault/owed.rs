//! Revocations still owed (`pending_revocations`): written before anyone
//! calls the provider — in the disconnect's own transaction, or as a
//! connect gives up the tokens it was issued — then tried at once, and
//! tried again by every instance (it looks every
//! `revocation.retry_every_secs`) with a growing wait, until the
//! provider has ended the grant or `revocation.retry_hours` have passed.
//! A grant left live at a provider down for an afternoon, or by an
//! instance killed right after the commit, still ends. Each ending is
//! audited: `revoked_upstream`, or `revocation_abandoned` with why.

use super::revoke::{self, Attempt};
use crate::{
    connect::ConnectionService,
    db::{
        self,
        audit::{AuditEvent, AuditKind},
        faults,
        pending_revocations::{self as owed, GrantHolder, PendingRevocation},
    },
    metrics::RevocationAttempt,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A revocation written is first due this long after: the instance that
/// wrote it tries at once, and another instance must not call
/// the provider meanwhile. Longer than an attempt takes (two tokens, a
/// few tries within seconds each, a refresh first where only a live
/// access token revokes, GitHub's check of a token after its 422).
pub(super) const FIRST_TRY_GRACE: chrono::Duration = chrono::Duration::minutes(2);

/// A claimed revocation is left by the others this long: as long as an
/// attempt may take, many times over. One whose instance died while it
/// tried is due again after it.
const LEASE: chrono::Duration = chrono::Duration::minutes(10);

/// The wait after the first failed attempt; it doubles with each one
/// after, up to [`LONGEST_WAIT`].
const FIRST_WAIT: chrono::Duration = chrono::Duration::minutes(1);
const LONGEST_WAIT: chrono::Duration = chrono::Duration::hours(4);

/// Revocations claimed per statement, one at a time: each is leased
/// alone, so a slow provider holds up no other row's lease.
const CLAIM: i64 = 1;

/// Attempts a pass runs at once: a provider that hangs until its
/// timeouts (a refresh and two tokens, tens of seconds) holds up one of
/// them, not every revocation owed to the providers that answer.
const AT_ONCE: usize = 4;

/// How a pass's retries share their time: they stop claiming after this
/// long, and the next pass goes on.
const PASS_BUDGET: std::time::Duration = std::time::Duration::from_secs(60);

/// What became of one attempt at a revocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The provider has ended the grant.
    Revoked,
    /// It failed; it is tried again later.
    Retrying,
    /// Given up: it cannot be done (the tokens do not open, the provider
    /// offers no revocation) or the retry window is over.
    GivenUp,
    /// Not done, on purpose: the same account is also connected here
    /// (by another person, or by this one since), and revoking would end
    /// that connection too (audited as given up: `account_shared`,
    /// `connected_again`).
    Spared,
}

/// How long to wait after `failed` attempts have failed.
pub(super) fn wait_after(failed: i32) -> chrono::Duration {
    let doublings = u32::try_from(failed.saturating_sub(1)).unwrap_or(0).min(16);
    FIRST_WAIT
        .checked_mul(1 << doublings)
        .unwrap_or(LONGEST_WAIT)
        .min(LONGEST_WAIT)
}

/// Which attempt at a revocation owed this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Try {
    /// Right after its row was written: its failure is audited (later
    /// ones only when they end it).
    First,
    /// Right after a write whose outcome is unknown: the row may not
    /// exist, so nothing may be left for a later try to do.
    FirstUnsure,
    /// A later try, of a row claimed.
    Again,
}

/// Tries revocation `row` once, and records what came of it: the row goes
/// when the grant ended (or when it is given up), or waits for its next
/// try.
pub(super) async fn attempt(
    state: &ConnectionService,
    row: &PendingRevocation,
    attempt: Try,
) -> Outcome {
    counted(state, attempt_uncounted(state, row, attempt).await)
}

/// [`attempt`], before its ending is counted for `/metrics`.
async fn attempt_uncounted(
    state: &ConnectionService,
    row: &PendingRevocation,
    attempt: Try,
) -> Outcome {
    let first = attempt != Try::Again;
    let retry_for = state.settings.revocation.retry_for();
    if !first && row.created_at + retry_for <= row.read_at {
        return give_up(state, row, "retry_window_over").await;
    }
    // The provider, as configured here, offers no revocation: nothing to
    // try (a row owed while an instance lacked the provider).
    if let Some(p) = state.providers.get(&row.provider)
        && !p.supports_revocation()
    {
        return give_up(state, row, "not_offered").await;
    }
    match holder(state, row).await {
        Ok(holder) => {
            if let Some(why) = spared_because(holder) {
                give_up(state, row, why).await;
                return Outcome::Spared;
            }
        }
        // Where the row may not have been written, this try is the only
        // one: a grant left live is worse than a shared one ended (its
        // holder connects again). Otherwise the row waits for a database
        // that answers (a first try's after its grace).
        Err(e) if attempt == Try::FirstUnsure => {
            tracing::warn!(revocation = %row.id, error = %e, "cannot check whether another connection shares the grant; revoking all the same");
        }
        Err(e) => {
            tracing::warn!(revocation = %row.id, error = %e, "cannot check whether another connection shares the grant; tried later");
            return Outcome::Retrying;
        }
    }
    // Not this instance's to try, but maybe another's: during a rolling
    // change of the configuration or of the keys, the instance that owes
    // it may have what this one lacks. Counted as a failed attempt, so
    // the window still ends it; `tokens forget-key` ends those of a key
    // gone for good at once.
    let attempted = match state.providers.get(&row.provider) {
        Some(p) if p.supports_revocation() && state.keys.has_key(&row.key_id) => {
            revoke::upstream(state, row, p).await
        }
        Some(p) if p.supports_revocation() => Attempt::Failed(format!(
            "sealed by key {} not on this instance's ring",
            crate::crypto::printable_prefix(&row.key_id)
        )),
        _ => Attempt::Failed("the provider's revocation is not configured on this instance".into()),
    };
    match attempted {
        Attempt::Ended { already } => {
            let attempts = row.attempts.saturating_add(1);
            let detail = ended_detail(attempts, already);
            settle(state, row, AuditKind::RevokedUpstream, detail).await;
            Outcome::Revoked
        }
        Attempt::Hopeless(why) => give_up(state, row, why).await,
        Attempt::Failed(error) => {
            let failed = row.attempts.saturating_add(1);
            let wait = wait_after(failed);
            let step = owed::failed(&state.db, row, wait, &error);
            let recorded = match faults::deadline(state.settings.database.deadline(), step).await {
                Ok(recorded) => recorded,
                // Still owed: due again when its lease (or first grace) ends.
                Err(e) => {
                    tracing::warn!(revocation = %row.id, error = %e, "cannot record a failed revocation; it is tried again later");
                    true
                }
            };
            if !recorded {
                // Settled meanwhile, or taken up by another attempt after
                // this one's lease ran out: theirs is the record, and the
                // audit row of any ending.
                tracing::warn!(revocation = %row.id, "a failed revocation attempt outlived its lease; the row was settled or taken up by another attempt, whose record stands");
                return Outcome::Retrying;
            }
            if first {
                let extra = json!({
                    "retry_hours": state.settings.revocation.retry_hours,
                    "error": error,
                });
                let failed = event(row, AuditKind::RevocationFailed).detail(detail(row, extra));
                db::audit::record_or_log(&state.db, state.settings.database.deadline(), failed)
                    .await;
            }
            Outcome::Retrying
        }
    }
}

/// The detail of a `revoked_upstream` row, after `attempts`: with
/// `already_ended` where nothing was left live to revoke, and why.
fn ended_detail(attempts: i32, already: Option<&'static str>) -> serde_json::Value {
    match already {
        Some(why) => json!({ "attempts": attempts, "already_ended": why }),
        None => json!({ "attempts": attempts }),
    }
}

/// Who here holds tokens that may be of `row`'s grant, at a provider
/// whose revocation may end the whole grant (always `Nobody` elsewhere).
/// Someone else who connected the same account (a shared mailbox), or
/// this person, connected again since (a reconnect after the disconnect,
/// a connect after the one refused for the limit): revoking these tokens
/// would end that connection too, as `flows` refuses to do for tokens it
/// does not store. (A connect made while the call is under way is not
/// seen.)
async fn holder(
    state: &ConnectionService,
    row: &PendingRevocation,
) -> Result<GrantHolder, sqlx::Error> {
    let may_end_the_grant = state
        .providers
        .get(&row.provider)
        .is_some_and(|p| p.revocation_may_end_the_grant());
    if !may_end_the_grant {
        return Ok(GrantHolder::Nobody);
    }
    let holder = owed::grant_holder(&state.db, row);
    faults::deadline(state.settings.database.deadline(), holder).await
}

/// Why tokens of a grant someone here holds are spared (the reason
/// `revocation_abandoned` is audited with); `None`: nobody here holds it.
fn spared_because(holder: GrantHolder) -> Option<&'static str> {
    match holder {
        GrantHolder::Nobody => None,
        GrantHolder::ThisPerson => Some("connected_again"),
        GrantHolder::AnotherPerson => Some("account_shared"),
    }
}

/// Tries revocation `row` once where its row could not be written:
/// nothing is left to try it again, so whatever comes of it is its end,
/// audited as such (`revoked_upstream`, or `revocation_abandoned` with
/// `not_recorded`).
pub(super) async fn attempt_unrecorded(
    state: &ConnectionService,
    row: &PendingRevocation,
) -> Outcome {
    // Tokens of a grant someone here holds are spared, as in `attempt`;
    // where that cannot be read, this try is the only one there is.
    if let Some(why) = holder(state, row).await.ok().and_then(spared_because) {
        let extra = json!({ "reason": why, "attempts": 0 });
        let event = event(row, AuditKind::RevocationAbandoned).detail(detail(row, extra));
        db::audit::record_or_log(&state.db, state.settings.database.deadline(), event).await;
        return counted(state, Outcome::Spared);
    }
    let attempted = match state.providers.get(&row.provider) {
        Some(p) if p.supports_revocation() => revoke::upstream(state, row, p).await,
        _ => Attempt::Failed("the provider's revocation is not configured on this instance".into()),
    };
    let (kind, extra, outcome) = match attempted {
        Attempt::Ended { already } => (
            AuditKind::RevokedUpstream,
            ended_detail(1, already),
            Outcome::Revoked,
        ),
        Attempt::Failed(error) => (
            AuditKind::RevocationAbandoned,
            json!({ "reason": "not_recorded", "attempts": 1, "last_error": error }),
            Outcome::GivenUp,
        ),
        Attempt::Hopeless(why) => (
            AuditKind::RevocationAbandoned,
            json!({ "reason": why, "attempts": 1 }),
            Outcome::GivenUp,
        ),
    };
    if outcome == Outcome::GivenUp {
        tracing::warn!(provider = %row.provider, revocation = %row.id, "a revocation that could not be recorded failed; the access may stay live at the provider until its tokens expire");
    }
    db::audit::record_or_log(
        &state.db,
        state.settings.database.deadline(),
        event(row, kind).detail(detail(row, extra)),
    )
    .await;
    counted(state, outcome)
}

/// Every `revocation.retry_every_secs` (a minute by default) until
/// `stop` is cancelled or the server begins to stop, tries the
/// revocations owed that are due ([`retry_due`]); counts them for
/// `/metrics` at once first. Stopping, it claims no more; the attempts
/// under way run to their end, and the stopping server waits for them.
pub fn start_retrying(state: std::sync::Arc<ConnectionService>, stop: CancellationToken) {
    let every = state.settings.revocation.retry_every();
    tokio::spawn(async move {
        // Either ends the sweep; polled once to its end at most.
        let stopping = state.shutdown.clone();
        let stopped = async {
            tokio::select! {
                () = stop.cancelled() => {}
                () = stopping.cancelled() => {}
            }
        };
        tokio::pin!(stopped);
        tokio::select! {
            () = &mut stopped => return,
            () = count_owed(&state) => {}
        }
        loop {
            tokio::select! {
                () = &mut stopped => return,
                () = tokio::time::sleep(every) => {}
            }
            let retried = tokio::select! {
                () = &mut stopped => return,
                retried = retry_due(&state) => retried,
            };
            match retried {
                Ok(0) => {}
                Ok(tried) => tracing::info!(tried, "revocations still owed tried again"),
                Err(e) => {
                    tracing::warn!(error = %e, "revocations still owed not tried; will try again")
                }
            }
        }
    });
}

/// Tries the revocations due now, each claimed alone and four at
/// a time, until none is due or a minute has passed (the attempts under
/// way end; the next pass goes on), then counts those still owed for
/// `/metrics`. How many were tried. Every instance runs this: a claim
/// moves the row out of the others' reach first. Each attempt runs to its
/// end in a task of its own ([`ConnectionService::run_to_the_end`]),
/// should this be dropped.
pub async fn retry_due(state: &ConnectionService) -> Result<u64, sqlx::Error> {
    use futures::StreamExt as _;
    let started = std::time::Instant::now();
    let mut under_way = futures::stream::FuturesUnordered::new();
    let mut all_claimed = false;
    let mut tried = 0;
    loop {
        while !all_claimed && under_way.len() < AT_ONCE && started.elapsed() < PASS_BUDGET {
            let claim = owed::claim_due(&state.db, LEASE, CLAIM);
            let claim = faults::deadline(state.settings.database.deadline(), claim);
            tokio::pin!(claim);
            // The attempts under way go on while the claim waits: a
            // provider's answer left unread would time out.
            let claimed = loop {
                tokio::select! {
                    claimed = &mut claim => break claimed,
                    Some(()) = under_way.next() => tried += 1,
                }
            };
            let claimed = match claimed {
                Ok(claimed) => claimed,
                // Those under way end first; theirs are leased.
                Err(e) if !under_way.is_empty() => {
                    tracing::warn!(error = %e, "cannot claim revocations owed; the next pass goes on");
                    all_claimed = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if claimed.is_empty() {
                all_claimed = true;
            }
            for row in claimed {
                // To its end, whoever waits: the provider may act on a
                // request whose answer nobody reads (a refresh before the
                // revocation rotates the refresh token), and a sweep
                // dropped where it stands (the server stopping) would lose
                // what it answers.
                under_way.push(async move {
                    let attempted =
                        state.to_the_end_of("a revocation's attempt", |this| async move {
                            attempt(&this, &row, Try::Again).await;
                            Ok(())
                        });
                    if let Err(e) = attempted.await {
                        tracing::error!(error = %e, "a revocation's attempt did not end");
                    }
                });
            }
        }
        match under_way.next().await {
            Some(_) => tried += 1,
            None => break,
        }
    }
    count_owed(state).await;
    Ok(tried)
}

/// Counts the revocations owed, over every instance, for `/metrics`.
async fn count_owed(state: &ConnectionService) {
    let owed = faults::deadline(state.settings.database.deadline(), owed::count(&state.db));
    match owed.await {
        Ok(n) => state
            .metrics
            .revocations
            .set_owed(u64::try_from(n).unwrap_or_default()),
        // The gauge keeps its last count; the next pass counts again.
        Err(e) => tracing::warn!(error = %e, "cannot count the revocations owed"),
    }
}

/// The revocation is done with: its row deleted and `kind` audited (what
/// names the revocation, and `extra`), in one transaction, unless another
/// instance was done with it first (its row is gone, and the audit row
/// is that instance's to write).
async fn settle(
    state: &ConnectionService,
    row: &PendingRevocation,
    kind: AuditKind,
    extra: serde_json::Value,
) {
    let settled = async {
        let mut tx = db::transaction::begin(&state.db).await?;
        if owed::settle(&mut *tx, row.id).await? {
            db::audit::record(&mut *tx, event(row, kind).detail(detail(row, extra))).await?;
        }
        tx.commit().await
    };
    if let Err(e) = faults::deadline(state.settings.database.deadline(), settled).await {
        // Left owed: tried again after its lease, which the provider
        // answers as done (RFC 7009 §2.2: an invalid token is no error).
        tracing::warn!(revocation = %row.id, error = %e, "cannot record the end of a revocation; it is tried again later");
    }
}

/// Stops trying revocation `row`, saying `why`; the access may stay live
/// at the provider until its tokens expire or the person removes it there.
async fn give_up(state: &ConnectionService, row: &PendingRevocation, why: &'static str) -> Outcome {
    tracing::warn!(
        provider = %row.provider,
        revocation = %row.id,
        attempts = row.attempts,
        reason = why,
        "a revocation is given up; the access may stay live at the provider until its tokens expire"
    );
    let detail = json!({
        "reason": why,
        "attempts": row.attempts,
        "last_error": row.last_error,
    });
    settle(state, row, AuditKind::RevocationAbandoned, detail).await;
    Outcome::GivenUp
}

/// An audit event about `row`'s person and provider.
fn event(row: &PendingRevocation, kind: AuditKind) -> AuditEvent<'_> {
    AuditEvent::new(kind)
        .user(row.user())
        .provider(row.provider.as_str())
}

/// An audit row's detail about revocation `row`: what names it (the
/// deleted connection, the account, why it was owed), then `extra`'s
/// fields (what came of it).
fn detail(row: &PendingRevocation, extra: serde_json::Value) -> serde_json::Value {
    let mut detail = serde_json::Map::new();
    detail.insert("connection_id".into(), json!(row.id));
    detail.insert("account_id".into(), json!(row.account_id));
    detail.insert("origin".into(), json!(row.origin.as_str()));
    if let serde_json::Value::Object(extra) = extra {
        detail.extend(extra);
    }
    serde_json::Value::Object(detail)
}

/// Counts how an attempt ended, for `/metrics`.
fn counted(state: &ConnectionService, outcome: Outcome) -> Outcome {
    state.metrics.revocations.attempt(match outcome {
        Outcome::Revoked => RevocationAttempt::Revoked,
        Outcome::Retrying => RevocationAttempt::Retrying,
        Outcome::GivenUp | Outcome::Spared => RevocationAttempt::Abandoned,
    });
    outcome
}

/// The revocations still owed that a key forgotten for good sealed,
/// dropped, each audited as given up: nothing can open them any more.
/// How many.
pub(crate) async fn forget_key(state: &ConnectionService, key_id: &str) -> anyhow::Result<u64> {
    let mut tx = db::transaction::begin(&state.db).await?;
    let dropped = owed::drop_sealed_by(&mut *tx, key_id).await?;
    for row in &dropped {
        let extra = json!({
            "reason": "key_forgotten",
            "attempts": row.attempts,
            "last_error": row.last_error,
        });
        let kind = AuditKind::RevocationAbandoned;
        db::audit::record(&mut *tx, event(row, kind).detail(detail(row, extra))).await?;
    }
    tx.commit().await?;
    Ok(dropped.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_a_minute_to_four_hours() {
        let minutes = |n| chrono::Duration::minutes(n);
        assert_eq!(wait_after(1), minutes(1));
        assert_eq!(wait_after(2), minutes(2));
        assert_eq!(wait_after(3), minutes(4));
        assert_eq!(wait_after(8), minutes(128));
        assert_eq!(wait_after(9), LONGEST_WAIT);
        assert_eq!(wait_after(i32::MAX), LONGEST_WAIT);
        assert_eq!(wait_after(0), minutes(1));
    }
}
