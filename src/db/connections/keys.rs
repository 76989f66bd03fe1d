//! Which key seals which connections' tokens: for re-sealing them with
//! the current key, and for finding, and forgetting, keys the ring lacks.
//!
//! A connection whose key was forgotten (`tokens forget-key`) holds an
//! empty access token and no refresh token: sealed bytes are never empty,
//! so such a row waits for no key, only for its user to connect again.

use sqlx::PgExecutor;
use uuid::Uuid;

use super::{ConnectionRef, ConnectionStatus};
use crate::db::page::Page;
use crate::domain::{ProviderName, UserRef};

/// A page of rows by id, and which of them are sealed by another key than
/// the one asked about, with the key that seals each.
pub type KeyPage = Page<Vec<(Uuid, String)>>;

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
    Ok(KeyPage::of_flagged(
        rows.into_iter()
            .map(|r| (r.id, (r.id, r.key_id), r.older))
            .collect(),
    ))
}

/// A connection's sealed tokens with what they are bound to: what a
/// re-seal reads and writes back.
#[derive(Debug, Clone)]
pub struct SealedTokenRow {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub provider: ProviderName,
    pub access_token: Vec<u8>,
    pub refresh_token: Option<Vec<u8>>,
    pub key_id: String,
}

impl SealedTokenRow {
    /// The person the connection belongs to.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }
}

/// The sealed tokens of the connections of `ids` that still exist and no
/// other transaction holds, each row locked until the transaction ends
/// (`NO KEY UPDATE`, as a refresh locks one). A row another holds is
/// passed over, not waited for: the caller deals with it alone.
pub async fn lock_sealed_tokens(
    exec: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<Vec<SealedTokenRow>, sqlx::Error> {
    sqlx::query_as!(
        SealedTokenRow,
        r#"SELECT id, issuer, subject, provider AS "provider: ProviderName", access_token,
                  refresh_token, key_id
           FROM connections WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED"#,
        ids,
    )
    .fetch_all(exec)
    .await
}

/// A connection's tokens sealed again by another key, for
/// [`reseal_many`].
pub struct Resealed {
    pub id: Uuid,
    pub access_token: Vec<u8>,
    pub refresh_token: Option<Vec<u8>>,
    pub key_id: String,
}

/// After a key rotation: many connections' tokens sealed by another key,
/// in one statement ([`super::reseal`] for a page). When they were stored
/// and when they expire do not change.
pub async fn reseal_many(exec: impl PgExecutor<'_>, rows: &[Resealed]) -> Result<u64, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let access: Vec<&[u8]> = rows.iter().map(|r| r.access_token.as_slice()).collect();
    // Sealed bytes are never empty: an empty array element stands for no
    // refresh token (an array of nullable elements is not a parameter
    // type the checked queries take).
    let refresh: Vec<&[u8]> = rows
        .iter()
        .map(|r| r.refresh_token.as_deref().unwrap_or_default())
        .collect();
    let key_ids: Vec<&str> = rows.iter().map(|r| r.key_id.as_str()).collect();
    let written = sqlx::query!(
        "UPDATE connections c SET access_token = new.access_token,
             refresh_token = NULLIF(new.refresh_token, ''::bytea), key_id = new.key_id,
             updated_at = now(), tokens_stored_at = COALESCE(c.tokens_stored_at, c.updated_at)
         FROM unnest($1::uuid[], $2::bytea[], $3::bytea[], $4::text[])
             AS new(id, access_token, refresh_token, key_id)
         WHERE c.id = new.id",
        &ids,
        &access as &[&[u8]],
        &refresh as &[&[u8]],
        &key_ids as &[&str],
    )
    .execute(exec)
    .await?;
    Ok(written.rows_affected())
}

/// A page of connections by id, and which of them are active and sealed
/// by the key asked about: those a forgotten key's users must be asked to
/// connect again from.
pub type ActivePage = Page<Vec<Uuid>>;

/// The `limit` connections by id after `after`, and those of them that are
/// active and sealed by `key_id`: a page per statement, whatever the rows
/// hold (a statement asking for every such row read a million of them).
pub async fn active_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
    after: Uuid,
    limit: i64,
) -> Result<ActivePage, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, (key_id = $1 AND status = 'active') AS "sealed!"
           FROM connections WHERE id > $2 ORDER BY id LIMIT $3"#,
        key_id,
        after,
        limit,
    )
    .fetch_all(exec)
    .await?;
    Ok(ActivePage::of_flagged(
        rows.into_iter().map(|r| (r.id, r.id, r.sealed)).collect(),
    ))
}

/// Marks the connections of `ids` that are still active and sealed by
/// `key_id`, and that no other transaction holds, as needing their users
/// (a refresh under way holds its row: the caller deals with such a row
/// alone). Returns the rows it marked, as they are now.
pub async fn mark_needs_reauth_sealed_by(
    exec: impl PgExecutor<'_>,
    key_id: &str,
    ids: &[Uuid],
) -> Result<Vec<ConnectionRef>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionRef,
        r#"UPDATE connections c SET status = 'needs_reauth', updated_at = now(),
               tokens_stored_at = COALESCE(c.tokens_stored_at, c.updated_at)
           FROM (SELECT id FROM connections
                 WHERE id = ANY($2) AND key_id = $1 AND status = 'active'
                 ORDER BY id FOR NO KEY UPDATE SKIP LOCKED) free
           WHERE c.id = free.id
           RETURNING c.id, c.issuer, c.subject, c.provider AS "provider: ProviderName",
               c.account_id, c.account_label, c.status AS "status: ConnectionStatus""#,
        key_id,
        ids,
    )
    .fetch_all(exec)
    .await
}

/// How many of a page of connections hold tokens each key id sealed, by
/// key id: for finding rows sealed by a key the ring no longer has (rows
/// whose tokens were dropped are not counted: nothing in them waits for a
/// key).
pub type KeyCountPage = Page<Vec<(String, i64)>>;

/// [`KeyCountPage`] of the `limit` connections by id after `after`: a
/// page per statement (one count over every row read a million of them,
/// past the statement time limit).
pub async fn count_by_key_id(
    exec: impl PgExecutor<'_>,
    after: Uuid,
    limit: i64,
) -> Result<KeyCountPage, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, key_id, octet_length(access_token) > 0 AS "sealed!"
           FROM connections WHERE id > $1 ORDER BY id LIMIT $2"#,
        after,
        limit,
    )
    .fetch_all(exec)
    .await?;
    let mut counts = std::collections::BTreeMap::<String, i64>::new();
    let (last, read) = (rows.last().map(|r| r.id), rows.len());
    for row in rows.into_iter().filter(|r| r.sealed) {
        *counts.entry(row.key_id).or_default() += 1;
    }
    Ok(KeyCountPage {
        found: counts.into_iter().collect(),
        last,
        read,
    })
}

/// One page of [`drop_tokens_sealed_by`]: how many of its connections'
/// tokens were dropped.
pub type DroppedPage = Page<u64>;

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
               (SELECT count(*) FROM page) AS "read!",
               (SELECT count(*) FROM dropped) AS "dropped!""#,
        key_id,
        after,
        limit,
    )
    .fetch_one(exec)
    .await?;
    Ok(DroppedPage {
        found: u64::try_from(page.dropped).unwrap_or(0),
        last: page.last,
        read: usize::try_from(page.read).unwrap_or(0),
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
