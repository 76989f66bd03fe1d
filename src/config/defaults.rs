//! The values a setting takes when neither the file nor the environment sets
//! it, named in the `#[serde(default = "defaults::…")]` attributes.

use std::net::SocketAddr;

use super::LogFormat;

pub fn bind() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 8080))
}
pub fn yes() -> bool {
    true
}
pub fn db_max_connections() -> u32 {
    20
}
pub fn max_body_bytes() -> usize {
    1024 * 1024
}
pub fn log_format() -> LogFormat {
    LogFormat::Json
}
pub fn subject_claim() -> String {
    "sub".to_owned()
}
pub fn leeway_secs() -> u64 {
    30
}
pub fn ticket_ttl_secs() -> u64 {
    600
}
pub fn request_state_ttl_secs() -> u64 {
    600
}
pub fn links_per_minute() -> u32 {
    60
}
pub fn accounts_per_provider() -> u32 {
    20
}
pub fn connect_wait_ms() -> u64 {
    5000
}
pub fn page_timeout_secs() -> u64 {
    60
}
pub fn session_ttl_secs() -> u64 {
    8 * 3600
}
pub fn session_idle_secs() -> u64 {
    3600
}
pub fn statement_timeout_ms() -> u64 {
    5000
}
pub fn lock_timeout_ms() -> u64 {
    5000
}
pub fn connect_timeout_secs() -> u64 {
    5
}
pub fn startup_timeout_secs() -> u64 {
    60
}
pub fn audit_retention_days() -> u32 {
    90
}
/// Three days: a provider's outage over a long weekend still ends with
/// the grants revoked.
pub fn revocation_retry_hours() -> u32 {
    72
}

/// As often as the first wait after a failed revocation, so that wait is
/// what it says.
pub fn revocation_retry_every_secs() -> u64 {
    60
}

/// One year: what HSTS preload lists ask for.
pub fn hsts_max_age_secs() -> u64 {
    365 * 24 * 3600
}

pub fn body_read_timeout_secs() -> u64 {
    15
}

/// Three times the 5 s after which common MCP clients' pools (Python's
/// httpx, Node's undici) drop an idle connection themselves, so they never
/// send on one the server is closing; short enough that idle connections
/// do not hold a shutdown's drain for long.
pub fn keep_alive_secs() -> u64 {
    15
}

/// A day: a receiver down for a night still gets every event.
pub fn webhook_retry_for_secs() -> u64 {
    24 * 3600
}
pub fn webhook_first_retry_ms() -> u64 {
    5000
}
pub fn webhook_timeout_secs() -> u64 {
    10
}
pub fn webhook_poll_interval_ms() -> u64 {
    1000
}
pub fn webhook_failed_retention_days() -> u32 {
    7
}
