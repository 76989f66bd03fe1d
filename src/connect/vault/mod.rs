//! The token vault: third-party tokens sealed with the key ring (purpose
//! `token`), bound to the connection's id, user, provider and kind (access
//! or refresh), so a sealed token copied to another row never opens.
//!
//! A usable access token is handed out only here, refreshed lazily when it
//! is within a minute of expiry — one refresh per connection at a time
//! across all instances (its claim, the row lock, then a re-read: the
//! winner's new tokens serve everyone who waited), each run to its end in a
//! task of its own. A disconnect and a re-seal take the same claim.

mod claim;
mod disconnect;
mod owed;
mod read;
mod refresh;
mod refused;
mod rekey;
mod revoke;
mod seal;
mod store;
mod until_stored;
mod unused;

pub use disconnect::{Revocation, disconnect, disconnect_account};
pub(crate) use owed::forget_key as forget_revocations_sealed_by;
pub use owed::{retry_due, start_retrying};
pub use read::{
    TokenState, UsableToken, refreshed_after_refusal, token_rejected, usable_token, usable_token_of,
};
pub(in crate::connect) use read::{mark_needs_reauth, token_state};
pub use refused::{Refusal, RefusedRefreshes};
pub use rekey::{Rekeyed, rekey_all};
pub use store::{NewConnection, TooManyAccounts, store_connection};
pub(in crate::connect) use store::{adopt_unscoped, store_in};
pub(in crate::connect) use until_stored::{OwedUntilStored, owe_until_stored};
pub use unused::UnusedAccess;
pub(in crate::connect) use unused::revoke_unused;

/// How long a refresh or a disconnect waits for the row another instance
/// holds while it refreshes (a slow provider must not pin us forever), and
/// a refresh for the tokens of another instance's claim.
const REFRESH_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// A refresh's wait within this instance (for a turn to refresh, or for
/// this instance's refresh of the same connection to end) that outlasted
/// its time: the provider is slow, the database may be fine. Its source
/// is the database's timeout error, so that it is answered as one
/// (retryable) where nothing better is known.
#[derive(Debug, thiserror::Error)]
#[error("no turn to refresh came in time")]
pub(super) struct NoTurnInTime(#[source] sqlx::Error);

impl NoTurnInTime {
    fn new() -> Self {
        Self(crate::db::faults::timed_out())
    }

    /// Whether `e` is such a wait's.
    fn is_of(e: &anyhow::Error) -> bool {
        e.downcast_ref::<Self>().is_some()
    }
}

/// This instance's turn at refreshing connection `id` (one refresh of a
/// connection at a time within an instance), waited for as long as the
/// refresh under way may wait for its row, and one database step more;
/// after that it is stuck.
async fn own_refresh_turn(
    state: &super::ConnectionService,
    id: uuid::Uuid,
) -> Result<tokio::sync::OwnedMutexGuard<()>, NoTurnInTime> {
    let lock = state.refresh_locks.get(id);
    let limit = REFRESH_LOCK_TIMEOUT + state.settings.database.deadline();
    tokio::time::timeout(limit, lock.lock_owned())
        .await
        .map_err(|_| NoTurnInTime::new())
}

/// Lets the transaction on `conn` wait for a connection row as long as a
/// refresh may hold it (the provider's answer included), not only the
/// pool's lock timeout: for writes a person is waiting for, which a
/// refresh of the same row under way must not fail (a reconnect's tokens
/// stored, an account renamed).
/// The configured timeouts stay where they are longer.
pub(in crate::connect) async fn wait_for_refreshes(
    conn: &mut sqlx::PgConnection,
    database: &crate::config::DatabaseSettings,
) -> Result<(), sqlx::Error> {
    let limit = REFRESH_LOCK_TIMEOUT
        .max(database.lock_timeout())
        .max(database.statement_timeout());
    crate::db::transaction::set_lock_timeout(conn, limit).await
}
