//! The tables that bound the service's use of Postgres and its own data:
//! `[database]` (time limits on every statement, connection and the wait
//! for Postgres at start-up) and `[audit]` (how long audit rows are kept).

use std::time::Duration;

use serde::Deserialize;

use super::{ConfigError, Settings, defaults, lenient};

/// How long in-flight requests may finish after SIGTERM before the server
/// stops. Connect waits and outbound HTTP calls are bounded below it, so
/// every request gets its answer.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(30);

/// The longest `flow.connect_wait_ms` accepted: well inside the drain.
pub const MAX_CONNECT_WAIT_MS: u64 = 15_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    /// Postgres cancels a statement that runs longer (`statement_timeout`), in milliseconds.
    #[serde(
        default = "defaults::statement_timeout_ms",
        deserialize_with = "lenient::number"
    )]
    pub statement_timeout_ms: u64,
    /// Postgres gives up waiting for a row lock after this long (`lock_timeout`), in milliseconds.
    #[serde(
        default = "defaults::lock_timeout_ms",
        deserialize_with = "lenient::number"
    )]
    pub lock_timeout_ms: u64,
    /// Opening a connection (and waiting for a pooled one) gives up after this long, in seconds.
    #[serde(
        default = "defaults::connect_timeout_secs",
        deserialize_with = "lenient::number"
    )]
    pub connect_timeout_secs: u64,
    /// How long `serve` keeps trying to reach Postgres at start-up, in seconds.
    #[serde(
        default = "defaults::startup_timeout_secs",
        deserialize_with = "lenient::number"
    )]
    pub startup_timeout_secs: u64,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            statement_timeout_ms: defaults::statement_timeout_ms(),
            lock_timeout_ms: defaults::lock_timeout_ms(),
            connect_timeout_secs: defaults::connect_timeout_secs(),
            startup_timeout_secs: defaults::startup_timeout_secs(),
        }
    }
}

impl DatabaseSettings {
    pub fn statement_timeout(&self) -> Duration {
        Duration::from_millis(self.statement_timeout_ms)
    }
    pub fn lock_timeout(&self) -> Duration {
        Duration::from_millis(self.lock_timeout_ms)
    }
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }
    pub fn startup_timeout(&self) -> Duration {
        Duration::from_secs(self.startup_timeout_secs)
    }
    /// How long this side waits for one database step (taking a
    /// connection and running a statement): a frozen server cannot cancel
    /// its own statements, so the client gives up a little after it would.
    pub fn deadline(&self) -> Duration {
        self.statement_timeout() + Duration::from_secs(1)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSettings {
    /// Audit rows older than this many days are deleted by the sweeper and by `purge`.
    #[serde(
        default = "defaults::audit_retention_days",
        deserialize_with = "lenient::number"
    )]
    pub retention_days: u32,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            retention_days: defaults::audit_retention_days(),
        }
    }
}

impl AuditSettings {
    pub fn retention(&self) -> chrono::Duration {
        chrono::Duration::days(i64::from(self.retention_days))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevocationSettings {
    /// A disconnect's revocation the provider failed is tried again for
    /// this many hours after the disconnect, then given up.
    #[serde(
        default = "defaults::revocation_retry_hours",
        deserialize_with = "lenient::number"
    )]
    pub retry_hours: u32,
    /// How often each instance looks for revocations due to be tried
    /// again, in seconds.
    #[serde(
        default = "defaults::revocation_retry_every_secs",
        deserialize_with = "lenient::number"
    )]
    pub retry_every_secs: u64,
}

impl Default for RevocationSettings {
    fn default() -> Self {
        Self {
            retry_hours: defaults::revocation_retry_hours(),
            retry_every_secs: defaults::revocation_retry_every_secs(),
        }
    }
}

impl RevocationSettings {
    /// How long after a disconnect its revocation is still tried.
    pub fn retry_for(&self) -> chrono::Duration {
        chrono::Duration::hours(i64::from(self.retry_hours))
    }

    /// How often each instance tries the revocations due.
    pub fn retry_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.retry_every_secs)
    }
}

/// How many times at least every instance looks for revocations due
/// within `revocation.retry_hours`.
const LOOKS_PER_WINDOW: u64 = 4;

impl Settings {
    /// The checks on the tables of this file and on waits that must end
    /// inside the shutdown drain.
    pub(super) fn validate_operations(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.to_owned(),
            message,
        };
        let db = &self.database;
        for (key, value, low, high) in [
            (
                "database.statement_timeout_ms",
                db.statement_timeout_ms,
                100,
                3_600_000,
            ),
            (
                "database.lock_timeout_ms",
                db.lock_timeout_ms,
                100,
                3_600_000,
            ),
            (
                "database.connect_timeout_secs",
                db.connect_timeout_secs,
                1,
                300,
            ),
            (
                "database.startup_timeout_secs",
                db.startup_timeout_secs,
                0,
                3600,
            ),
            (
                "audit.retention_days",
                u64::from(self.audit.retention_days),
                1,
                36_500,
            ),
            (
                "revocation.retry_hours",
                u64::from(self.revocation.retry_hours),
                1,
                720,
            ),
            (
                "revocation.retry_every_secs",
                self.revocation.retry_every_secs,
                10,
                3600,
            ),
            (
                "flow.accounts_per_provider",
                u64::from(self.flow.accounts_per_provider),
                1,
                1000,
            ),
        ] {
            if !(low..=high).contains(&value) {
                return Err(invalid(key, format!("must be between {low} and {high}")));
            }
        }
        // A period as long as the window would give a failed revocation
        // one retry or none: at least four looks within the window.
        let window_secs = u64::from(self.revocation.retry_hours) * 3600;
        if self
            .revocation
            .retry_every_secs
            .saturating_mul(LOOKS_PER_WINDOW)
            > window_secs
        {
            return Err(invalid(
                "revocation.retry_every_secs",
                format!(
                    "must be at most a quarter of revocation.retry_hours ({} s with a window of {} h), or a failed revocation is hardly tried again before it is given up",
                    window_secs / LOOKS_PER_WINDOW,
                    self.revocation.retry_hours
                ),
            ));
        }
        if self.flow.connect_wait_ms > MAX_CONNECT_WAIT_MS {
            return Err(invalid(
                "flow.connect_wait_ms",
                format!(
                    "must be at most {MAX_CONNECT_WAIT_MS} (waits end inside the {} s shutdown drain)",
                    SHUTDOWN_DRAIN.as_secs()
                ),
            ));
        }
        Ok(())
    }
}
