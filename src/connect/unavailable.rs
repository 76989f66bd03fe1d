//! A database outage is not a server bug: a request that failed because
//! Postgres is away gets a JSON-RPC error of its own code with a message
//! that says to retry, and the bridge sends it as HTTP 503 with
//! `Retry-After`. `-32603` stays for real bugs. It lives with the
//! connection service, whose every step may meet the fault; the HTTP layer
//! reads the code and the wait from here.

use rmcp::model::{ErrorCode, ErrorData};

/// JSON-RPC implementation-defined server error: temporarily unavailable.
pub const UNAVAILABLE_CODE: i32 = -32000;

/// Seconds the client is asked to wait before retrying.
pub const RETRY_AFTER_SECS: u64 = 5;

/// The answer for a request the database could not serve right now.
pub fn unavailable() -> ErrorData {
    ErrorData::new(
        ErrorCode(UNAVAILABLE_CODE),
        "The service is temporarily unavailable (its database did not answer). Please try again in a few seconds.",
        Some(serde_json::json!({ "retryable": true, "retryAfterSeconds": RETRY_AFTER_SECS })),
    )
}

/// The error for a failed step: [`unavailable`] when the cause is a
/// passing database fault, else the generic internal error. Either way the
/// cause goes to the log only.
pub fn failure(e: impl Into<anyhow::Error>, what: &'static str) -> ErrorData {
    let e: anyhow::Error = e.into();
    if crate::db::faults::is_transient_chain(&e) {
        tracing::warn!(error = %format!("{e:#}"), what, "database unavailable");
        unavailable()
    } else {
        tracing::error!(error = %format!("{e:#}"), what, "request failed");
        ErrorData::internal_error("Internal error", None)
    }
}
