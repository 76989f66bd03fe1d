//! `pending_revocations`: tokens still to be revoked at their provider,
//! sealed as the connection row sealed them (see the migration
//! `20261207000100`). Never read for anything but revoking them.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, types::Json};
use uuid::Uuid;

use super::params::Params;
use crate::domain::{ProviderName, UserRef};

mod keys;
pub use keys::{count_by_key_id, drop_sealed_by, find_for_update, ids_not_sealed_by, reseal};

/// Why the tokens are owed a revocation, as the `origin` column says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
pub enum Origin {
    /// A connection was deleted here.
    Disconnected,
    /// A connect was issued tokens it did not store (the account limit
    /// reached, an answer refused).
    NotStored,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disconnected => "disconnected",
            Self::NotStored => "not_stored",
        }
    }
}

/// One revocation still owed.
#[derive(Debug, Clone)]
pub struct PendingRevocation {
    /// The deleted connection's id (a new one for tokens never stored):
    /// what the sealed tokens are bound to.
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub provider: ProviderName,
    pub account_id: Option<String>,
    pub origin: Origin,
    pub params: Json<Params>,
    pub access_token: Vec<u8>,
    pub refresh_token: Option<Vec<u8>>,
    pub key_id: String,
    pub access_token_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Attempts that failed so far.
    pub attempts: i32,
    /// Why the last one failed (no credential).
    pub last_error: Option<String>,
    /// When it is due, as read or as claimed: the lease of the attempt
    /// that holds this copy. Only that attempt's failure is recorded
    /// ([`failed`]); one whose lease ran out, and which another took up
    /// since, is not.
    pub next_attempt_at: DateTime<Utc>,
    /// The database's `now()` of the statement that read (or wrote) the
    /// row: its times are the database's, so they are judged by its clock
    /// (as a connection's are: `ConnectionRow::read_at`).
    pub read_at: DateTime<Utc>,
}

impl PendingRevocation {
    /// The person whose grant it is.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }

    /// Whether the access token expires by `at` (one without an expiry
    /// never does).
    pub fn access_token_expires_by(&self, at: DateTime<Utc>) -> bool {
        self.access_token_expires_at
            .is_some_and(|expires| expires <= at)
    }
}

/// Owes connection `id`'s revocation, its tokens copied as they are
/// sealed, due `grace` from now (the instance that deleted it tries first);
/// in the transaction that deletes it, before the delete. The row as
/// written, or `None`: the connection holds no tokens (a key forgotten).
pub async fn owe_for_connection(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    grace: chrono::Duration,
) -> Result<Option<PendingRevocation>, sqlx::Error> {
    sqlx::query_as!(
        PendingRevocation,
        r#"INSERT INTO pending_revocations (id, issuer, subject, provider, account_id, origin, params,
               access_token, refresh_token, key_id, access_token_expires_at, next_attempt_at)
           SELECT id, issuer, subject, provider, account_id, 'disconnected', params,
               access_token, refresh_token, key_id, access_token_expires_at,
               now() + make_interval(secs => $2)
           FROM connections WHERE id = $1 AND octet_length(access_token) > 0
           ON CONFLICT (id) DO NOTHING
           RETURNING id, issuer, subject, provider AS "provider: ProviderName", account_id,
               origin AS "origin: Origin", params AS "params: Json<Params>", access_token,
               refresh_token, key_id, access_token_expires_at, created_at, attempts,
               last_error, next_attempt_at, now() AS "read_at!""#,
        id,
        grace.num_seconds() as f64,
    )
    .fetch_optional(exec)
    .await
}

/// Tokens just sealed for [`PendingRevocation::id`] `row.id`, owed a
/// revocation, due `grace` from now; the access token lives `lifetime`
/// from the provider's answer. The row's times as the database wrote them:
/// its expiry, `created_at` and `read_at`.
pub async fn owe(
    exec: impl PgExecutor<'_>,
    row: &PendingRevocation,
    lifetime: Option<crate::db::connections::Lifetime>,
    grace: chrono::Duration,
) -> Result<OwedAt, sqlx::Error> {
    sqlx::query_as!(
        OwedAt,
        r#"INSERT INTO pending_revocations (id, issuer, subject, provider, account_id, origin, params,
             access_token, refresh_token, key_id, access_token_expires_at, next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                 statement_timestamp() + make_interval(secs => $11),
                 now() + make_interval(secs => $12))
         RETURNING access_token_expires_at, created_at, next_attempt_at, now() AS "read_at!""#,
        row.id,
        row.issuer,
        row.subject,
        row.provider.as_str(),
        row.account_id,
        row.origin.as_str(),
        &row.params as _,
        row.access_token,
        row.refresh_token,
        row.key_id,
        lifetime.map(crate::db::connections::Lifetime::left_secs),
        grace.num_seconds() as f64,
    )
    .fetch_one(exec)
    .await
}

/// The times [`owe`] wrote, by the database's clock.
pub struct OwedAt {
    pub access_token_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: DateTime<Utc>,
    pub read_at: DateTime<Utc>,
}

/// Claims up to `limit` revocations due now, oldest due first: each is
/// moved `lease` ahead before anyone calls out, so another instance (or
/// this one's next pass) leaves it while it is tried, and takes it up
/// again if the one trying dies. Rows another transaction is claiming are
/// skipped, not waited for.
pub async fn claim_due(
    exec: impl PgExecutor<'_>,
    lease: chrono::Duration,
    limit: i64,
) -> Result<Vec<PendingRevocation>, sqlx::Error> {
    sqlx::query_as!(
        PendingRevocation,
        r#"UPDATE pending_revocations SET next_attempt_at = now() + make_interval(secs => $1)
           WHERE id IN (SELECT id FROM pending_revocations WHERE next_attempt_at <= now()
                        ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
           RETURNING id, issuer, subject, provider AS "provider: ProviderName", account_id,
               origin AS "origin: Origin", params AS "params: Json<Params>", access_token,
               refresh_token, key_id, access_token_expires_at, created_at, attempts,
               last_error, next_attempt_at, now() AS "read_at!""#,
        lease.num_seconds() as f64,
        limit,
    )
    .fetch_all(exec)
    .await
}

/// Who holds a connection at the provider that could share a revocation's
/// grant (see [`grant_holder`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantHolder {
    /// Nobody here.
    Nobody,
    /// The person whose tokens these were: connected again since.
    ThisPerson,
    /// Someone else connected the same account.
    AnotherPerson,
}

/// Who holds a working connection (active, with tokens: one the provider
/// refused, waiting to be connected again, protects nothing) at the
/// provider that could share `row`'s grant: one of the same account,
/// whoever made it (the person first), or, where the account was never
/// read, one the person connected since these tokens were issued — a new
/// row, or new tokens of an authorization stored into the old one (not
/// one merely refreshed since).
pub async fn grant_holder(
    exec: impl PgExecutor<'_>,
    row: &PendingRevocation,
) -> Result<GrantHolder, sqlx::Error> {
    let mine = match &row.account_id {
        Some(account) => {
            sqlx::query_scalar!(
                r#"SELECT (issuer = $1 AND subject = $2) AS "mine!" FROM connections
                   WHERE provider = $3 AND account_id = $4 AND status = 'active'
                     AND octet_length(access_token) > 0
                   ORDER BY 1 DESC LIMIT 1"#,
                row.issuer,
                row.subject,
                row.provider.as_str(),
                account,
            )
            .fetch_optional(exec)
            .await?
        }
        None => {
            sqlx::query_scalar!(
                r#"SELECT true AS "mine!" FROM connections
               WHERE issuer = $1 AND subject = $2 AND provider = $3 AND status = 'active'
                 AND octet_length(access_token) > 0
                 AND COALESCE(connected_at, created_at) >= $4
               LIMIT 1"#,
                row.issuer,
                row.subject,
                row.provider.as_str(),
                row.created_at,
            )
            .fetch_optional(exec)
            .await?
        }
    };
    Ok(match mine {
        Some(true) => GrantHolder::ThisPerson,
        Some(false) => GrantHolder::AnotherPerson,
        None => GrantHolder::Nobody,
    })
}

/// The revocation is done with (the grant ended, or retrying given up);
/// `false`: another instance was done with it first.
pub async fn settle(exec: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM pending_revocations WHERE id = $1", id)
        .execute(exec)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Revocation `row` is done with before any attempt: deleted unless an
/// attempt has claimed it (its lease moved `next_attempt_at`) or another
/// instance was done with it; `false` then.
pub async fn settle_unclaimed(
    exec: impl PgExecutor<'_>,
    row: &PendingRevocation,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM pending_revocations WHERE id = $1 AND next_attempt_at = $2 AND attempts = 0",
        row.id,
        row.next_attempt_at,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// An attempt at `row` failed: counted, due again `wait` from now, with
/// why (a short text with no credential, cut to fit). `false`: not
/// recorded, as the row is no longer the one this attempt holds — settled
/// meanwhile, or taken up by another attempt once this one's lease ran
/// out (its `next_attempt_at` moved): the other's record stands, and its
/// lease is not cut short.
pub async fn failed(
    exec: impl PgExecutor<'_>,
    row: &PendingRevocation,
    wait: chrono::Duration,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let error: String = error.chars().take(200).collect();
    let recorded = sqlx::query!(
        "UPDATE pending_revocations SET attempts = attempts + 1,
             next_attempt_at = now() + make_interval(secs => $2), last_error = $3
         WHERE id = $1 AND next_attempt_at = $4",
        row.id,
        wait.num_seconds() as f64,
        error,
        row.next_attempt_at,
    )
    .execute(exec)
    .await?;
    Ok(recorded.rows_affected() == 1)
}

/// Tokens a refresh answered before a revocation, sealed for its row.
pub struct Refreshed<'a> {
    pub access_token: &'a [u8],
    pub refresh_token: Option<&'a [u8]>,
    pub key_id: &'a str,
    /// The new access token's life from the provider's answer.
    pub lifetime: Option<crate::db::connections::Lifetime>,
}

/// Revocation `id`'s tokens replaced by those of a refresh (a rotating
/// refresh token is dead once used), the access token's expiry on the
/// database's clock; `false`: the row is gone (settled meanwhile).
pub async fn keep_refreshed(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    t: Refreshed<'_>,
) -> Result<bool, sqlx::Error> {
    let kept = sqlx::query!(
        "UPDATE pending_revocations SET access_token = $2, refresh_token = $3, key_id = $4,
             access_token_expires_at = statement_timestamp() + make_interval(secs => $5)
         WHERE id = $1",
        id,
        t.access_token,
        t.refresh_token,
        t.key_id,
        t.lifetime.map(crate::db::connections::Lifetime::left_secs),
    )
    .execute(exec)
    .await?;
    Ok(kept.rows_affected() == 1)
}

/// When revocation `id` is due (its lease, as written or claimed);
/// `None`: there is no such row.
pub async fn due_at(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT next_attempt_at FROM pending_revocations WHERE id = $1",
        id
    )
    .fetch_optional(exec)
    .await
}

/// How many revocations are owed, due or not (for `/metrics`).
pub async fn count(exec: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "owed!" FROM pending_revocations"#)
        .fetch_one(exec)
        .await
}
