//! `connect_tickets`: the one-time tickets behind `/connect?ticket=…` URLs.
//! Only the SHA-256 of a ticket is stored; redemption is one atomic UPDATE,
//! so of any number of concurrent attempts exactly one wins. A ticket's
//! expiry is set and judged by the database's clock only: the instances'
//! clocks may disagree with it, and with each other.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::{ProviderName, UserRef};

#[derive(Debug, Clone)]
pub struct Ticket {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub client_id: String,
    pub provider: ProviderName,
    pub scopes: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub redeemed_at: Option<DateTime<Utc>>,
    pub declined_at: Option<DateTime<Utc>>,
    /// The provider's `error` code, when it refused the authorization this
    /// connect ticket's flow asked for (not the person's own decline).
    pub refused_with: Option<String>,
    /// Set on an approval ticket: the connection the ticket's client asks
    /// to use. `None`: a connect ticket.
    pub connection_id: Option<Uuid>,
    /// A connect ticket for another account (the provider's account chooser).
    pub add_account: bool,
    /// The database's clock when the statement that returned this row
    /// ran: `expires_at` was set by that clock, and is compared with it
    /// alone (an instance's own clock may be minutes off).
    pub read_at: DateTime<Utc>,
}

impl Ticket {
    /// The person this ticket belongs to.
    pub fn user(&self) -> UserRef<'_> {
        UserRef::new(&self.issuer, &self.subject)
    }

    /// Whether the ticket could still be used when it was read: not
    /// redeemed, not declined, not expired. The queries here that find,
    /// redeem or decline a usable ticket state the same rule in SQL, so it
    /// holds atomically.
    pub fn usable(&self) -> bool {
        self.redeemed_at.is_none() && self.declined_at.is_none() && self.expires_at > self.read_at
    }
}

pub struct NewTicket<'a> {
    pub id: Uuid,
    pub ticket_hash: &'a [u8],
    pub user: UserRef<'a>,
    pub client_id: &'a str,
    pub provider: &'a ProviderName,
    pub scopes: &'a [String],
    /// How long the ticket lives from its insert, by the database's clock.
    pub ttl: std::time::Duration,
    pub connection_id: Option<Uuid>,
    pub add_account: bool,
}

/// How many of a ticket's scopes its `ticket_issued` audit row names.
const AUDITED_SCOPES: usize = 8;

/// What a `ticket_issued` audit row keeps of the scopes, which a model
/// chose (32 of up to 200 characters each): the first few, each cut to a
/// short printable prefix. The ticket keeps them whole, and the row says
/// how many there were.
fn audited_scopes(scopes: &[String]) -> Vec<String> {
    scopes
        .iter()
        .take(AUDITED_SCOPES)
        .map(|s| crate::crypto::printable_prefix(s))
        .collect()
}

/// Inserts a ticket and its `ticket_issued` audit row in one statement (one
/// round trip, one commit: this is on the path of every first ask). The
/// audit row holds printable prefixes of what the client and the model
/// chose (the client id by [`crate::db::audit::client_id`], the first few
/// scopes), the ticket all of it.
///
/// The commit does not wait for the WAL to reach the disk
/// (`synchronous_commit = off`, for this transaction only). What a crash of
/// the Postgres server can lose is the last few hundred milliseconds of such
/// commits: a ticket whose link then reads "expired", and whose client's
/// retry issues a new one. The ticket and its audit row go together, and
/// any later synchronous commit (redeeming the ticket, say) flushes them
/// first: nothing that depends on a ticket can outlive it.
pub async fn insert(exec: impl PgExecutor<'_>, t: NewTicket<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true)),
         ticket AS (
             INSERT INTO connect_tickets (id, ticket_hash, issuer, subject, client_id, provider, scopes, expires_at, connection_id, add_account)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8), $9, $10)
             RETURNING id)
         INSERT INTO audit_events (issuer, subject, kind, provider, detail)
         SELECT $3, $4, 'ticket_issued', $6,
                jsonb_build_object('ticket_id', ticket.id, 'client_id', $11::text,
                                   'scopes', to_jsonb($12::text[]), 'scope_count', cardinality($7::text[]))
         FROM ticket, relaxed",
        t.id,
        t.ticket_hash,
        t.user.issuer(),
        t.user.subject(),
        t.client_id,
        t.provider.as_str(),
        t.scopes,
        t.ttl.as_secs_f64(),
        t.connection_id,
        t.add_account,
        crate::db::audit::client_id(t.client_id),
        &audited_scopes(t.scopes),
    )
    .execute(exec)
    .await?;
    Ok(())
}

pub async fn find_by_id(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"SELECT id, issuer, subject, client_id, provider AS "provider: ProviderName", scopes, created_at, expires_at,
                redeemed_at, declined_at, refused_with, connection_id, add_account, now() AS "read_at!"
         FROM connect_tickets WHERE id = $1"#,
        id,
    )
    .fetch_optional(exec)
    .await
}

/// A ticket that can still be used: known, unexpired, not redeemed, not declined.
pub async fn find_usable_by_hash(
    exec: impl PgExecutor<'_>,
    hash: &[u8],
) -> Result<Option<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"SELECT id, issuer, subject, client_id, provider AS "provider: ProviderName", scopes, created_at, expires_at,
                redeemed_at, declined_at, refused_with, connection_id, add_account, now() AS "read_at!"
         FROM connect_tickets
         WHERE ticket_hash = $1 AND redeemed_at IS NULL AND declined_at IS NULL AND expires_at > now()"#,
        hash,
    )
    .fetch_optional(exec)
    .await
}

/// Redeems a usable ticket for exactly this user; `None` if it was not
/// usable (or already taken by a concurrent request).
pub async fn redeem(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    user: UserRef<'_>,
) -> Result<Option<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"UPDATE connect_tickets SET redeemed_at = now()
         WHERE id = $1 AND issuer = $2 AND subject = $3
           AND redeemed_at IS NULL AND declined_at IS NULL AND expires_at > now()
         RETURNING id, issuer, subject, client_id, provider AS "provider: ProviderName", scopes, created_at, expires_at,
                   redeemed_at, declined_at, refused_with, connection_id, add_account, now() AS "read_at!""#,
        id,
        user.issuer(),
        user.subject(),
    )
    .fetch_optional(exec)
    .await
}

/// Marks a usable ticket declined (the user pressed Cancel), so the client's
/// retry can say so.
pub async fn decline(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    user: UserRef<'_>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connect_tickets SET declined_at = now()
         WHERE id = $1 AND issuer = $2 AND subject = $3
           AND redeemed_at IS NULL AND declined_at IS NULL AND expires_at > now()",
        id,
        user.issuer(),
        user.subject(),
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The add-account ticket `client_id` was given for `user` at `provider`
/// that a 2025-11-25 client's retry belongs to: not yet answered, issued
/// within `within`; one whose connect stored a connection first, then one
/// redeemed (the person is at the provider), then the newest.
pub async fn unanswered_add_account(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    client_id: &str,
    provider: &ProviderName,
    within: std::time::Duration,
) -> Result<Option<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"SELECT id, issuer, subject, client_id, provider AS "provider: ProviderName", scopes, created_at, expires_at,
                redeemed_at, declined_at, refused_with, connection_id, add_account, now() AS "read_at!"
         FROM connect_tickets
         WHERE issuer = $1 AND subject = $2 AND client_id = $3 AND provider = $4 AND add_account
           AND answered_at IS NULL AND created_at > now() - make_interval(secs => $5)
         ORDER BY stored_connection_id IS NOT NULL DESC, redeemed_at IS NOT NULL DESC, created_at DESC
         LIMIT 1"#,
        user.issuer(),
        user.subject(),
        client_id,
        provider.as_str(),
        within.as_secs_f64(),
    )
    .fetch_optional(exec)
    .await
}

/// Records that a retry was answered from this ticket (its connection, or
/// the person's decline).
pub async fn mark_answered(exec: impl PgExecutor<'_>, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connect_tickets SET answered_at = now() WHERE id = $1 AND answered_at IS NULL",
        id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Records the connection this ticket's connect stored (in the
/// transaction that stored it).
pub async fn set_stored_connection(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    connection_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE connect_tickets SET stored_connection_id = $2 WHERE id = $1",
        id,
        connection_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// The connection this ticket's connect stored, if it has (and the
/// connection is still there).
pub async fn stored_connection(
    exec: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<Uuid>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT stored_connection_id FROM connect_tickets WHERE id = $1",
        id,
    )
    .fetch_optional(exec)
    .await?;
    Ok(found.flatten())
}

/// The newest unexpired, unredeemed approval ticket `client_id` holds for
/// `user`'s connection `connection_id`, declined or not: a client that
/// cannot open links asks through the connections page once for as long
/// as the ticket lives, however often it calls, and is told of a decline
/// for as long.
pub async fn latest_approval(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    client_id: &str,
    connection_id: Uuid,
) -> Result<Option<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"SELECT id, issuer, subject, client_id, provider AS "provider: ProviderName", scopes, created_at, expires_at,
                redeemed_at, declined_at, refused_with, connection_id, add_account, now() AS "read_at!"
         FROM connect_tickets
         WHERE connection_id = $1 AND client_id = $2 AND issuer = $3 AND subject = $4
           AND redeemed_at IS NULL AND expires_at > now()
         ORDER BY created_at DESC
         LIMIT 1"#,
        connection_id,
        client_id,
        user.issuer(),
        user.subject(),
    )
    .fetch_optional(exec)
    .await
}

/// The approval requests on `user`'s connections that wait for an
/// answer, oldest first: of each client and connection the newest
/// unredeemed, unexpired ticket, unless it was declined (the client's
/// answer stands) or the client is allowed there already (by another of
/// its links).
pub async fn pending_approvals(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<Vec<Ticket>, sqlx::Error> {
    sqlx::query_as!(
        Ticket,
        r#"SELECT id AS "id!", issuer AS "issuer!", subject AS "subject!", client_id AS "client_id!",
                provider AS "provider!: ProviderName", scopes AS "scopes!", created_at AS "created_at!",
                expires_at AS "expires_at!", redeemed_at, declined_at, refused_with, connection_id, add_account AS "add_account!",
                now() AS "read_at!"
         FROM (
             SELECT DISTINCT ON (t.connection_id, t.client_id) t.*
             FROM connect_tickets t
             JOIN connections c ON c.id = t.connection_id
             WHERE c.issuer = $1 AND c.subject = $2 AND t.issuer = $1 AND t.subject = $2
               AND t.redeemed_at IS NULL AND t.expires_at > now()
             ORDER BY t.connection_id, t.client_id, t.created_at DESC
         ) newest
         WHERE declined_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM client_grants g
                           WHERE g.connection_id = newest.connection_id AND g.client_id = newest.client_id)
         ORDER BY created_at"#,
        user.issuer(),
        user.subject(),
    )
    .fetch_all(exec)
    .await
}

/// How many of the user's tickets could still be redeemed, and how many
/// there are in all (used, declined and expired ones are kept a while).
pub async fn count_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<(i64, i64), sqlx::Error> {
    // No index by user (each ask would write it): a sequential scan, for
    // an operator's command now and then.
    let counted = sqlx::query!(
        r#"SELECT count(*) FILTER (
                      WHERE redeemed_at IS NULL AND declined_at IS NULL AND expires_at > now()
                  ) AS "live!",
                  count(*) AS "all!"
             FROM connect_tickets
            WHERE issuer = $1 AND subject = $2"#,
        user.issuer(),
        user.subject(),
    )
    .fetch_one(exec)
    .await?;
    Ok((counted.live, counted.all))
}

/// Deletes every ticket of the user, used or not (their OAuth flows go
/// with them, ON DELETE CASCADE). Returns how many.
pub async fn delete_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM connect_tickets WHERE issuer = $1 AND subject = $2",
        user.issuer(),
        user.subject(),
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected())
}

/// How many sessions of other people a link's refusals are recorded for;
/// past that, a link handed around that widely is on the record already,
/// and further refusals (another person's too, or one who signs in again
/// and again) write no audit row: a bound on what one link can add.
const MISMATCHES_RECORDED: i32 = 16;

/// Notes that session `session_id`, another person's, opened ticket
/// `ticket_id`; `true` the first time only (the mismatch is recorded once
/// per link and session, however often the session comes back to it),
/// and for at most sixteen sessions.
pub async fn first_mismatch(
    exec: impl PgExecutor<'_>,
    ticket_id: Uuid,
    session_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE connect_tickets SET mismatched_sessions = array_append(mismatched_sessions, $2)
         WHERE id = $1 AND NOT coalesce($2 = ANY (mismatched_sessions), false)
           AND coalesce(cardinality(mismatched_sessions), 0) < $3",
        ticket_id,
        session_id,
        MISMATCHES_RECORDED,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() == 1)
}
