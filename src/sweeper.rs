//! The background sweeper: deletes expired tickets, OAuth flows and browser
//! sessions, audit rows past `audit.retention_days`, and webhook events
//! failed longer ago than `webhooks.failed_retention_days`. Every instance
//! runs the loop; a Postgres advisory lock makes sure only one of them
//! sweeps at a time. (Revocations still owed are tried on a timer of
//! their own: [`crate::connect::vault::start_retrying`].)
//!
//! A sweep shares the database with the requests being served, so it
//! deletes in batches of `BATCH` rows, each its own short transaction,
//! and after every full batch rests `REST_PER_WORK` times as long as the
//! batch took: a backlog (a million expired tickets after an outage of the
//! sweeper, a retention shortened from a year to a month) costs the
//! database about a thirteenth of one backend's time until it is gone,
//! rather than one long statement competing with every request.
//! `mcp-connect purge --no-pause` ([`Pace::FLAT_OUT`]) skips the rests and
//! the per-sweep cap, for a maintenance window.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sqlx::{Connection, PgConnection, PgPool, postgres::PgConnectOptions};
use tokio_util::sync::CancellationToken;

use crate::{
    config::{Settings, WebhookSettings},
    db::{
        advisory_lock, audit, event_outbox,
        expiry::{self, Expiring},
        faults,
    },
};

/// Arbitrary, fixed: the advisory lock key of the sweeper.
const LOCK_KEY: i64 = 0x6d63_705f_7377_6570;
/// Keep expired rows this long (a late retry still finds its ticket "used"
/// rather than "unknown", and audit rows still name it).
const GRACE: chrono::Duration = chrono::Duration::hours(1);
/// Rows deleted per statement: short locks, bounded WAL bursts, a few
/// milliseconds of a backend's time for a batch of tickets with their
/// foreign keys.
const BATCH: i64 = 500;

/// How long one step of a sweep (taking the lock, one batch) may take at
/// least: a batch finishes within the statement timeout (a longer one
/// configured lengthens this, see [`Pace::steps_within`]), and a
/// connection gone silent never answers; the sweep then ends and the next
/// one starts over.
const STEP_DEADLINE: Duration = Duration::from_secs(60);
/// After a full batch, rest this many times as long as it took: the
/// sweep's backend is busy one part in thirteen (for batches shorter than
/// `LONGEST_REST` / 12, i.e. all but those held up by a lock). Under load
/// a request's p99 grows with that share, not with a batch's size
/// (measured: bench/NOTES.md, "The sweeper's share of the database"); at
/// this share a backlog still goes at a few thousand rows a second.
const REST_PER_WORK: u32 = 12;
/// A batch slowed down by a lock wait does not put the sweep to sleep for
/// longer than this.
const LONGEST_REST: Duration = Duration::from_secs(1);
/// Audit batches per sweep (250,000 rows): a retention shortened by years
/// goes over several sweeps. Expired tickets, flows and sessions have no such bound:
/// they grow with the traffic, and each sweep takes all of them.
const AUDIT_BATCHES: usize = 500;
/// The audit rows (and, apart, the failed webhook events) one paced sweep
/// deletes at most.
pub const AUDIT_ROWS_PER_SWEEP: u64 = AUDIT_BATCHES as u64 * BATCH as u64;

/// How a sweep shares the database with the requests being served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pace {
    /// After a full batch, rest this many times as long as it took.
    rest_per_work: u32,
    /// Audit (and failed webhook event) batches per sweep.
    audit_batches: usize,
    /// How long one step may take before the sweep gives up on it.
    step_deadline: Duration,
}

impl Pace {
    /// The background sweep's, and `purge`'s by default: batches with a
    /// rest after each, audit rows capped per sweep.
    pub const SHARED: Pace = Pace {
        rest_per_work: REST_PER_WORK,
        audit_batches: AUDIT_BATCHES,
        step_deadline: STEP_DEADLINE,
    };
    /// `purge --no-pause`, for a maintenance window: no rest and no cap,
    /// the backlog goes as fast as Postgres deletes it (requests served
    /// meanwhile compete with it). Still a batch per transaction.
    pub const FLAT_OUT: Pace = Pace {
        rest_per_work: 0,
        audit_batches: usize::MAX,
        step_deadline: STEP_DEADLINE,
    };

    /// This pace, its steps allowed at least `deadline` (the database's
    /// own deadline for a statement, when it is longer than the default).
    pub fn steps_within(self, deadline: Duration) -> Pace {
        Pace {
            step_deadline: self.step_deadline.max(deadline),
            ..self
        }
    }

    /// How long to rest after a batch that took `worked`.
    fn rest_after(self, worked: Duration) -> Duration {
        worked.saturating_mul(self.rest_per_work).min(LONGEST_REST)
    }
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Rows deleted, all tables together.
    pub deleted: u64,
    /// The sweep stopped at its cap on audit rows (or failed webhook
    /// events) with its last batch full: more past retention may be left,
    /// for the next sweep (or a `purge --no-pause`).
    pub capped: bool,
}

impl Swept {
    fn and(self, other: Swept) -> Swept {
        Swept {
            deleted: self.deleted + other.deleted,
            capped: self.capped || other.capped,
        }
    }
}

/// Runs one sweep of tickets, flows, sessions and audit rows if no other
/// instance is sweeping; audit rows older than `audit_retention` go too.
/// Expired tickets are kept an hour whatever `flow.request_state_ttl_secs`
/// says, and the webhook outbox is left: what the service and `purge` run
/// is [`sweep_all`]. Returns the number of rows deleted, or `None` when
/// another instance held the lock.
pub async fn sweep_once(
    pool: &PgPool,
    audit_retention: chrono::Duration,
) -> Result<Option<u64>, sqlx::Error> {
    let swept = sweep_once_at(pool, audit_retention, Pace::SHARED).await?;
    Ok(swept.map(|s| s.deleted))
}

/// Every instance's sweeper kept off the database: see [`hold_off`].
pub struct HeldOff(PgConnection);

impl HeldOff {
    /// Lets sweeps resume (the lock ends with the session; dropping this
    /// ends it too, when the socket closes).
    pub async fn release(self) -> Result<(), sqlx::Error> {
        self.0.close().await
    }
}

/// Keeps every instance's sweeper off the database until the hold is
/// released: each finds the lock taken and skips its turn, and a sweep
/// under way is waited for first. For a measurement that must see the
/// tables as they are (the benchmark's quiet baseline before its own
/// sweep). The lock is held on a connection of its own, not a pool's.
pub async fn hold_off(options: PgConnectOptions) -> Result<HeldOff, sqlx::Error> {
    let mut conn = PgConnection::connect_with(&options).await?;
    advisory_lock::lock(&mut conn, LOCK_KEY).await?;
    Ok(HeldOff(conn))
}

/// [`sweep_once`] at `pace`, with whether its cap stopped it.
pub async fn sweep_once_at(
    pool: &PgPool,
    audit_retention: chrono::Duration,
    pace: Pace,
) -> Result<Option<Swept>, sqlx::Error> {
    let Some(mut conn) = locked(pool, pace).await? else {
        return Ok(None);
    };
    Ok(Some(
        sweep_expired(&mut conn, audit_retention, GRACE, pace).await?,
    ))
}

/// A connection holding the sweep lock; `None` when another instance has
/// it. A connection of its own (with the pool's settings), not one of the
/// pool's: a sweep of a large backlog holds it for minutes, rests
/// included, and with a small `database_max_connections` the pool's one
/// or two would be gone for pages and connect flows meanwhile. The lock
/// lives as long as the connection, which is closed when dropped: a sweep
/// cut short (an error, a shutdown) cannot leave the lock behind.
/// The server probes the connection when it has been idle this long (and
/// a few times after): a sweeper whose host or network vanished leaves
/// the lock held only until the server notices, about a minute, not the
/// operating system's two hours.
async fn locked(pool: &PgPool, pace: Pace) -> Result<Option<PgConnection>, sqlx::Error> {
    let options = (*pool.connect_options()).clone().options([
        ("tcp_keepalives_idle", "30"),
        ("tcp_keepalives_interval", "10"),
        ("tcp_keepalives_count", "3"),
    ]);
    let lock = async {
        let mut conn = PgConnection::connect_with(&options).await?;
        let taken = advisory_lock::try_lock(&mut conn, LOCK_KEY).await?;
        Ok::<_, sqlx::Error>(taken.then_some(conn))
    };
    faults::deadline(pace.step_deadline, lock).await
}

/// How long an expired ticket is kept: [`GRACE`], or as long as a
/// `requestState` lives if that is longer — a state names its ticket, and
/// the retry that carries it (an added account's, a declined connect's)
/// reads its answer from the ticket's row.
fn ticket_grace(settings: &Settings) -> chrono::Duration {
    let state_ttl = chrono::Duration::from_std(settings.flow.request_state_ttl())
        .unwrap_or(chrono::Duration::MAX);
    GRACE.max(state_ttl)
}

/// Expired rows and audit rows past retention, on a locked connection;
/// tickets are kept `ticket_grace` past their expiry, the rest [`GRACE`].
async fn sweep_expired(
    conn: &mut PgConnection,
    audit_retention: chrono::Duration,
    ticket_grace: chrono::Duration,
    pace: Pace,
) -> Result<Swept, sqlx::Error> {
    // Within a step's deadline like every other statement here: a
    // connection gone silent must not stop the sweep for good.
    let login_flows = expiry::delete_expired_login_flows(&mut *conn);
    let mut swept = Swept {
        deleted: faults::deadline(pace.step_deadline, login_flows).await?,
        capped: false,
    };
    for what in Expiring::ALL {
        let grace = match what {
            Expiring::Tickets => ticket_grace,
            Expiring::Flows | Expiring::Sessions => GRACE,
        };
        let work = Work::Expired(what, grace);
        swept = swept.and(paced(conn, work, usize::MAX, pace).await?);
    }
    let audit = Work::Audit(audit_retention);
    Ok(swept.and(paced(conn, audit, pace.audit_batches, pace).await?))
}

/// What one batch deletes.
#[derive(Clone, Copy)]
enum Work {
    Expired(Expiring, chrono::Duration),
    Audit(chrono::Duration),
    /// Webhook events that failed longer ago than this.
    FailedEvents(Duration),
    /// Webhook events still to deliver that nobody tried for this long.
    AbandonedEvents(Duration),
}

/// Deletes `work` batch by batch, resting after each full one, until a
/// batch comes back short or `max_batches` ran (then `capped`).
async fn paced(
    conn: &mut PgConnection,
    work: Work,
    max_batches: usize,
    pace: Pace,
) -> Result<Swept, sqlx::Error> {
    let mut deleted = 0;
    for _ in 0..max_batches {
        let started = Instant::now();
        let batch = async {
            Ok::<_, sqlx::Error>(match work {
                Work::Expired(what, grace) => {
                    expiry::delete_batch(&mut *conn, what, grace, BATCH).await?
                }
                Work::Audit(retention) => {
                    audit::delete_older_than(&mut *conn, retention, BATCH).await?
                }
                Work::FailedEvents(retention) => {
                    event_outbox::delete_failed(&mut *conn, retention, BATCH).await?
                }
                Work::AbandonedEvents(idle) => {
                    event_outbox::delete_abandoned(&mut *conn, idle, BATCH).await?
                }
            })
        };
        // A connection gone silent answers nothing, ever: the sweep ends
        // with an error (its lock with the connection) and the next tries
        // again.
        let n = faults::deadline(pace.step_deadline, batch).await?;
        deleted += n;
        if n < BATCH as u64 {
            return Ok(Swept {
                deleted,
                capped: false,
            });
        }
        let rest = pace.rest_after(started.elapsed());
        if !rest.is_zero() {
            tokio::time::sleep(rest).await;
        }
    }
    Ok(Swept {
        deleted,
        capped: true,
    })
}

/// Webhook events that failed longer ago than `webhooks.failed_retention_days`,
/// and those nobody tried for that long past the retry window (their
/// endpoint was removed), a batch per statement, paced like a sweep.
/// Returns how many went.
pub async fn sweep_outbox(pool: &PgPool, webhooks: &WebhookSettings) -> Result<u64, sqlx::Error> {
    Ok(sweep_outbox_at(pool, webhooks, Pace::SHARED).await?.deleted)
}

/// [`sweep_outbox`] at `pace`, with whether its cap stopped it.
pub async fn sweep_outbox_at(
    pool: &PgPool,
    webhooks: &WebhookSettings,
    pace: Pace,
) -> Result<Swept, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    outbox_on(&mut conn, webhooks, pace).await
}

async fn outbox_on(
    conn: &mut PgConnection,
    webhooks: &WebhookSettings,
    pace: Pace,
) -> Result<Swept, sqlx::Error> {
    let retention = webhooks
        .failed_retention()
        .to_std()
        .unwrap_or(Duration::MAX);
    let failed = paced(
        conn,
        Work::FailedEvents(retention),
        pace.audit_batches,
        pace,
    )
    .await?;
    let idle = retention.saturating_add(webhooks.retry_for());
    let abandoned = paced(conn, Work::AbandonedEvents(idle), pace.audit_batches, pace).await?;
    Ok(failed.and(abandoned))
}

/// Everything a sweep deletes, at `pace`: [`sweep_once_at`], then
/// [`sweep_outbox_at`]. `None` when another instance held the lock.
pub async fn sweep_all(
    pool: &PgPool,
    settings: &Settings,
    pace: Pace,
) -> Result<Option<Swept>, sqlx::Error> {
    let pace = pace.steps_within(settings.database.deadline());
    // One lock for all of it: only one instance sweeps at a time.
    let Some(mut conn) = locked(pool, pace).await? else {
        return Ok(None);
    };
    let retention = settings.audit.retention();
    let swept = sweep_expired(&mut conn, retention, ticket_grace(settings), pace).await?;
    let outbox = outbox_on(&mut conn, &settings.webhooks, pace).await?;
    Ok(Some(swept.and(outbox)))
}

/// Sweeps every `every` until `stop` is cancelled. A sweep under way
/// then is dropped where it stands: each batch is its own transaction, so
/// nothing is left half done, and the lock goes with its connection.
pub fn start(pool: PgPool, settings: Arc<Settings>, every: Duration, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let sweep = sweep_all(&pool, &settings, Pace::SHARED);
            let swept = tokio::select! {
                () = stop.cancelled() => return,
                swept = sweep => swept,
            };
            match swept {
                Ok(Some(swept)) if swept.capped => tracing::info!(
                    deleted = swept.deleted,
                    "swept expired rows; more audit rows (or failed webhook events) past retention \
                     than one sweep deletes: the next sweep goes on"
                ),
                Ok(Some(swept)) if swept.deleted > 0 => tracing::info!(
                    deleted = swept.deleted,
                    "swept expired tickets, flows, sessions, old audit rows and failed webhook events"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sweep failed; will try again"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_rests_twelve_times_as_long_as_a_batch_took_and_never_long() {
        let rest = |worked| Pace::SHARED.rest_after(worked);
        assert_eq!(rest(Duration::from_millis(12)), Duration::from_millis(144));
        assert_eq!(rest(Duration::ZERO), Duration::ZERO);
        assert_eq!(rest(Duration::from_secs(30)), LONGEST_REST);
    }

    #[test]
    fn a_flat_out_purge_never_rests_and_has_no_cap() {
        for worked in [
            Duration::ZERO,
            Duration::from_millis(12),
            Duration::from_secs(30),
        ] {
            assert_eq!(Pace::FLAT_OUT.rest_after(worked), Duration::ZERO);
        }
        assert_eq!(Pace::FLAT_OUT.audit_batches, usize::MAX);
        assert_eq!(Pace::SHARED.audit_batches, AUDIT_BATCHES);
    }

    #[test]
    fn a_paced_sweep_takes_the_quarter_million_audit_rows_the_help_names() {
        assert_eq!(AUDIT_ROWS_PER_SWEEP, 250_000);
    }
}
