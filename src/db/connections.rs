//! `connections`: a user's connected third-party accounts.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::{ProviderName, UserRef};

mod keys;
pub use keys::{
    ActivePage, DroppedPage, KeyCountPage, KeyPage, Resealed, SealedTokenRow, active_sealed_by,
    count_by_key_id, count_dropped_of, drop_tokens_sealed_by, ids_not_sealed_by,
    lock_sealed_tokens, mark_needs_reauth_sealed_by, reseal_many,
};

/// A connection's state, as the `status` column stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::Type, serde::Serialize)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ConnectionStatus {
    /// Tokens stored and believed good.
    Active,
    /// The provider refused the tokens or their refresh: the user must connect again.
    NeedsReauth,
    /// Claimed but never completed, or taken back.
    Revoked,
}

impl ConnectionStatus {
    /// As the column and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::NeedsReauth => "needs_reauth",
            Self::Revoked => "revoked",
        }
    }
}

impl std::fmt::Display for ConnectionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A connection as shown to its owner: everything but the tokens.
#[derive(Debug, Clone)]
pub struct ConnectionSummary {
    pub id: Uuid,
    pub provider: ProviderName,
    pub account_id: String,
    pub account_label: String,
    pub scopes: Vec<String>,
    pub status: ConnectionStatus,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    /// All that is shown of an API key or Basic password ("…a1b2").
    pub credential_hint: Option<String>,
}

pub async fn list_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<Vec<ConnectionSummary>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionSummary,
        r#"SELECT id, provider AS "provider: ProviderName", account_id, account_label, scopes, status AS "status: ConnectionStatus",
                  created_at, last_used_at, credential_hint
           FROM connections WHERE issuer = $1 AND subject = $2 AND account_id <> ''
           ORDER BY provider, created_at, id"#,
        user.issuer(),
        user.subject(),
    )
    .fetch_all(exec)
    .await
}

/// One person with connections, as `users list` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub subject: String,
    pub connections: i64,
    /// The providers of their connections, in order, each once.
    pub providers: Vec<String>,
    pub last_used_at: Option<DateTime<Utc>>,
}

/// The people of `issuer` with connections (at `provider`, when given),
/// by subject, the first `limit` after `after`, a page at a time: first
/// who they are, from the connections' unique index alone (it holds the
/// provider), then only their rows. Filtering the people after reading
/// every row of each read the whole table for a provider few people
/// have, past the statement time limit on a large deployment.
pub async fn people(
    exec: impl PgExecutor<'_>,
    issuer: &str,
    provider: Option<&str>,
    after: &str,
    limit: i64,
) -> Result<Vec<Person>, sqlx::Error> {
    sqlx::query_as!(
        Person,
        r#"WITH page AS (
               SELECT DISTINCT subject FROM connections
               WHERE issuer = $1 AND subject > $3 AND account_id <> ''
                   AND ($2::text IS NULL OR provider = $2)
               ORDER BY subject
               LIMIT $4)
           SELECT c.subject, count(*) AS "connections!",
                  array_agg(DISTINCT c.provider ORDER BY c.provider) AS "providers!",
                  max(c.last_used_at) AS last_used_at
           FROM page JOIN connections c ON c.issuer = $1 AND c.subject = page.subject
           WHERE c.account_id <> ''
           GROUP BY c.subject
           ORDER BY c.subject"#,
        issuer,
        provider,
        after,
        limit,
    )
    .fetch_all(exec)
    .await
}

/// Every connection row of the user, placeholders of a connect under
/// way included: what removing the user disconnects.
#[derive(Debug, Clone)]
pub struct OwnedConnection {
    pub id: Uuid,
    pub provider: ProviderName,
}

pub async fn all_of_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<Vec<OwnedConnection>, sqlx::Error> {
    sqlx::query_as!(
        OwnedConnection,
        r#"SELECT id, provider AS "provider: ProviderName"
           FROM connections WHERE issuer = $1 AND subject = $2 ORDER BY created_at, id"#,
        user.issuer(),
        user.subject(),
    )
    .fetch_all(exec)
    .await
}

/// One of the user's connections by id; `None` when it is not theirs.
pub async fn find_summary_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    id: Uuid,
) -> Result<Option<ConnectionSummary>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionSummary,
        r#"SELECT id, provider AS "provider: ProviderName", account_id, account_label, scopes, status AS "status: ConnectionStatus",
                  created_at, last_used_at, credential_hint
           FROM connections WHERE id = $1 AND issuer = $2 AND subject = $3 AND account_id <> ''"#,
        id,
        user.issuer(),
        user.subject(),
    )
    .fetch_optional(exec)
    .await
}

/// [`find_summary_for_user`], holding the row's key until the transaction
/// ends (`FOR KEY SHARE`, what storing a row that references it takes
/// anyway): a transaction that will reference the connection takes it
/// before anything else, so that a disconnect deleting the row waits for
/// it, or it for the disconnect, and the two never wait on each other.
pub async fn find_summary_for_user_to_reference(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    id: Uuid,
) -> Result<Option<ConnectionSummary>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionSummary,
        r#"SELECT id, provider AS "provider: ProviderName", account_id, account_label, scopes, status AS "status: ConnectionStatus",
                  created_at, last_used_at, credential_hint
           FROM connections WHERE id = $1 AND issuer = $2 AND subject = $3 AND account_id <> ''
           FOR KEY SHARE"#,
        id,
        user.issuer(),
        user.subject(),
    )
    .fetch_optional(exec)
    .await
}

/// What a connection event says about its connection: whose it is and
/// which account. Never a token.
#[derive(Debug, Clone)]
pub struct ConnectionRef {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub provider: ProviderName,
    pub account_id: String,
    pub account_label: String,
    pub status: ConnectionStatus,
}

impl ConnectionRef {
    /// The person this connection belongs to.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }
}

pub async fn find_ref(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<ConnectionRef>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionRef,
        r#"SELECT id, issuer, subject, provider AS "provider: ProviderName", account_id, account_label,
                  status AS "status: ConnectionStatus"
           FROM connections WHERE id = $1"#,
        id,
    )
    .fetch_optional(exec)
    .await
}

/// A connection with its sealed tokens, for the vault.
#[derive(Debug, Clone)]
pub struct ConnectionRow {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub provider: ProviderName,
    pub account_id: String,
    pub account_label: String,
    pub scopes: Vec<String>,
    pub access_token: Vec<u8>,
    pub refresh_token: Option<Vec<u8>>,
    pub key_id: String,
    pub access_token_expires_at: Option<DateTime<Utc>>,
    pub status: ConnectionStatus,
    pub last_used_at: Option<DateTime<Utc>>,
    /// When its tokens were stored or last refreshed (for a row stored
    /// before that was recorded: when the row last changed).
    pub tokens_stored_at: DateTime<Utc>,
    /// The connection's provider parameters (a Datadog site).
    pub params: sqlx::types::Json<super::params::Params>,
    /// The database's `now()` of the statement that read the row: the
    /// start of its transaction, so for a row read in one that waited for
    /// its lock (up to a refresh's lock timeout), before the read by as
    /// long. Its times were written by the
    /// database's clock, so they are judged by it too, not by this
    /// instance's, which may be off (and is another instance's than the
    /// one that wrote them).
    pub read_at: DateTime<Utc>,
}

impl ConnectionRow {
    /// The person this connection belongs to.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }

    /// Whether the access token expires by `at` (one without an expiry
    /// never does).
    pub fn access_token_expires_by(&self, at: chrono::DateTime<chrono::Utc>) -> bool {
        self.access_token_expires_at
            .is_some_and(|expires| expires <= at)
    }

    /// Whether the access token had expired when the row was read, by
    /// the database's clock.
    pub fn access_token_expired(&self) -> bool {
        self.access_token_expires_by(self.read_at)
    }

    /// Whether the access token has expired `since_read` after the row was
    /// read (timed by this instance's monotonic clock), by the database's
    /// clock: for a judgement made long after the read, such as after a
    /// refresh that waited for a lock and the provider.
    pub fn access_token_expired_after(&self, since_read: std::time::Duration) -> bool {
        let since_read = chrono::Duration::from_std(since_read).unwrap_or(chrono::Duration::MAX);
        self.access_token_expires_by(
            self.read_at
                .checked_add_signed(since_read)
                .unwrap_or(DateTime::<Utc>::MAX_UTC),
        )
    }
}

/// The user's connection to `provider` (the oldest, when there are several).
pub async fn find(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    provider: &ProviderName,
) -> Result<Option<ConnectionRow>, sqlx::Error> {
    find_account(exec, user, provider, None).await
}

/// The user's connection `id` to `provider`; with `None`, the oldest.
pub async fn find_account(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    provider: &ProviderName,
    id: Option<Uuid>,
) -> Result<Option<ConnectionRow>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionRow,
        r#"SELECT id, issuer, subject, provider AS "provider: ProviderName", account_id, account_label, scopes, access_token,
                  refresh_token, key_id, access_token_expires_at, status AS "status: ConnectionStatus",
                  last_used_at, COALESCE(tokens_stored_at, updated_at) AS "tokens_stored_at!", params AS "params: sqlx::types::Json<super::params::Params>",
                  now() AS "read_at!"
           FROM connections WHERE issuer = $1 AND subject = $2 AND provider = $3
             AND ($4::uuid IS NULL OR id = $4)
           ORDER BY (account_id = ''), created_at, id LIMIT 1"#,
        user.issuer(),
        user.subject(),
        provider.as_str(),
        id,
    )
    .fetch_optional(exec)
    .await
}

/// One account of the user at a provider, to choose from.
#[derive(Debug, Clone)]
pub struct AccountChoice {
    pub id: Uuid,
    pub account_id: String,
    pub account_label: String,
}

/// The user's accounts at `provider`, oldest first.
pub async fn accounts(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    provider: &ProviderName,
) -> Result<Vec<AccountChoice>, sqlx::Error> {
    sqlx::query_as!(
        AccountChoice,
        "SELECT id, account_id, account_label FROM connections
         WHERE issuer = $1 AND subject = $2 AND provider = $3 AND account_id <> ''
         ORDER BY created_at, id",
        user.issuer(),
        user.subject(),
        provider.as_str(),
    )
    .fetch_all(exec)
    .await
}

/// What became of a rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    Renamed,
    /// No such connection of the user's.
    NotFound,
    /// Another of the user's accounts at the provider has that label, or
    /// that account id: nothing changed.
    LabelTaken,
}

/// Takes, until the transaction ends, the lock under which the labels of
/// the user's accounts at the provider of connection `id` change, and new
/// accounts are counted: of two renames of two accounts to one label at
/// the same time, the second waits for the first and, its next statement
/// seeing the first's label, finds it taken (and of two new accounts, the
/// second counts the first). An advisory lock, not the rows': a refresh holds an account's
/// row while it waits for the provider, and a rename of another account
/// must not wait for that.
pub async fn lock_labels(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended(issuer || chr(31) || subject || chr(31) || provider, 1))
           FROM connections WHERE id = $1 AND issuer = $2 AND subject = $3",
        id,
        user.issuer(),
        user.subject(),
    )
    .fetch_optional(exec)
    .await?;
    Ok(())
}

/// Renames one of the user's connections, unless another of their
/// accounts at the same provider already has `label`, or has it as its
/// account id (labels tell them apart, and an account id names its own
/// account first). Run after [`lock_labels`], in its transaction.
pub async fn set_label(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    id: Uuid,
    label: &str,
) -> Result<Renamed, sqlx::Error> {
    let done = sqlx::query!(
        r#"WITH target AS (
               SELECT id, provider FROM connections WHERE id = $1 AND issuer = $2 AND subject = $3
           ), taken AS (
               SELECT 1 FROM connections c JOIN target t ON c.provider = t.provider
               WHERE c.issuer = $2 AND c.subject = $3 AND c.id <> t.id
                 AND c.account_id <> '' AND (c.account_label = $4 OR c.account_id = $4)
           ), renamed AS (
               UPDATE connections SET account_label = $4, label_edited = true, updated_at = now(),
                   tokens_stored_at = COALESCE(tokens_stored_at, updated_at)
               WHERE id IN (SELECT id FROM target) AND NOT EXISTS (SELECT 1 FROM taken)
               RETURNING id
           )
           SELECT EXISTS (SELECT 1 FROM target) AS "found!",
                  EXISTS (SELECT 1 FROM renamed) AS "renamed!""#,
        id,
        user.issuer(),
        user.subject(),
        label,
    )
    .fetch_one(exec)
    .await?;
    Ok(match (done.found, done.renamed) {
        (_, true) => Renamed::Renamed,
        (false, false) => Renamed::NotFound,
        (true, false) => Renamed::LabelTaken,
    })
}

/// The same row, locked until the transaction ends: one refresh at a time.
/// `NO KEY UPDATE`, not `UPDATE`: a refresh holds the lock while the
/// provider answers, and the stronger lock would also hold up every row
/// that references this one being written (a client's grant, an approval
/// ticket), whose foreign-key check takes a share of the key. (A
/// disconnect's `DELETE` still takes the full lock when it runs.)
pub async fn find_for_update(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<ConnectionRow>, sqlx::Error> {
    sqlx::query_as!(
        ConnectionRow,
        r#"SELECT id, issuer, subject, provider AS "provider: ProviderName", account_id, account_label, scopes, access_token,
                  refresh_token, key_id, access_token_expires_at, status AS "status: ConnectionStatus",
                  last_used_at, COALESCE(tokens_stored_at, updated_at) AS "tokens_stored_at!", params AS "params: sqlx::types::Json<super::params::Params>",
                  now() AS "read_at!"
           FROM connections WHERE id = $1 FOR NO KEY UPDATE"#,
        id,
    )
    .fetch_optional(exec)
    .await
}

/// Renames the user's connection stored under `unscoped` (by a version
/// whose account ids did not carry their scope) to `scoped`, when its
/// parameters hold `scope`'s values and no row has `scoped` yet. `true`
/// when one was renamed.
pub async fn adopt_unscoped(
    exec: &mut sqlx::PgConnection,
    user: UserRef<'_>,
    provider: &ProviderName,
    unscoped: &str,
    scoped: &str,
    scope: &super::params::Params,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connections SET account_id = $5, updated_at = now(),
             tokens_stored_at = COALESCE(tokens_stored_at, updated_at)
         WHERE issuer = $1 AND subject = $2 AND provider = $3 AND account_id = $4 AND params @> $6
           AND NOT EXISTS (SELECT 1 FROM connections
                           WHERE issuer = $1 AND subject = $2 AND provider = $3 AND account_id = $5)",
        user.issuer(),
        user.subject(),
        provider.as_str(),
        unscoped,
        scoped,
        sqlx::types::Json(scope) as _,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The id of the user's connection to this account of `provider`, creating
/// an empty row (status `revoked`, no usable token) when there is none.
/// Tokens are sealed bound to this id, so it must be known before sealing.
///
/// One statement, and the row stays locked (as `FOR NO KEY UPDATE`) until
/// the caller's transaction ends. An insert that did nothing on conflict
/// followed by a `SELECT` would lose to a disconnect committing between
/// the two: the select would find no row, and the reconnect would fail.
/// `DO UPDATE` (of a column that is no key, to its own value) waits for
/// such a delete and then inserts, so a claim always returns a row.
pub async fn claim_id(
    exec: &mut sqlx::PgConnection,
    user: UserRef<'_>,
    provider: &ProviderName,
    account_id: &str,
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO connections (id, issuer, subject, provider, account_id, account_label, access_token, key_id, status)
         VALUES ($1, $2, $3, $4, $5, '', '\\x', '', 'revoked')
         ON CONFLICT (issuer, subject, provider, account_id) DO UPDATE SET updated_at = connections.updated_at
         RETURNING id",
        Uuid::new_v4(),
        user.issuer(),
        user.subject(),
        provider.as_str(),
        account_id,
    )
    .fetch_one(&mut *exec)
    .await
}

/// How many accounts `user` has at `provider` besides connection `id`
/// (rows other transactions have yet to commit are not seen).
pub async fn count_other_accounts(
    exec: &mut sqlx::PgConnection,
    user: UserRef<'_>,
    provider: &ProviderName,
    id: Uuid,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM connections
           WHERE issuer = $1 AND subject = $2 AND provider = $3 AND id <> $4"#,
        user.issuer(),
        user.subject(),
        provider.as_str(),
        id,
    )
    .fetch_one(&mut *exec)
    .await
}

/// What the vault writes after a successful authorization.
pub struct StoredTokens<'a> {
    pub account_id: &'a str,
    pub account_label: &'a str,
    pub scopes: &'a [String],
    pub access_token: &'a [u8],
    pub refresh_token: Option<&'a [u8]>,
    pub key_id: &'a str,
    /// How long the access token lives, as the provider said.
    pub expires_in: Option<Lifetime>,
}

/// How long an access token lives, as the provider said (`said`), counted
/// from when its answer came (`since`). Its expiry is written as the
/// storing statement's start by the database's clock plus what is left of
/// the lifetime when the statement is made: whatever happened in between
/// (the account looked up, a lock or a lost transaction waited for), it
/// is later than the provider's only by the answer's time on the wire and
/// the statement's wait to start, both far inside the refresh margin.
#[derive(Debug, Clone, Copy)]
pub struct Lifetime {
    pub said: std::time::Duration,
    pub since: std::time::Instant,
}

impl Lifetime {
    /// What is left of it now, in seconds, as the statement binds it.
    pub(crate) fn left_secs(self) -> f64 {
        self.said.saturating_sub(self.since.elapsed()).as_secs_f64()
    }
}

pub async fn store(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    t: StoredTokens<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connections SET account_id = $2,
             account_label = CASE WHEN label_edited THEN account_label ELSE $3 END, scopes = $4, access_token = $5,
             refresh_token = $6, key_id = $7,
             access_token_expires_at = statement_timestamp() + make_interval(secs => $8),
             status = 'active',
             tokens_stored_at = statement_timestamp(), connected_at = statement_timestamp(),
             updated_at = now()
         WHERE id = $1",
        id,
        t.account_id,
        t.account_label,
        t.scopes,
        t.access_token,
        t.refresh_token,
        t.key_id,
        t.expires_in.map(Lifetime::left_secs),
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Sets what pages show of an API key or Basic password (`None`: an
/// OAuth connection, nothing to show).
pub async fn set_credential_hint(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    hint: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connections SET credential_hint = $2 WHERE id = $1",
        id,
        hint,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// When a refresh's tokens were stored and expire, by the database's
/// clock, as [`store_refreshed`] wrote them.
#[derive(Debug, Clone, Copy)]
pub struct Refreshed {
    pub access_token_expires_at: Option<DateTime<Utc>>,
    pub tokens_stored_at: DateTime<Utc>,
    /// The database's time when the statement started: see
    /// [`ConnectionRow::read_at`].
    pub read_at: DateTime<Utc>,
}

/// After a refresh: new tokens, same account (whose row the caller's
/// transaction holds). Timed by the statement, not by the transaction,
/// which began before the provider was asked (and may have waited for
/// the row's lock).
pub async fn store_refreshed(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    refreshed: RefreshedTokens<'_>,
) -> Result<Refreshed, sqlx::Error> {
    sqlx::query_as!(
        Refreshed,
        r#"UPDATE connections SET access_token = $2, refresh_token = $3, key_id = $4,
               access_token_expires_at = statement_timestamp() + make_interval(secs => $5),
               tokens_stored_at = statement_timestamp(), updated_at = now()
           WHERE id = $1
           RETURNING access_token_expires_at, tokens_stored_at AS "tokens_stored_at!",
                     statement_timestamp() AS "read_at!""#,
        id,
        refreshed.access_token,
        refreshed.refresh_token,
        refreshed.key_id,
        refreshed.expires_in.map(Lifetime::left_secs),
    )
    .fetch_one(exec)
    .await
}

/// After a key rotation: the same tokens sealed by another key. When they
/// were stored (`tokens_stored_at`, which the refresh margin is measured
/// from) and when they expire do not change.
pub async fn reseal(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    access_token: &[u8],
    refresh_token: Option<&[u8]>,
    key_id: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connections SET access_token = $2, refresh_token = $3, key_id = $4, updated_at = now(),
             tokens_stored_at = COALESCE(tokens_stored_at, updated_at)
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

/// [`store_refreshed`] on an active connection whose access token is still
/// `previous_access_token` (sealed): for a refresh's tokens written after
/// the transaction that held the row was lost, when someone else may have
/// changed the row since. A row that already holds these tokens (the lost
/// commit was made after all) counts as written, with the times that
/// commit wrote. `None`: it changed, nothing was written.
pub async fn store_refreshed_if_current(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    previous_access_token: &[u8],
    refreshed: RefreshedTokens<'_>,
) -> Result<Option<Refreshed>, sqlx::Error> {
    sqlx::query_as!(
        Refreshed,
        r#"UPDATE connections SET access_token = $3, refresh_token = $4, key_id = $5,
               access_token_expires_at = CASE WHEN access_token = $3 THEN access_token_expires_at
                   ELSE statement_timestamp() + make_interval(secs => $6) END,
               tokens_stored_at = CASE WHEN access_token = $3 THEN tokens_stored_at
                   ELSE statement_timestamp() END,
               updated_at = now()
           WHERE id = $1 AND (access_token = $2 OR access_token = $3) AND status = 'active'
           RETURNING access_token_expires_at, tokens_stored_at AS "tokens_stored_at!",
                     statement_timestamp() AS "read_at!""#,
        id,
        previous_access_token,
        refreshed.access_token,
        refreshed.refresh_token,
        refreshed.key_id,
        refreshed.expires_in.map(Lifetime::left_secs),
    )
    .fetch_optional(exec)
    .await
}

/// A refresh's tokens, sealed, as [`store_refreshed`] writes them.
#[derive(Debug, Clone, Copy)]
pub struct RefreshedTokens<'a> {
    pub access_token: &'a [u8],
    pub refresh_token: Option<&'a [u8]>,
    pub key_id: &'a str,
    /// As in [`StoredTokens::expires_in`].
    pub expires_in: Option<Lifetime>,
}

/// Marks an active connection `needs_reauth` if its access token is still
/// `sealed_access_token` — and, `unless_refreshing`, no refresh is
/// claimed. `false`: it was refreshed, replaced or is no longer active, or
/// a refresh under way may replace the token (and would find the row no
/// longer active when it writes the provider's new tokens).
pub async fn mark_needs_reauth_if_current(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    sealed_access_token: &[u8],
    unless_refreshing: bool,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connections SET status = 'needs_reauth', updated_at = now(),
             tokens_stored_at = COALESCE(tokens_stored_at, updated_at)
         WHERE id = $1 AND status = 'active' AND access_token = $2
           AND NOT ($3 AND EXISTS (SELECT 1 FROM refresh_claims
                                   WHERE connection_id = $1 AND claimed_until > now()))",
        id,
        sealed_access_token,
        unless_refreshing,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn set_status(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    status: ConnectionStatus,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connections SET status = $2, updated_at = now(),
             tokens_stored_at = COALESCE(tokens_stored_at, updated_at) WHERE id = $1",
        id,
        status as ConnectionStatus,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Notes a use, at most once a minute per connection (keeps hot paths
/// read-only). A row locked by a refresh under way (which holds it while
/// the provider answers) is left alone rather than waited for: the call
/// must not wait for, or fail on, a note of its own use.
pub async fn touch(exec: impl PgExecutor<'_>, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connections SET last_used_at = now()
         WHERE id = (SELECT id FROM connections
                     WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
                     FOR NO KEY UPDATE SKIP LOCKED)",
        id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

pub async fn delete(exec: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM connections WHERE id = $1", id)
        .execute(exec)
        .await?;
    Ok(done.rows_affected() == 1)
}
