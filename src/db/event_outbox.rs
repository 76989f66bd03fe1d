//! `event_outbox`: connection events waiting for (or given up on) delivery
//! to the operator's webhook endpoints, one row per event and endpoint.
//! Claims are leases: a claim moves the row's due time to the lease's end
//! and names itself in `lease_id`; only the holder of the lease may settle
//! the row, and a lease that nobody settles lapses by itself.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

/// Writes one event for each of `endpoints` (in the caller's transaction).
pub async fn insert(
    exec: impl PgExecutor<'_>,
    event_id: Uuid,
    endpoints: &[String],
    event_type: &str,
    payload: &serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload)
         SELECT $1, endpoint, $3, $4 FROM unnest($2::text[]) AS endpoint",
        event_id,
        endpoints,
        event_type,
        payload,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Writes events of one type, each (id, payload) for each of `endpoints`,
/// in one statement (in the caller's transaction): a page of changes'
/// events, as [`insert`] writes one.
pub async fn insert_many(
    exec: impl PgExecutor<'_>,
    endpoints: &[String],
    event_type: &str,
    events: &[(Uuid, serde_json::Value)],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = events.iter().map(|e| e.0).collect();
    let payloads: Vec<serde_json::Value> = events.iter().map(|e| e.1.clone()).collect();
    sqlx::query!(
        "INSERT INTO event_outbox (event_id, endpoint, event_type, payload)
         SELECT e.id, endpoint, $3, e.payload
         FROM unnest($1::uuid[], $4::jsonb[]) AS e(id, payload),
              unnest($2::text[]) AS endpoint",
        &ids,
        endpoints,
        event_type,
        &payloads,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// A row claimed for one delivery attempt.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub event_id: Uuid,
    pub endpoint: String,
    pub event_type: String,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
    /// Including this one.
    pub attempts: i32,
    /// When it was claimed, by the database's clock (as `created_at` and
    /// every due time are).
    pub claimed_at: DateTime<Utc>,
}

/// Claims up to `limit` due rows of `endpoint`, oldest due first, for
/// `lease_secs` under `lease_id`. Rows another instance is claiming right
/// now are skipped, not waited for. Each endpoint's rows are claimed by its
/// own deliverer (`event_outbox_due_by_endpoint`: another endpoint's
/// backlog is never read), so rows for endpoints this instance does not
/// know are left alone: during a rolling change of the configuration they
/// are another instance's to deliver (and when no instance knows them any
/// more, the sweeper's).
pub async fn claim_due(
    exec: impl PgExecutor<'_>,
    lease_id: Uuid,
    lease_secs: f64,
    limit: i64,
    endpoint: &str,
) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as!(
        Claimed,
        "UPDATE event_outbox o
         SET next_attempt_at = now() + make_interval(secs => $2), lease_id = $1,
             attempts = o.attempts + 1
         FROM (SELECT event_id, endpoint FROM event_outbox
               WHERE failed_at IS NULL AND endpoint = $4 AND next_attempt_at <= now()
               ORDER BY next_attempt_at LIMIT $3
               FOR UPDATE SKIP LOCKED) due
         WHERE o.event_id = due.event_id AND o.endpoint = due.endpoint
         RETURNING o.event_id, o.endpoint, o.event_type, o.payload, o.created_at, o.attempts,
                   now() AS \"claimed_at!\"",
        lease_id,
        lease_secs,
        limit,
        endpoint,
    )
    .fetch_all(exec)
    .await
}

/// The endpoint acknowledged the event: the row goes. `false`: the lease
/// was no longer ours.
pub async fn delete_delivered(
    exec: impl PgExecutor<'_>,
    event_id: Uuid,
    endpoint: &str,
    lease_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM event_outbox WHERE event_id = $1 AND endpoint = $2 AND lease_id = $3",
        event_id,
        endpoint,
        lease_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The attempt failed: due again at `next_attempt_at`.
pub async fn schedule_retry(
    exec: impl PgExecutor<'_>,
    event_id: Uuid,
    endpoint: &str,
    lease_id: Uuid,
    next_attempt_at: DateTime<Utc>,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE event_outbox SET next_attempt_at = $4, lease_id = NULL, last_error = $5
         WHERE event_id = $1 AND endpoint = $2 AND lease_id = $3",
        event_id,
        endpoint,
        lease_id,
        next_attempt_at,
        error,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Retried for as long as allowed: kept, failed, for inspection.
pub async fn mark_failed(
    exec: impl PgExecutor<'_>,
    event_id: Uuid,
    endpoint: &str,
    lease_id: Uuid,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE event_outbox SET failed_at = now(), lease_id = NULL, last_error = $4
         WHERE event_id = $1 AND endpoint = $2 AND lease_id = $3",
        event_id,
        endpoint,
        lease_id,
        error,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Rows still to be delivered, due or not.
pub async fn count_pending(exec: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "count!" FROM event_outbox WHERE failed_at IS NULL"#)
        .fetch_one(exec)
        .await
}

/// Deletes up to `limit` rows that failed longer than `retention` ago,
/// oldest first, by address as [`crate::db::expiry::delete_batch`] does.
/// On the database's clock, which `failed_at` was written by. Returns how
/// many went.
pub async fn delete_failed(
    exec: impl PgExecutor<'_>,
    retention: std::time::Duration,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM event_outbox WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM event_outbox
             WHERE failed_at < now() - make_interval(secs => $1)
             ORDER BY failed_at LIMIT $2))
           AND failed_at < now() - make_interval(secs => $1)",
        retention.as_secs_f64(),
        limit,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected())
}

/// Deletes up to `limit` rows still to deliver that nobody tried for
/// `idle` (their endpoint was removed from the configuration), oldest
/// due first; as [`delete_failed`]. Each of the two reads its own partial
/// index in order and stops at its batch, where one statement for both
/// would read every matching entry of both for each batch.
pub async fn delete_abandoned(
    exec: impl PgExecutor<'_>,
    idle: std::time::Duration,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM event_outbox WHERE ctid = ANY(ARRAY(
             SELECT ctid FROM event_outbox
             WHERE failed_at IS NULL AND next_attempt_at < now() - make_interval(secs => $1)
             ORDER BY next_attempt_at LIMIT $2))
           AND failed_at IS NULL AND next_attempt_at < now() - make_interval(secs => $1)",
        idle.as_secs_f64(),
        limit,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected())
}
