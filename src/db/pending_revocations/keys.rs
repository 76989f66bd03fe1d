//! Which key seals which revocations still owed: re-sealed with the
//! current key by `tokens rekey` (an operator must not retire a key a
//! revocation still needs), dropped with a key forgotten for good.

use sqlx::PgExecutor;
use uuid::Uuid;

use super::{Origin, Params, PendingRevocation};
use crate::{db::connections::KeyPage, domain::ProviderName};

/// The `limit` revocations by id after `after`, and those of them whose
/// tokens are sealed by another key than `key_id` (a page, as for
/// connections: [`crate::db::connections::ids_not_sealed_by`]).
pub async fn ids_not_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
    after: Uuid,
    limit: i64,
) -> Result<KeyPage, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, key_id, key_id <> $1 AS "older!" FROM pending_revocations
           WHERE id > $2 ORDER BY id LIMIT $3"#,
        key_id,
        after,
        limit,
    )
    .fetch_all(exec)
    .await?;
    Ok(KeyPage::of_flagged(
        rows.into_iter()
            .map(|r| (r.id, (r.id, r.key_id), r.older))
            .collect(),
    ))
}

/// Revocation `id`, locked until the transaction ends; `None`: gone.
/// (An attempt holds no lock while the provider answers: its claim and
/// its outcome are single statements.)
pub async fn find_for_update(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<PendingRevocation>, sqlx::Error> {
    sqlx::query_as!(
        PendingRevocation,
        r#"SELECT id, issuer, subject, provider AS "provider: ProviderName", account_id,
               origin AS "origin: Origin", params AS "params: sqlx::types::Json<Params>",
               access_token, refresh_token, key_id, access_token_expires_at, created_at, attempts,
               last_error, next_attempt_at, now() AS "read_at!"
           FROM pending_revocations WHERE id = $1 FOR NO KEY UPDATE"#,
        id,
    )
    .fetch_optional(exec)
    .await
}

/// Stores revocation `id`'s tokens re-sealed by `key_id`.
pub async fn reseal(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    access_token: &[u8],
    refresh_token: Option<&[u8]>,
    key_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE pending_revocations SET access_token = $2, refresh_token = $3, key_id = $4
         WHERE id = $1",
        id,
        access_token,
        refresh_token,
        key_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// How many revocations each key id seals tokens of.
pub async fn count_by_key_id(exec: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT key_id, count(*) AS "count!" FROM pending_revocations
           GROUP BY key_id ORDER BY key_id"#
    )
    .fetch_all(exec)
    .await?;
    Ok(counts.into_iter().map(|c| (c.key_id, c.count)).collect())
}

/// For a key gone for good: the revocations whose tokens it sealed, which
/// nothing can open any more, deleted; each as it was (for its audit row).
pub async fn drop_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<PendingRevocation>, sqlx::Error> {
    sqlx::query_as!(
        PendingRevocation,
        r#"DELETE FROM pending_revocations WHERE key_id = $1
           RETURNING id, issuer, subject, provider AS "provider: ProviderName", account_id,
               origin AS "origin: Origin", params AS "params: sqlx::types::Json<Params>",
               access_token, refresh_token, key_id, access_token_expires_at, created_at, attempts,
               last_error, next_attempt_at, now() AS "read_at!""#,
        key_id,
    )
    .fetch_all(exec)
    .await
}
