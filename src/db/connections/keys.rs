//! Which key seals which connections' tokens: for re-sealing them with
//! the current key, and for finding, and forgetting, keys the ring lacks.
//!
//! A connection whose key was forgotten (`tokens forget-key`) holds an
//! empty access token and no refresh token: sealed bytes are never empty,
//! so such a row waits for no key, only for its user to connect again.

use sqlx::PgExecutor;
use uuid::Uuid;

/// A page of rows by id, and which of them are sealed by another key than
/// the one asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPage {
    /// The page's rows sealed by another key, with the key that seals each.
    pub older: Vec<(Uuid, String)>,
    /// The page's last id, to go on from; `None`: no rows were left.
    pub last: Option<Uuid>,
    /// How many rows the page read (fewer than asked: it was the last).
    pub read: usize,
}

impl KeyPage {
    /// The page of `rows` (id, key id, whether another key seals it), in
    /// id order.
    pub fn of(rows: Vec<(Uuid, String, bool)>) -> Self {
        Self {
            last: rows.last().map(|r| r.0),
            read: rows.len(),
            older: rows
                .into_iter()
                .filter(|r| r.2)
                .map(|(id, key_id, _)| (id, key_id))
                .collect(),
        }
    }
}

/// The `limit` connections by id after `after` (a page: a million rows
/// need not be held at once, and each statement reads a page, whatever
/// the rows are sealed by), and those of them whose tokens are sealed by
/// another key than `key_id`. Rows whose tokens were dropped
/// ([`drop_tokens_sealed_by`]) hold none to re-seal. A page that went on
/// until it had found `limit` such rows read the whole table in one
/// statement once none were left, past the statement time limit.
pub async fn ids_not_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
    after: Uuid,
    limit: i64,
) -> Result<KeyPage, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, key_id, (key_id <> $1 AND octet_length(access_token) > 0) AS "older!"
           FROM connections WHERE id > $2 ORDER BY id LIMIT $3"#,
        key_id,
        after,
        limit,
    )
    .fetch_all(exec)
    .await?;
    Ok(KeyPage::of(
        rows.into_iter()
            .map(|r| (r.id, r.key_id, r.older))
            .collect(),
    ))
}

/// Active connections whose tokens `key_id` seals.
pub async fn active_ids_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM connections WHERE key_id = $1 AND status = 'active' ORDER BY id",
        key_id
    )
    .fetch_all(exec)
    .await
}

/// How many connections each key id seals tokens of, for finding rows
/// sealed by a key the ring no longer has (rows whose tokens were dropped
/// are not counted: nothing in them waits for a key).
pub async fn count_by_key_id(exec: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT key_id, count(*) AS "count!" FROM connections
           WHERE octet_length(access_token) > 0 GROUP BY key_id ORDER BY key_id"#
    )
    .fetch_all(exec)
    .await?;
    Ok(counts.into_iter().map(|c| (c.key_id, c.count)).collect())
}

/// One page of [`drop_tokens_sealed_by`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DroppedPage {
    /// Connections of the page whose tokens were dropped.
    pub dropped: u64,
    /// The page's last connection id, to go on from; `None`: there were
    /// no connections after the one it started after.
    pub last: Option<Uuid>,
}

/// For a key gone for good: drops the tokens it sealed from connections
/// that are no longer active (they need their users again), among the
/// `limit` connections by id after `after`: a page, so that a key that
/// sealed a million rows is dropped in statements that each end well
/// within the statement time limit (one over every row outlasted it, and
/// so did every rerun). Bytes nothing can open are no use to keep, and a
/// row without them is no longer counted as waiting for its key; `key_id`
/// stays, to say which key it was. Active rows are left: they are marked
/// first, with their events.
pub async fn drop_tokens_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
    after: Uuid,
    limit: i64,
) -> Result<DroppedPage, sqlx::Error> {
    let page = sqlx::query!(
        r#"WITH page AS (SELECT id FROM connections WHERE id > $2 ORDER BY id LIMIT $3),
           dropped AS (
               UPDATE connections c SET access_token = ''::bytea, refresh_token = NULL,
                   updated_at = now(), tokens_stored_at = COALESCE(tokens_stored_at, updated_at)
               FROM page
               WHERE c.id = page.id AND c.key_id = $1 AND c.status <> 'active'
                   AND octet_length(c.access_token) > 0
               RETURNING 1)
           SELECT (SELECT id FROM page ORDER BY id DESC LIMIT 1) AS last,
               (SELECT count(*) FROM dropped) AS "dropped!""#,
        key_id,
        after,
        limit,
    )
    .fetch_one(exec)
    .await?;
    Ok(DroppedPage {
        dropped: u64::try_from(page.dropped).unwrap_or(0),
        last: page.last,
    })
}

/// How many connections once sealed by `key_id` hold no tokens any more
/// ([`drop_tokens_sealed_by`]): they wait for their users to connect again.
pub async fn count_dropped_of(exec: impl PgExecutor<'_>, key_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM connections
           WHERE key_id = $1 AND octet_length(access_token) = 0"#,
        key_id
    )
    .fetch_one(exec)
    .await
}
