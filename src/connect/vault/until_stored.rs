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

/// The revocation owed for tokens until they are stored.
pub struct OwedUntilStored {
    row: PendingRevocation,
    /// Written for sure; otherwise its write's answer was lost and taking
    /// it back failed too: it may be there.
    written: bool,
}

/// Owes the revocation of `tokens`, issued to `user` at `provider` for
/// `account`, until [`OwedUntilStored::settle_in`] commits with their store.
/// `None`: the provider offers no revocation, or nothing could be written
/// (and nothing was): the store goes on without, as before there was this.
pub async fn owe_until_stored(
    state: &ConnectionService,
    user: UserRef<'_>,
    provider: &Provider,
    tokens: &TokenSet,
    params: &Params,
    account: &str,
) -> Option<OwedUntilStored> {
    if !provider.supports_revocation() {
        return None;
    }
    let mut row = match sealed(state, user, provider, tokens, params, Some(account)) {
        Ok(row) => row,
        Err(e) => {
            tracing::error!(provider = %provider.name(), error = %e, "cannot seal tokens about to be stored");
            return None;
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
            Some(OwedUntilStored { row, written: true })
        }
        Err(e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "cannot owe the revocation of tokens about to be stored");
            // A write past its deadline may have been made all the same.
            let taken_back = db::pending_revocations::settle(&state.db, row.id);
            match db::faults::deadline(deadline, taken_back).await {
                Ok(_) => None,
                Err(_) => Some(OwedUntilStored {
                    row,
                    written: false,
                }),
            }
        }
    }
}

impl OwedUntilStored {
    /// In the store's transaction: no longer owed once it commits. Fails
    /// where a sweep took the revocation up already (the store took longer
    /// than the grace): the tokens may be revoked by now, not to be stored.
    pub async fn settle_in(&self, tx: &mut sqlx::PgConnection) -> anyhow::Result<()> {
        let settled = db::pending_revocations::settle(&mut *tx, self.row.id).await?;
        if self.written && !settled {
            anyhow::bail!("the revocation of the tokens was taken up before they were stored");
        }
        Ok(())
    }

    /// The store failed, and nothing of it was committed: the revocation
    /// owed is tried now (then by the sweeps), as for other tokens a
    /// connect does not store. `None` where it may not have been written:
    /// the caller revokes the tokens as if there were no such row.
    pub async fn attempt(self, state: &ConnectionService) -> Option<UnusedAccess> {
        if !self.written {
            return None;
        }
        Some(unused_access(
            owed::attempt(state, &self.row, Try::First).await,
        ))
    }

    /// When a sweep may take the revocation up if the store's commit did
    /// not land, for the log.
    pub fn due_at(&self) -> chrono::DateTime<chrono::Utc> {
        self.row.next_attempt_at
    }
}
