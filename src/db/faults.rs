//! Time limits on Postgres and what counts as a passing fault. Postgres
//! enforces `statement_timeout` and `lock_timeout` itself; a frozen or
//! unreachable server enforces nothing, so every step that waits on it
//! here also has a client-side [`deadline`]. A failure that retrying can
//! cure ([`is_transient`]) is answered 503 with `Retry-After`, not as a bug.

use std::{future::Future, time::Duration};

use sqlx::postgres::PgConnectOptions;

use crate::config::DatabaseSettings;

/// Every connection runs with the configured statement and lock timeouts.
pub fn with_timeouts(options: PgConnectOptions, s: &DatabaseSettings) -> PgConnectOptions {
    options.options([
        ("statement_timeout", format!("{}ms", s.statement_timeout_ms)),
        ("lock_timeout", format!("{}ms", s.lock_timeout_ms)),
    ])
}

/// The error a database step that passed its deadline ends with.
pub fn timed_out() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the database did not answer in time",
    ))
}

/// Runs one database step, giving up after `limit` with [`timed_out`].
/// Dropping the step drops its connection mid-statement: it is closed,
/// never reused. A step of several statements may fail otherwise too (its
/// error is then any that a database error converts into).
pub async fn deadline<T, E: From<sqlx::Error>>(
    limit: Duration,
    step: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    tokio::time::timeout(limit, step)
        .await
        .unwrap_or_else(|_| Err(timed_out().into()))
}

/// A failure of the database's availability, not of the request: the
/// server is unreachable, restarting, out of connections, or too slow.
pub fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d.code().is_some_and(|code| {
            // 08: connection exception; 53300: too many connections;
            // 57014: statement timeout; 57P01-03: shutting down or
            // starting up; 55P03: lock timeout; 40001/40P01: retry.
            code.starts_with("08")
                || matches!(
                    code.as_ref(),
                    "53300" | "57014" | "57P01" | "57P02" | "57P03" | "55P03" | "40001" | "40P01"
                )
        }),
        _ => false,
    }
}

/// Whether a statement that failed with `e` may have run (and, outside a
/// transaction, committed) all the same: its answer was lost on the way
/// (the connection broke, or [`deadline`] gave up on it), while the server
/// may still have had it. An error the server answered, or one before the
/// statement was sent (no connection to be had), says it did not.
pub fn may_have_run(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed
    )
}

/// [`is_transient`] anywhere in an error's chain of causes.
pub fn is_transient_chain(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<sqlx::Error>()
            .is_some_and(is_transient)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_past_its_deadline_is_a_transient_failure() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        };
        let e = deadline(Duration::from_millis(10), slow).await.unwrap_err();
        assert!(is_transient(&e));
        assert!(is_transient_chain(
            &anyhow::Error::new(e).context("reading")
        ));
        assert!(!is_transient(&sqlx::Error::RowNotFound));
    }

    /// A statement given up on may still run; one the pool never sent, or
    /// the server answered, did not.
    #[tokio::test]
    async fn only_a_lost_answer_may_have_run() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(())
        };
        let given_up = deadline(Duration::from_millis(10), slow).await.unwrap_err();
        assert!(may_have_run(&given_up));
        let broken = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(may_have_run(&broken));
        assert!(!may_have_run(&sqlx::Error::PoolTimedOut));
        assert!(!may_have_run(&sqlx::Error::RowNotFound));
    }
}
