//! Tokens a connect was issued and will not store (the account limit
//! reached, an answer refused, the account unreadable): a grant nobody
//! could use or end from here. They are owed a revocation as a deleted
//! connection's are — sealed into a `pending_revocations` row of their own
//! and tried at once, then again by the sweepers — so one routine (its
//! retries, its `unsupported_token_type` rule) ends both.

use secrecy::SecretString;
use sqlx::types::Json;
use uuid::Uuid;

use super::{
    owed::{self, FIRST_TRY_GRACE, Outcome, Try},
    seal::{Kind, seal_bound},
    store::lifetime,
};
use crate::{
    connect::ConnectionService,
    db::{
        self,
        params::Params,
        pending_revocations::{Origin, PendingRevocation},
    },
    domain::UserRef,
    providers::{Provider, TokenSet},
};

/// What became of the access a connect was granted and did not store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnusedAccess {
    /// Ended at the provider.
    Revoked,
    /// Left live on purpose: the same account is connected here (the
    /// person's own connection, or someone else's), and at this provider
    /// revoking would end that connection too.
    Kept,
    /// Not ended: the provider offers no revocation, or it failed (tried
    /// again later where it can). The person may remove it there.
    Live,
}

impl UnusedAccess {
    /// Whether the access has ended at the provider.
    pub fn revoked(self) -> bool {
        self == Self::Revoked
    }
}

/// Revokes `tokens`, issued to `user` at `provider` (for `account`, when
/// it was read) and not stored, and says what became of them. A failure
/// is tried again later, by any instance.
pub(in crate::connect) async fn revoke_unused(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    tokens: &TokenSet,
    params: &Params,
    account: Option<&str>,
) -> UnusedAccess {
    if !provider.supports_revocation() {
        return UnusedAccess::Live;
    }
    let mut row = match sealed(state, user, provider, tokens, params, account) {
        Ok(row) => row,
        Err(e) => {
            tracing::error!(provider = %provider.name(), error = %e, "cannot seal tokens owed a revocation");
            return UnusedAccess::Live;
        }
    };
    let owe = db::pending_revocations::owe(&state.db, &row, lifetime(tokens), FIRST_TRY_GRACE);
    let deadline = state.settings.database.deadline();
    let outcome = match db::faults::deadline(deadline, owe).await {
        // Judged by the database's clock, as a stored connection's are.
        Ok(at) => {
            row.access_token_expires_at = at.access_token_expires_at;
            row.created_at = at.created_at;
            row.next_attempt_at = at.next_attempt_at;
            row.read_at = at.read_at;
            owed::attempt(state, &row, Try::First).await
        }
        // Tried now all the same; only a later retry is lost. A write
        // past its deadline may have been made all the same: taken back
        // first, or the sweepers would end it a second time.
        Err(e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "cannot record tokens owed a revocation; trying once");
            let taken_back = db::pending_revocations::settle(&state.db, row.id);
            match db::faults::deadline(deadline, taken_back).await {
                Ok(_) => owed::attempt_unrecorded(state, &row).await,
                // Still there, maybe: as if written, under the lease it
                // was written with (this copy's is a guess).
                Err(_) => {
                    let due = db::pending_revocations::due_at(&state.db, row.id);
                    match db::faults::deadline(deadline, due).await {
                        Ok(Some(due)) => {
                            row.next_attempt_at = due;
                            owed::attempt(state, &row, Try::First).await
                        }
                        Ok(None) => owed::attempt_unrecorded(state, &row).await,
                        // The row, if written, is tried again once due.
                        Err(_) => owed::attempt(state, &row, Try::FirstUnsure).await,
                    }
                }
            }
        }
    };
    unused_access(outcome)
}

/// What an attempt at tokens not stored left of their access.
pub(super) fn unused_access(outcome: Outcome) -> UnusedAccess {
    match outcome {
        Outcome::Revoked => UnusedAccess::Revoked,
        Outcome::Spared => UnusedAccess::Kept,
        Outcome::Retrying | Outcome::GivenUp => UnusedAccess::Live,
    }
}

/// The tokens sealed for a revocation of their own, bound to a new id as a
/// connection's are to its id. Its times are this instance's until the
/// database has written the row.
pub(super) fn sealed(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    tokens: &TokenSet,
    params: &Params,
    account: Option<&str>,
) -> anyhow::Result<PendingRevocation> {
    let id = Uuid::new_v4();
    let name = provider.name();
    let seal = |secret: &SecretString, kind| seal_bound(state, (id, user, name), kind, secret);
    let access = seal(&tokens.access_token, Kind::Access)?;
    let refresh = match &tokens.refresh_token {
        Some(r) => Some(seal(r, Kind::Refresh)?.bytes),
        None => None,
    };
    Ok(PendingRevocation {
        id,
        issuer: user.issuer().to_owned(),
        subject: user.subject().to_owned(),
        provider: name.clone(),
        account_id: account.map(str::to_owned),
        origin: Origin::NotStored,
        params: Json(params.clone()),
        access_token: access.bytes,
        refresh_token: refresh,
        key_id: access.key_id,
        access_token_expires_at: lifetime(tokens).and_then(|l| {
            let left = l.said.saturating_sub(l.since.elapsed());
            chrono::Utc::now().checked_add_signed(chrono::Duration::from_std(left).ok()?)
        }),
        created_at: chrono::Utc::now(),
        read_at: chrono::Utc::now(),
        attempts: 0,
        last_error: None,
        next_attempt_at: chrono::Utc::now(),
    })
}
