//! The background sweeper: deletes expired tickets, OAuth flows and browser
//! sessions. Every instance runs the loop; a Postgres advisory lock makes
//! sure only one of them sweeps at a time.

use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::db::expiry::{self, Expiring};

/// Arbitrary, fixed: the advisory lock key of the sweeper.
const LOCK_KEY: i64 = 0x6d63_705f_7377_6570;
/// Keep expired rows this long (a late retry still finds its ticket "used"
/// rather than "unknown", and audit rows still name it).
const GRACE: chrono::Duration = chrono::Duration::hours(1);

/// Runs one sweep if no other instance is sweeping. Returns the number of
/// rows deleted, or `None` when another instance held the lock.
pub async fn sweep_once(pool: &PgPool) -> Result<Option<u64>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .fetch_one(&mut *tx)
        .await?;
    if !locked {
        return Ok(None);
    }
    let mut deleted = 0;
    for what in Expiring::ALL {
        deleted += expiry::delete(&mut *tx, what, GRACE).await?;
    }
    tx.commit().await?;
    Ok(Some(deleted))
}

/// Sweeps every `every` until `stop` is cancelled.
pub fn start(pool: PgPool, every: Duration, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match sweep_once(&pool).await {
                Ok(Some(n)) if n > 0 => {
                    tracing::info!(deleted = n, "swept expired tickets, flows and sessions")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep failed; will try again"),
            }
        }
    });
}
