//! `web_sessions`: browser sign-ins. The cookie carries a random value; only
//! its SHA-256 is stored, so reading this table yields no usable cookie.
//! A session's times are set and compared by the database's clock only:
//! the instances' clocks may disagree with it, and with each other.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::UserRef;

#[derive(Clone)]
pub struct WebSession {
    pub id: Uuid,
    pub issuer: String,
    pub subject: String,
    pub display_name: Option<String>,
    pub csrf_secret: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    /// The connect ticket this browser is in the middle of (see `/connect`).
    pub pending_ticket_id: Option<Uuid>,
}

/// Everything but the CSRF secret, which would let whoever reads a log
/// forge this session's forms.
impl std::fmt::Debug for WebSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSession")
            .field("id", &self.id)
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .field("display_name", &self.display_name)
            .field("created_at", &self.created_at)
            .field("expires_at", &self.expires_at)
            .field("last_seen_at", &self.last_seen_at)
            .field("pending_ticket_id", &self.pending_ticket_id)
            .finish_non_exhaustive()
    }
}

pub struct NewWebSession<'a> {
    pub id: Uuid,
    pub id_hash: &'a [u8],
    pub user: UserRef<'a>,
    pub display_name: Option<&'a str>,
    pub csrf_secret: &'a [u8],
    /// How long the session lives from its insert, by the database's clock.
    pub ttl: std::time::Duration,
    pub pending_ticket_id: Option<Uuid>,
}

/// A new session. A pending ticket that is gone by now (declined, its
/// connection disconnected while the person signed in) is left out: the
/// session starts all the same, and the link's page says it has ended.
pub async fn insert(exec: impl PgExecutor<'_>, s: NewWebSession<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO web_sessions (id, id_hash, issuer, subject, display_name, csrf_secret, expires_at, pending_ticket_id)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7),
                 (SELECT id FROM connect_tickets WHERE id = $8))",
        s.id,
        s.id_hash,
        s.user.issuer(),
        s.user.subject(),
        s.display_name,
        s.csrf_secret,
        s.ttl.as_secs_f64(),
        s.pending_ticket_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// An unexpired session, and whether it went unused too long.
#[derive(Debug)]
pub struct FoundSession {
    pub session: WebSession,
    /// No activity was recorded for longer than the idle time asked
    /// about (by the database's clock, which wrote `last_seen_at`).
    pub idle: bool,
    /// The last record of activity is over a minute old: this visit is
    /// worth recording (see [`touch`]).
    pub stale: bool,
}

/// The unexpired session whose cookie hashes to `id_hash`, with whether
/// it has been unused for longer than `idle` (never, when `None`).
pub async fn find_active_by_hash(
    exec: impl PgExecutor<'_>,
    id_hash: &[u8],
    idle: Option<std::time::Duration>,
) -> Result<Option<FoundSession>, sqlx::Error> {
    let idle_secs = idle.map(|d| d.as_secs_f64());
    let row = sqlx::query!(
        r#"SELECT id, issuer, subject, display_name, csrf_secret, created_at, expires_at,
                  last_seen_at, pending_ticket_id,
                  COALESCE(last_seen_at < now() - make_interval(secs => $2), false) AS "idle!",
                  last_seen_at < now() - interval '1 minute' AS "stale!"
           FROM web_sessions WHERE id_hash = $1 AND expires_at > now()"#,
        id_hash,
        idle_secs,
    )
    .fetch_optional(exec)
    .await?;
    Ok(row.map(|r| FoundSession {
        session: WebSession {
            id: r.id,
            issuer: r.issuer,
            subject: r.subject,
            display_name: r.display_name,
            csrf_secret: r.csrf_secret,
            created_at: r.created_at,
            expires_at: r.expires_at,
            last_seen_at: r.last_seen_at,
            pending_ticket_id: r.pending_ticket_id,
        },
        idle: r.idle,
        stale: r.stale,
    }))
}

/// Records activity, at most once a minute per session (a write per page
/// view would be wasted I/O).
pub async fn touch(exec: impl PgExecutor<'_>, id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE web_sessions SET last_seen_at = now()
         WHERE id = $1 AND last_seen_at < now() - interval '1 minute'",
        id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Makes `ticket_id` the session's pending ticket; true when it was not
/// already (a reload writes nothing, and its caller records nothing anew).
/// A ticket that is gone by now is none: nothing pending.
pub async fn set_pending_ticket(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    ticket_id: Option<Uuid>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE web_sessions SET pending_ticket_id = t.id
           FROM (SELECT (SELECT id FROM connect_tickets WHERE id = $2) AS id) t
          WHERE web_sessions.id = $1 AND pending_ticket_id IS DISTINCT FROM t.id",
        id,
        ticket_id,
    )
    .execute(exec)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Forgets the pending ticket if it is still `ticket_id` (another tab may
/// have moved on to another one).
pub async fn clear_pending_ticket(
    exec: impl PgExecutor<'_>,
    id: Uuid,
    ticket_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE web_sessions SET pending_ticket_id = NULL WHERE id = $1 AND pending_ticket_id = $2",
        id,
        ticket_id,
    )
    .execute(exec)
    .await?;
    Ok(())
}

/// Ends a session; its OAuth flows go with it (ON DELETE CASCADE).
pub async fn delete(exec: impl PgExecutor<'_>, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM web_sessions WHERE id = $1", id)
        .execute(exec)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// How many sign-ins of the user are neither expired nor idle for longer
/// than `idle` (when there is an idle time), and how many rows of sign-ins
/// there are in all (expired and idle ones are kept until the sweeper's
/// grace has passed).
pub async fn count_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
    idle: Option<std::time::Duration>,
) -> Result<(i64, i64), sqlx::Error> {
    // No index by user: a sequential scan, for an operator's command now
    // and then, rather than an index every sign-in writes.
    let counted = sqlx::query!(
        r#"SELECT count(*) FILTER (
                      WHERE expires_at > now()
                        AND ($3::float8 IS NULL OR last_seen_at >= now() - make_interval(secs => $3))
                  ) AS "live!",
                  count(*) AS "all!"
             FROM web_sessions
            WHERE issuer = $1 AND subject = $2"#,
        user.issuer(),
        user.subject(),
        idle.map(|d| d.as_secs_f64()),
    )
    .fetch_one(exec)
    .await?;
    Ok((counted.live, counted.all))
}

/// Ends every sign-in of the user, expired or not; their unfinished
/// OAuth flows go with them (ON DELETE CASCADE). Returns how many of them
/// had not expired: the browsers signed out.
pub async fn delete_for_user(
    exec: impl PgExecutor<'_>,
    user: UserRef<'_>,
) -> Result<u64, sqlx::Error> {
    let live = sqlx::query_scalar!(
        r#"WITH gone AS (
               DELETE FROM web_sessions WHERE issuer = $1 AND subject = $2 RETURNING expires_at)
           SELECT count(*) FILTER (WHERE expires_at > now()) AS "n!" FROM gone"#,
        user.issuer(),
        user.subject(),
    )
    .fetch_one(exec)
    .await?;
    Ok(u64::try_from(live).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_leaves_out_the_csrf_secret() {
        let now = Utc::now();
        let session = WebSession {
            id: Uuid::nil(),
            issuer: "https://idp.example".to_owned(),
            subject: "alice".to_owned(),
            display_name: None,
            csrf_secret: b"csrf-secret-bytes".to_vec(),
            created_at: now,
            expires_at: now,
            last_seen_at: now,
            pending_ticket_id: None,
        };
        let printed = format!("{session:?}");
        assert!(printed.contains("alice"), "{printed}");
        assert!(!printed.contains("csrf"), "{printed}");
        // Nor the bytes themselves, as a list of numbers.
        assert!(
            !printed.contains(&format!("{:?}", session.csrf_secret)),
            "{printed}"
        );
    }
}
