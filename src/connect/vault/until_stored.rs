//! Tokens a connect is about to store are owed their revocation until the
//! store commits: a `pending_revocations` row written before the store's
//! transaction and deleted inside it. Whatever becomes of the commit — made,
//! refused, or lost with the connection to the database so that nobody
//! here can tell — the tokens end up either stored or owed, never neither:
//! a commit that did not land leaves the row for a sweep, after a grace
//! longer than any store takes (the revocation's own holder check then
//! spares a grant a working connection here holds).

use super::{
    owed::{self, Try},
    unused::{UnusedAccess, sealed, unused_access},
};
use crate::{
    connect::ConnectionService,
    db::{self, params::Params, pending_revocations::PendingRevocation},
    domain::UserRef,
    providers::{Provider, TokenSet},
};

/// How long the revocation owed until the store commits waits before a
/// sweep may take it up: far longer than a store takes (its wait for a
/// refresh's row lock and its statements' deadlines), so that no sweep
/// revokes tokens a store is about to commit.
const STORE_GRACE: chrono::Duration = chrono::Duration::minutes(10);

/// The revocation owed for tokens until they are stored (written).
pub struct OwedUntilStored {
    row: PendingRevocation,
}

/// Owes the revocation of `tokens`, issued to `user` at `provider` for
/// `account`, until [`OwedUntilStored::settle_in`] commits with their store.
/// `Ok(None)`: the provider offers no revocation, or nothing could be
/// written (and nothing was): the store goes on without, as before there
/// was this. An error: the row may be written yet (its write's answer was
/// lost, and taking it back found nothing), and stored tokens would then
/// be revoked by a sweep (at a provider that ends only the tokens it is
/// sent, no holder check spares them): the tokens are not to be stored.
pub async fn owe_until_stored(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    tokens: &TokenSet,
    params: &Params,
    account: &str,
) -> anyhow::Result<Option<OwedUntilStored>> {
    if !provider.supports_revocation() {
        return Ok(None);
    }
    let mut row = match sealed(state, user, provider, tokens, params, Some(account)) {
        Ok(row) => row,
        Err(e) => {
            tracing::error!(provider = %provider.name(), error = %e, "cannot seal tokens about to be stored");
            return Ok(None);
        }
    };
    let deadline = state.settings.database.deadline();
    let lifetime = super::store::lifetime(tokens);
    let owe = db::pending_revocations::owe(&state.db, &row, lifetime, STORE_GRACE);
    match db::faults::deadline(deadline, owe).await {
        Ok(at) => {
            row.access_token_expires_at = at.access_token_expires_at;
            row.created_at = at.created_at;
            row.next_attempt_at = at.next_attempt_at;
            row.read_at = at.read_at;
            Ok(Some(OwedUntilStored { row }))
        }
        // Refused, or never sent: nothing was written.
        Err(e) if !db::faults::may_have_run(&e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "cannot owe the revocation of tokens about to be stored; storing them without");
            Ok(None)
        }
        // Its answer lost: the write may be made yet (a statement the
        // server still holds commits when it runs), where taking it back
        // now would find nothing. Only a take-back that found the row is
        // sure of it.
        Err(e) => {
            let taken_back = db::pending_revocations::settle(&state.db, row.id);
            match db::faults::deadline(deadline, taken_back).await {
                Ok(true) => Ok(None),
                Ok(false) | Err(_) => Err(anyhow::Error::from(e)
                    .context("the revocation owed until the tokens are stored may be written yet")),
            }
        }
    }
}

impl OwedUntilStored {
    /// In the store's transaction: no longer owed once it commits. Fails
    /// where a sweep took the revocation up already (the store took longer
    /// than the grace): the tokens may be revoked by now, not to be stored.
    ///
    /// Out of reach today (a connect's code exchange and store are cut
    /// off after two minutes), it keeps a slow store from committing
    /// tokens a sweep may be revoking: a row a sweep has claimed is no
    /// longer due when it was written.
    pub async fn settle_in(&self, tx: &mut sqlx::PgConnection) -> anyhow::Result<()> {
        if !db::pending_revocations::settle_unclaimed(&mut *tx, &self.row).await? {
            anyhow::bail!("the revocation of the tokens was taken up before they were stored");
        }
        Ok(())
    }

    /// The store failed, and nothing of it was committed: the revocation
    /// owed is tried now (then by the sweeps), as for other tokens a
    /// connect does not store.
    pub async fn attempt(self, state: &ConnectionService) -> UnusedAccess {
        unused_access(owed::attempt(state, &self.row, Try::First).await)
    }

    /// When a sweep may take the revocation up if the store's commit did
    /// not land, for the log.
    pub fn due_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.row.next_attempt_at
    }
}
