//! The deliverer: a loop on every serving instance that claims due outbox
//! rows (a lease: `FOR UPDATE SKIP LOCKED`, then the row's due time moved
//! to the lease's end), POSTs each to its endpoint with a fresh timestamp
//! and signature, and settles it — deleted when the endpoint answered 2xx,
//! due again after an exponential backoff otherwise, failed once the retry
//! window is over. An instance that stops mid-delivery settles nothing:
//! its leases lapse and any instance delivers the rows again (at least
//! once; receivers deduplicate by `webhook-id`). A lease outlasts the
//! claim's answer, the request and the settling of its outcome, each
//! bounded, so no two instances send one event at the same time. A server
//! that begins to stop claims nothing more, and finishes (within its
//! drain) the deliveries it claimed. An endpoint that fails a whole batch
//! gets the next one later and later, not a backlog sent back to back.
//!
//! Each endpoint has a loop of its own: one that hangs or is slow (every
//! attempt waiting out the timeout) delays its own events only, never
//! another endpoint's.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use chrono::Utc;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Endpoint, Endpoints, signature::sign};
use crate::{
    config::WebhookSettings,
    connect::Drain,
    db::{self, event_outbox::Claimed},
    metrics::{Delivery, Metrics},
};

/// Rows claimed at once (and delivered concurrently).
const BATCH: i64 = 16;
/// A lease lasts this much longer than the claim's answer, a request and
/// the settling of its outcome may together.
const LEASE_MARGIN: Duration = Duration::from_secs(2);
/// An attempt is not begun with less time than this left to it in the
/// lease (the claim's answer came back late): the row waits for the lease
/// to lapse instead.
const SHORTEST_ATTEMPT: Duration = Duration::from_secs(1);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// How often the backlog gauge is refreshed.
const COUNT_EVERY: Duration = Duration::from_secs(10);
/// The longest pause between two looks while the database is away.
const MAX_IDLE: Duration = Duration::from_secs(30);

pub struct Deliverer {
    pool: PgPool,
    endpoints: Arc<Endpoints>,
    /// The endpoint whose rows this loop claims.
    endpoint: String,
    settings: WebhookSettings,
    /// How long one database step may take (the pool's statement timeout
    /// and a little): a connection gone silent answers nothing, ever.
    db_deadline: Duration,
    metrics: Arc<Metrics>,
}

impl Deliverer {
    /// One loop for each of `endpoints`.
    pub fn for_each(
        pool: PgPool,
        endpoints: Arc<Endpoints>,
        settings: WebhookSettings,
        db_deadline: Duration,
        metrics: Arc<Metrics>,
    ) -> Vec<Self> {
        endpoints
            .names()
            .into_iter()
            .map(|endpoint| Self {
                pool: pool.clone(),
                endpoints: endpoints.clone(),
                endpoint,
                settings: settings.clone(),
                db_deadline,
                metrics: metrics.clone(),
            })
            .collect()
    }

    /// Delivers until `stop` is cancelled, a delivery under way then
    /// abandoned (its lease lapses); or until the server begins to stop
    /// (`drain`), the batch under way then finished, tracked as work the
    /// server waits for.
    pub fn start(self, stop: CancellationToken, drain: Drain) {
        tokio::spawn(async move {
            // Claims that failed in a row (the database is away), or
            // batches that all failed (the endpoint is): each wait is
            // longer; only some failed claims are logged.
            let (mut failures, mut stalls): (u32, u32) = (0, 0);
            loop {
                let delivered = tokio::select! {
                    () = stop.cancelled() => return,
                    delivered = drain.work.track_future(self.deliver_due(&drain.begun)) => delivered,
                };
                match delivered {
                    Ok(Drained::Done) => (failures, stalls) = (0, 0),
                    Ok(Drained::Stalled) => {
                        failures = 0;
                        stalls = stalls.saturating_add(1);
                    }
                    Err(e) => {
                        if failures == 0 || failures.is_power_of_two() {
                            tracing::warn!(endpoint = %self.endpoint, error = %e, failures = failures + 1, "cannot claim webhook events; will try again");
                        }
                        failures = failures.saturating_add(1);
                    }
                }
                let wait = self
                    .settings
                    .poll_interval()
                    .saturating_mul(1 << failures.max(stalls).min(6))
                    .min(MAX_IDLE);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = drain.begun.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
        });
    }

    /// How long a claim leases its rows: the claim's answer coming back
    /// and the settling of an attempt each within the database's deadline,
    /// the request within its timeout, and a margin.
    fn lease(&self) -> Duration {
        self.settings.timeout() + self.db_deadline * 2 + LEASE_MARGIN
    }

    /// Everything due now at this loop's endpoint, a batch at a time,
    /// until the server begins to stop (`stopping`), or a whole batch
    /// failed ([`Drained::Stalled`]: the endpoint is down or refusing, and
    /// the next batch waits).
    async fn deliver_due(&self, stopping: &CancellationToken) -> Result<Drained, sqlx::Error> {
        loop {
            if stopping.is_cancelled() {
                return Ok(Drained::Done);
            }
            let lease_id = Uuid::new_v4();
            // The lease ends, in fact, no earlier than this: the database
            // began it after the claim was sent.
            let lease_ends = Instant::now() + self.lease();
            let claimed = db::faults::deadline(
                self.db_deadline,
                db::event_outbox::claim_due(
                    &self.pool,
                    lease_id,
                    self.lease().as_secs_f64(),
                    BATCH,
                    &self.endpoint,
                ),
            )
            .await;
            let claimed = claimed?;
            let at = Instant::now();
            let full = claimed.len() as i64 == BATCH;
            // A settle begun by then ends within the lease.
            let settle_by = lease_ends - self.db_deadline - LEASE_MARGIN;
            let attempts = claimed
                .iter()
                .map(|row| self.attempt(row, lease_id, at, settle_by));
            let outcomes = futures::future::join_all(attempts).await;
            if !claimed.is_empty() && !outcomes.contains(&Attempted::Delivered) {
                return Ok(Drained::Stalled);
            }
            if !full {
                return Ok(Drained::Done);
            }
        }
    }

    /// One attempt at one row, settled under our lease, by `settle_by`.
    /// `claimed` is when the row's claim came back (`row.claimed_at` by
    /// the database's clock).
    async fn attempt(
        &self,
        row: &Claimed,
        lease_id: Uuid,
        claimed: Instant,
        settle_by: Instant,
    ) -> Attempted {
        let id = webhook_id(row.event_id);
        let time = settle_by
            .saturating_duration_since(Instant::now())
            .min(self.settings.timeout());
        if time < SHORTEST_ATTEMPT {
            tracing::warn!(endpoint = %self.endpoint, webhook_id = %id, "a webhook claim came back too late to send within its lease; the event waits for the lease to lapse");
            return Attempted::NotSent;
        }
        // This loop's own endpoint, which it claims the rows of: configured
        // for as long as the loop runs.
        let sent = match self.endpoints.get(&row.endpoint) {
            Some(endpoint) => post(endpoint, &id, row, time).await,
            None => return Attempted::NotSent,
        };
        let why = match sent {
            Ok(()) => {
                self.settle(
                    &id,
                    Delivery::Delivered,
                    db::faults::deadline(
                        self.db_deadline,
                        db::event_outbox::delete_delivered(
                            &self.pool,
                            row.event_id,
                            &row.endpoint,
                            lease_id,
                        ),
                    )
                    .await,
                );
                tracing::debug!(endpoint = %row.endpoint, webhook_id = %id, event = %row.event_type, "webhook delivered");
                return Attempted::Delivered;
            }
            Err(why) => why,
        };
        let wait = backoff(self.settings.first_retry(), row.attempts);
        let later = |at: chrono::DateTime<Utc>, by: Duration| {
            chrono::Duration::from_std(by)
                .ok()
                .and_then(|by| at.checked_add_signed(by))
        };
        // Retried until the window closes, the last time when it does. On
        // the database's clock, which the due times are read by: on an
        // instance whose own clock is behind, a last attempt set at the
        // window's close would be due again at once, and again.
        let deadline = later(row.created_at, self.settings.retry_for());
        let now = later(row.claimed_at, claimed.elapsed()).unwrap_or(row.claimed_at);
        let next = match deadline {
            Some(deadline) if now >= deadline => None,
            Some(deadline) => later(now, wait).map(|next| next.min(deadline)),
            None => later(now, wait),
        };
        let error = why.to_string();
        let next = match next {
            Some(next) => next,
            None => {
                tracing::warn!(
                    endpoint = %row.endpoint, webhook_id = %id, event = %row.event_type,
                    attempt = row.attempts, error = %error,
                    "webhook delivery failed; giving up (the event is kept as failed)"
                );
                let marked = db::faults::deadline(
                    self.db_deadline,
                    db::event_outbox::mark_failed(
                        &self.pool,
                        row.event_id,
                        &row.endpoint,
                        lease_id,
                        &error,
                    ),
                )
                .await;
                self.settle(&id, Delivery::Failed, marked);
                return Attempted::Failed;
            }
        };
        tracing::warn!(
            endpoint = %row.endpoint, webhook_id = %id, event = %row.event_type,
            attempt = row.attempts, error = %error, retry_in_ms = wait.as_millis() as u64,
            "webhook delivery failed; will retry"
        );
        let scheduled = db::faults::deadline(
            self.db_deadline,
            db::event_outbox::schedule_retry(
                &self.pool,
                row.event_id,
                &row.endpoint,
                lease_id,
                next,
                &error,
            ),
        )
        .await;
        self.settle(&id, Delivery::Retry, scheduled);
        Attempted::Failed
    }

    /// Counts an attempt whose row was settled; one that could not be is
    /// delivered again once its lease lapses (and counted then).
    fn settle(&self, id: &str, outcome: Delivery, settled: Result<bool, sqlx::Error>) {
        match settled {
            Ok(true) => self.metrics.webhooks.delivery(outcome),
            Ok(false) => tracing::warn!(
                endpoint = %self.endpoint, webhook_id = %id,
                "a webhook lease lapsed before its attempt was settled"
            ),
            Err(e) => tracing::warn!(
                endpoint = %self.endpoint, webhook_id = %id, error = %e,
                "cannot settle a webhook attempt; it will be retried"
            ),
        }
    }
}

/// How delivering what was due ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drained {
    /// Nothing more due (or the server is stopping).
    Done,
    /// A whole batch failed: the endpoint gets the next one later.
    Stalled,
}

/// What one attempt at one row came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempted {
    Delivered,
    Failed,
    /// Not sent: no time left in the lease, or the endpoint is gone.
    NotSent,
}

/// Keeps the backlog gauge, every `COUNT_EVERY`, on a timer of its own:
/// not held up by any endpoint's deliveries. A failure is logged when it
/// begins, not every time.
pub fn count_backlog(
    pool: PgPool,
    db_deadline: Duration,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut failing = false;
        loop {
            let counted = db::event_outbox::count_pending(&pool);
            match db::faults::deadline(db_deadline, counted).await {
                Ok(n) => {
                    failing = false;
                    metrics
                        .webhooks
                        .set_backlog(u64::try_from(n).unwrap_or_default());
                }
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot count the webhook backlog");
                }
                Err(_) => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(COUNT_EVERY) => {}
            }
        }
    });
}

/// The `webhook-id`: the same for every attempt of one event.
pub fn webhook_id(event_id: Uuid) -> String {
    format!("msg_{}", event_id.simple())
}

/// Why an attempt failed, as logged and kept in the row: no URL, no body,
/// no secret.
#[derive(Debug)]
enum Failure {
    Status(u16),
    TimedOut,
    Connect(String),
    Other(String),
    /// A redirect (its status, and the host it points to when it names
    /// one): not followed, so that an event goes only where configured.
    Redirected(u16, Option<String>),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Status(code) => write!(f, "answered HTTP {code}"),
            Self::TimedOut => f.write_str("timed out"),
            Self::Connect(why) => write!(f, "cannot connect: {why}"),
            Self::Other(why) => write!(f, "request failed: {why}"),
            Self::Redirected(code, to) => write!(
                f,
                "answered HTTP {code}, a redirect{}; redirects are not followed: configure the URL it redirects to",
                to.as_deref()
                    .map(|host| format!(" to {host}"))
                    .unwrap_or_default()
            ),
        }
    }
}

/// POSTs `row` to `endpoint`, waiting at most `time` for its answer.
async fn post(endpoint: &Endpoint, id: &str, row: &Claimed, time: Duration) -> Result<(), Failure> {
    let body = serde_json::to_vec(&row.payload).map_err(|e| Failure::Other(e.to_string()))?;
    let timestamp = Utc::now().timestamp();
    let signature = sign(&endpoint.keys, id, timestamp, &body);
    let sent = endpoint
        .client
        .post(endpoint.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .timeout(time)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) if response.status().is_redirection() => {
            // Only the host: a path or query may carry a token.
            let to = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|location| endpoint.url.join(location).ok())
                .and_then(|url| url.host_str().map(str::to_owned));
            Err(Failure::Redirected(response.status().as_u16(), to))
        }
        Ok(response) => Err(Failure::Status(response.status().as_u16())),
        Err(e) if e.is_timeout() => Err(Failure::TimedOut),
        Err(e) => {
            let connect = e.is_connect();
            let why = cause(&e.without_url());
            Err(if connect {
                Failure::Connect(why)
            } else {
                Failure::Other(why)
            })
        }
    }
}

/// The error and its causes, one line (the URL already removed).
fn cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.chars().take(300).collect()
}

/// The wait after the `attempts`-th failed attempt: `first`, doubling each
/// time, at most [`MAX_BACKOFF`], plus up to a tenth more so that retries
/// of a burst spread out.
fn backoff(first: Duration, attempts: i32) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(20);
    let wait = first.saturating_mul(1 << doublings).min(MAX_BACKOFF);
    let jitter = rand::random_range(0..=wait.as_millis() as u64 / 10);
    wait + Duration::from_millis(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_an_hour() {
        let first = Duration::from_secs(5);
        let within = |attempts, low: u64| {
            let wait = backoff(first, attempts).as_millis() as u64;
            assert!((low..=low + low / 10).contains(&wait), "{attempts}: {wait}");
        };
        within(1, 5_000);
        within(2, 10_000);
        within(3, 20_000);
        within(30, 3_600_000);
        within(i32::MAX, 3_600_000);
    }

    /// An attempt whose lease lapsed before it was settled is delivered
    /// again by whoever claims it next: counted then, not now as well.
    #[tokio::test]
    async fn only_settled_attempts_are_counted() {
        let settings = WebhookSettings::default();
        let deliverer = Deliverer {
            pool: sqlx::postgres::PgPoolOptions::new()
                .connect_lazy("postgres://127.0.0.1:9/unused")
                .unwrap(),
            endpoints: Arc::new(Endpoints::from_settings(&settings).unwrap()),
            endpoint: "ops".into(),
            settings,
            db_deadline: Duration::from_secs(1),
            metrics: Arc::new(Metrics::new()),
        };
        deliverer.settle("msg_test", Delivery::Delivered, Ok(false));
        deliverer.settle("msg_test", Delivery::Failed, Err(sqlx::Error::PoolTimedOut));
        assert_eq!(deliverer.metrics.webhooks.count(Delivery::Delivered), 0);
        assert_eq!(deliverer.metrics.webhooks.count(Delivery::Failed), 0);
        deliverer.settle("msg_test", Delivery::Delivered, Ok(true));
        assert_eq!(deliverer.metrics.webhooks.count(Delivery::Delivered), 1);
    }

    #[test]
    fn the_webhook_id_is_stable_per_event() {
        let id = Uuid::new_v4();
        assert_eq!(webhook_id(id), webhook_id(id));
        assert!(webhook_id(id).starts_with("msg_"));
    }
}
