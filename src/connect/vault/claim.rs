//! A connection's refresh claim (`db::refresh_claims`): taken by the
//! instance that refreshes, before it locks the row, and by a disconnect
//! and a re-seal, so that neither runs while a refresh is still writing
//! what the provider answered after its transaction was lost (it then holds
//! no row lock, only its claim). Marking a connection whose token the
//! provider refused skips a claimed one. A reconnect takes no claim: the
//! tokens it stores replace a refresh's whatever their order, and a
//! refresh writing after a lost transaction writes only over the row as it
//! read it.

use super::{REFRESH_LOCK_TIMEOUT, refresh::KEEP_FOR_DEADLINES};
use crate::{connect::ConnectionService, db};

/// This instance's claim on a connection's refresh (`db::refresh_claims`).
/// Released by [`Claim::release`], or in the background when dropped
/// holding it — a claim dropped half-way (a statement's deadline passed
/// after the claim was committed, a task that panicked) must not leave
/// every instance waiting for it to expire. (Its statement's deadline
/// passed before Postgres ran it, the claim may commit after that
/// release: it then holds until it expires, as one of a stopped instance
/// does. A refresh takes its claim in a task of its own, so a caller
/// going away never drops one.)
pub(super) struct Claim {
    db: sqlx::PgPool,
    /// Where a dropped claim's release runs: the service's runtime, which
    /// outlives the worker a request ran on.
    runtime: tokio::runtime::Handle,
    connection_id: uuid::Uuid,
    claim_id: uuid::Uuid,
    limit: std::time::Duration,
    held: bool,
}

/// What taking a claim found.
pub(super) enum Taken {
    Claim(Claim),
    /// Another claim holds the refresh.
    Elsewhere,
    /// The connection was deleted (disconnected) meanwhile.
    Gone,
}

impl Claim {
    pub(super) async fn take(
        state: &ConnectionService,
        connection_id: uuid::Uuid,
    ) -> Result<Taken, sqlx::Error> {
        let mut claim = Claim {
            db: state.db.clone(),
            runtime: state.runtime.clone(),
            connection_id,
            claim_id: uuid::Uuid::new_v4(),
            limit: state.settings.database.deadline(),
            // Held from before the statement: if its deadline passes after
            // the claim was committed, the drop releases it.
            held: true,
        };
        let taken =
            db::refresh_claims::claim(&state.db, connection_id, claim.claim_id, claim_hold(state));
        match db::faults::deadline(claim.limit, taken).await {
            Ok(true) => Ok(Taken::Claim(claim)),
            Ok(false) => {
                claim.held = false;
                Ok(Taken::Elsewhere)
            }
            // The claim's foreign key: the row went while it was written.
            Err(sqlx::Error::Database(e)) if e.is_foreign_key_violation() => {
                claim.held = false;
                Ok(Taken::Gone)
            }
            Err(e) => Err(e),
        }
    }

    pub(super) async fn release(mut self) {
        // Dropped while it runs, the claim is still held: the drop
        // releases it.
        release_claim(&self.db, self.connection_id, self.claim_id, self.limit).await;
        self.held = false;
    }
}

/// Ends the claim `claim_id` on `connection_id`'s refresh, or says that it
/// ends by itself (when it expires).
async fn release_claim(
    db: &sqlx::PgPool,
    connection_id: uuid::Uuid,
    claim_id: uuid::Uuid,
    limit: std::time::Duration,
) {
    let release = db::refresh_claims::release(db, connection_id, claim_id);
    if let Err(e) = db::faults::deadline(limit, release).await {
        tracing::warn!(connection = %connection_id, error = %e, "a refresh claim could not be released; it ends by itself");
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let (db, connection_id, claim_id, limit) = (
            self.db.clone(),
            self.connection_id,
            self.claim_id,
            self.limit,
        );
        self.runtime
            .spawn(async move { release_claim(&db, connection_id, claim_id, limit).await });
    }
}

/// What [`hold_refreshes`] found.
pub(super) enum Held {
    Claim(Claim),
    /// The connection was deleted meanwhile.
    Gone,
    /// Still claimed after as long as one claim holds by this instance's
    /// settings (refreshes one after another, or an instance whose
    /// database deadline is set longer): the work goes on under the row
    /// lock alone.
    Unclaimed,
}

/// Claims `connection_id`'s refresh for work that changes its tokens
/// otherwise: waits for a refresh under way to end — one still writing
/// after a lost transaction holds its claim for as long as a claim holds,
/// and so may one left by an instance that stopped — and keeps a new one
/// from starting until the claim is released, or deleted with the row.
pub(super) async fn hold_refreshes(
    state: &ConnectionService,
    connection_id: uuid::Uuid,
) -> Result<Held, sqlx::Error> {
    let waiting_ends = tokio::time::Instant::now() + claim_hold(state) + CLAIM_POLL;
    loop {
        match Claim::take(state, connection_id).await? {
            Taken::Claim(claim) => return Ok(Held::Claim(claim)),
            Taken::Gone => return Ok(Held::Gone),
            Taken::Elsewhere => {}
        }
        if tokio::time::Instant::now() + CLAIM_POLL >= waiting_ends {
            tracing::warn!(connection = %connection_id, "the connection's refresh stayed claimed; going on without a claim");
            return Ok(Held::Unclaimed);
        }
        // A stopping server does not wait on: nothing is changed yet, and
        // the work may be asked for again of another instance.
        tokio::select! {
            () = tokio::time::sleep(CLAIM_POLL) => {}
            () = state.shutdown.cancelled() => return Err(stopping()),
        }
    }
}

/// Why work that waited for a claim ended without changing anything.
fn stopping() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::Interrupted,
        "the server is stopping; nothing was changed",
    ))
}

/// How often a refresh claimed by another instance is looked at again.
pub(super) const CLAIM_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// The longest a provider's refresh answer is waited for (its client's
/// limit is 10 s), with room.
const PROVIDER_ANSWER: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a refresh claim holds unless released: longer than the
/// longest refresh, so that a slow one is never joined by a second — the
/// transaction begun (a deadline), the wait for the row lock (held without
/// a claim by an older release, or by work
/// that waited out a claim) and its statement's
/// deadline, the provider's answer, the parameters and tokens written (two
/// deadlines) and the tries after a lost transaction, with a deadline to
/// spare. A claim left by an instance that died holds as long; those
/// waiting for it serve a token that has not expired yet meanwhile.
pub(super) fn claim_hold(state: &ConnectionService) -> std::time::Duration {
    REFRESH_LOCK_TIMEOUT
        + PROVIDER_ANSWER
        + state.settings.database.deadline() * (KEEP_FOR_DEADLINES + 5)
}
