//! The background sweeper: deletes expired tickets, OAuth flows and browser
//! sessions, audit rows past `audit.retention_days`, and webhook events
//! failed longer ago than `webhooks.failed_retention_days`. Every instance
//! runs the loop; a Postgres advisory lock makes sure only one of them
//! sweeps at a time.

use std::time::Duration;

use std::sync::Arc;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    config::{Settings, WebhookSettings},
    db::{
        audit, event_outbox,
        expiry::{self, Expiring},
        transaction,
    },
};

/// Arbitrary, fixed: the advisory lock key of the sweeper.
const LOCK_KEY: i64 = 0x6d63_705f_7377_6570;
/// Keep expired rows this long (a late retry still finds its ticket "used"
/// rather than "unknown", and audit rows still name it).
const GRACE: chrono::Duration = chrono::Duration::hours(1);
/// Audit rows deleted per statement: short locks, bounded WAL bursts.
const AUDIT_BATCH: i64 = 1000;
/// Batches per sweep; a backlog goes over several sweeps.
const AUDIT_BATCHES: usize = 500;

/// Runs one sweep if no other instance is sweeping; audit rows older than
/// `audit_retention` go too. Returns the number of rows deleted, or `None`
/// when another instance held the lock.
pub async fn sweep_once(
    pool: &PgPool,
    audit_retention: chrono::Duration,
) -> Result<Option<u64>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    if !transaction::try_advisory_lock(&mut *tx, LOCK_KEY).await? {
        return Ok(None);
    }
    let mut deleted = expiry::delete_expired_login_flows(&mut *tx).await?;
    for what in Expiring::ALL {
        deleted += expiry::delete(&mut *tx, what, GRACE).await?;
    }
    tx.commit().await?;
    deleted += sweep_audit(pool, audit_retention).await?;
    Ok(Some(deleted))
}

/// Audit rows past the retention, a batch per statement (each its own
/// short transaction), at most `AUDIT_BATCHES` batches per sweep.
async fn sweep_audit(pool: &PgPool, retention: chrono::Duration) -> Result<u64, sqlx::Error> {
    let mut deleted = 0;
    for _ in 0..AUDIT_BATCHES {
        let n = audit::delete_older_than(pool, retention, AUDIT_BATCH).await?;
        deleted += n;
        if n < AUDIT_BATCH as u64 {
            break;
        }
    }
    Ok(deleted)
}

/// Webhook events that failed longer ago than `webhooks.failed_retention_days`,
/// and those nobody tried for that long past the retry window (their
/// endpoint was removed), a batch per statement. Returns how many went.
pub async fn sweep_outbox(pool: &PgPool, webhooks: &WebhookSettings) -> Result<u64, sqlx::Error> {
    let now = chrono::Utc::now();
    let failed_before = now - webhooks.failed_retention();
    let retry_for =
        chrono::Duration::from_std(webhooks.retry_for()).unwrap_or(chrono::Duration::MAX);
    let abandoned_before = failed_before - retry_for;
    let mut deleted = 0;
    for _ in 0..AUDIT_BATCHES {
        let n = event_outbox::delete_expired(pool, failed_before, abandoned_before, AUDIT_BATCH)
            .await?;
        deleted += n;
        if n < AUDIT_BATCH as u64 {
            break;
        }
    }
    Ok(deleted)
}

/// Sweeps every `every` until `stop` is cancelled.
pub fn start(pool: PgPool, settings: Arc<Settings>, every: Duration, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let swept = match sweep_once(&pool, settings.audit.retention()).await {
                Ok(Some(n)) => sweep_outbox(&pool, &settings.webhooks)
                    .await
                    .map(|m| Some(n + m)),
                other => other,
            };
            match swept {
                Ok(Some(n)) if n > 0 => {
                    tracing::info!(
                        deleted = n,
                        "swept expired tickets, flows, sessions, old audit rows and failed webhook events"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep failed; will try again"),
            }
        }
    });
}
