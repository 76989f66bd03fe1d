//! `refresh_claims`: which instance is refreshing a connection's tokens,
//! committed before it asks the provider, so that the claim outlives a
//! transaction lost while the provider answered (see the migration). One
//! claim per connection; an expired one is taken over.

use std::time::Duration;

use sqlx::PgExecutor;
use uuid::Uuid;

/// Claims the refresh of `connection_id` as `claim_id` for `hold`.
/// `false`: another claim holds it still.
pub async fn claim(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    claim_id: Uuid,
    hold: Duration,
) -> Result<bool, sqlx::Error> {
    let claimed = sqlx::query_scalar!(
        "INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
         VALUES ($1, $2, now() + make_interval(secs => $3))
         ON CONFLICT (connection_id) DO UPDATE
             SET claim_id = EXCLUDED.claim_id, claimed_until = EXCLUDED.claimed_until
             WHERE refresh_claims.claimed_until <= now()
         RETURNING claim_id",
        connection_id,
        claim_id,
        hold.as_secs_f64(),
    )
    .fetch_optional(exec)
    .await?;
    Ok(claimed.is_some())
}

/// Ends the claim `claim_id`, if it still holds the connection's refresh.
pub async fn release(
    exec: impl PgExecutor<'_>,
    connection_id: Uuid,
    claim_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM refresh_claims WHERE connection_id = $1 AND claim_id = $2",
        connection_id,
        claim_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// [`claim`] for many connections at once, as `claim_id` for `hold`: a
/// page of re-seals. The connections claimed: those of `ids` that still
/// exist and no live claim holds (a connection deleted meanwhile is
/// passed over, not an error: each is held against deletion while the
/// statement claims it). A claim another transaction is writing is waited
/// for.
pub async fn claim_many(
    exec: impl PgExecutor<'_>,
    ids: &[Uuid],
    claim_id: Uuid,
    hold: Duration,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "WITH live AS (SELECT id FROM connections WHERE id = ANY($1) ORDER BY id FOR KEY SHARE)
         INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
         SELECT id, $2, now() + make_interval(secs => $3) FROM live
         ON CONFLICT (connection_id) DO UPDATE
             SET claim_id = EXCLUDED.claim_id, claimed_until = EXCLUDED.claimed_until
             WHERE refresh_claims.claimed_until <= now()
         RETURNING connection_id",
        ids,
        claim_id,
        hold.as_secs_f64(),
    )
    .fetch_all(exec)
    .await
}

/// Ends the claim `claim_id` on every connection of `ids` it still holds.
pub async fn release_many(
    exec: impl PgExecutor<'_>,
    ids: &[Uuid],
    claim_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM refresh_claims WHERE connection_id = ANY($1) AND claim_id = $2",
        ids,
        claim_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}
