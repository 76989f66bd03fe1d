//! One log line per MCP request: who called, which JSON-RPC method, and for
//! `tools/call` which tool and how it ended — never arguments, results,
//! tokens or connect links. The bridge writes the line when the response is
//! ready; the handler fills in the tool's part through a [`CallRecord`]
//! that travels in the request's extensions. (One line instead of an access
//! line plus a tool line: a log write is a system call on every request.)
//! The same place counts the request in the instance's metrics.

use std::{
    net::IpAddr,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolRequestParams, CallToolResponse},
    service::RequestContext,
};

use super::access_line;
use crate::{auth::Principal, metrics::McpMetrics};

pub use crate::metrics::labels::Ended;

/// How a `tools/call` ended, as the handler saw it.
#[derive(Debug)]
pub struct ToolOutcome {
    pub tool: String,
    pub retry: bool,
    pub ended: Ended,
    /// The JSON-RPC error code, when it ended with one.
    pub code: Option<i32>,
}

impl ToolOutcome {
    /// How the call `request` ended, as its `outcome` says.
    pub fn of(
        request: &CallToolRequestParams,
        outcome: &Result<CallToolResponse, ErrorData>,
    ) -> Self {
        let ended = match outcome {
            Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => Ended::ToolError,
            Ok(CallToolResponse::Complete(_)) => Ended::Complete,
            Ok(CallToolResponse::InputRequired(_)) => Ended::InputRequired,
            Ok(_) => Ended::Other,
            Err(_) => Ended::ProtocolError,
        };
        Self {
            // The client chose it: a prefix, as for the method.
            tool: crate::crypto::printable_prefix(&request.name),
            retry: request.request_state.is_some(),
            ended,
            code: outcome.as_ref().err().map(|e| e.code.0),
        }
    }
}

/// The handler's slot in the request's log line, and whether it ended
/// retryable (the bridge answers 503 then).
#[derive(Debug, Clone, Default)]
pub struct CallRecord(Arc<Slot>);

#[derive(Debug, Default)]
struct Slot {
    outcome: OnceLock<ToolOutcome>,
    /// Seconds to wait before retrying, once the request ended retryable
    /// (0: it did not).
    retry_after_secs: AtomicU64,
}

impl CallRecord {
    /// The record of the request being handled, if it came through the bridge.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<&CallRecord> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<CallRecord>())
    }

    pub fn set(&self, outcome: ToolOutcome) {
        // A request has one outcome; a second would be a bug, not news.
        let _ = self.0.outcome.set(outcome);
    }

    /// Notes a request (a tool call, a resource read) that ended with
    /// `error`: when that is "unavailable, retry" (-31000), the bridge
    /// answers 503 with a `Retry-After` of the error's own
    /// `retryAfterSeconds`, so that both say the same.
    pub fn ended_with(&self, error: &ErrorData) {
        if error.code.0 != crate::connect::errors::UNAVAILABLE_CODE {
            return;
        }
        let secs = error
            .data
            .as_ref()
            .and_then(|d| d["retryAfterSeconds"].as_u64())
            .unwrap_or(crate::connect::errors::RETRY_AFTER_SECS);
        self.0
            .retry_after_secs
            .store(secs.max(1), Ordering::Relaxed);
    }

    fn get(&self) -> Option<&ToolOutcome> {
        self.0.outcome.get()
    }

    /// The seconds to wait, where the request ended as retryable: the
    /// database was away for a moment, this instance lacks the key a
    /// stored token was sealed by, or (a resource read) the provider could
    /// not renew the token.
    pub fn unavailable(&self) -> Option<u64> {
        match self.0.retry_after_secs.load(Ordering::Relaxed) {
            0 => None,
            secs => Some(secs),
        }
    }
}

/// What the bridge learns about a request as it goes.
#[derive(Debug)]
pub struct RequestFacts {
    started: Instant,
    http_method: &'static str,
    /// The client's address (behind a trusted proxy, the one it reported).
    pub peer: Option<IpAddr>,
    /// The JSON-RPC method, when the body was a request object with a
    /// printable, reasonably short one (it is the client's string).
    pub method: Option<String>,
    /// Who sent it, once the token checked out.
    pub caller: Option<Arc<Principal>>,
    pub record: CallRecord,
}

impl RequestFacts {
    pub fn new(http_method: &str, peer: Option<IpAddr>) -> Self {
        Self {
            started: Instant::now(),
            http_method: crate::telemetry::http_method(http_method),
            peer,
            method: None,
            caller: None,
            record: CallRecord::default(),
        }
    }

    /// Keeps `method` for the log if it is printable ASCII of at most 64 bytes.
    pub fn set_method(&mut self, method: &str) {
        let printable = !method.is_empty()
            && method.len() <= 64
            && method.bytes().all(|b| b.is_ascii_graphic());
        self.method = Some(if printable { method } else { "(unprintable)" }.to_owned());
    }

    /// Writes the request's one line and counts it in `metrics`.
    pub fn write(&self, status: u16, metrics: &McpMetrics) {
        let elapsed = self.started.elapsed();
        let tool = self.record.get();
        metrics.request(self.method.as_deref(), status, elapsed);
        if let Some(t) = tool {
            metrics.tool_call(&t.tool, t.ended);
        }
        let ms = (elapsed.as_secs_f64() * 1000.0 * 100.0).round() / 100.0;
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        match crate::telemetry::json_lines() {
            Some(queue) => queue.send_line(access_line::format(
                &self.fields(status, ms),
                std::time::SystemTime::now(),
            )),
            None => self.event(status, ms),
        }
    }

    pub(super) fn fields(&self, status: u16, ms: f64) -> access_line::Fields<'_> {
        access_line::Fields {
            http: self.http_method,
            peer: self.peer,
            method: self.method.as_deref(),
            status,
            ms,
            subject: self.caller.as_deref().map(Principal::subject_for_log),
            client_id: self.caller.as_deref().map(Principal::client_id_for_log),
            tool: self.record.get(),
        }
    }

    /// The line as a `tracing` event: where no JSON line queue is set up
    /// (pretty logs, other subscribers), and the reference the JSON line
    /// is tested against.
    pub(super) fn event(&self, status: u16, ms: f64) {
        let tool = self.record.get();
        let subject = self.caller.as_deref().map(Principal::subject_for_log);
        let client_id = self.caller.as_deref().map(Principal::client_id_for_log);
        tracing::info!(
            http = self.http_method,
            peer = self.peer.map(|p| p.to_string()),
            method = self.method.as_deref(),
            status,
            ms,
            subject = subject.as_deref(),
            client_id = client_id.as_deref(),
            tool = tool.map(|t| t.tool.as_str()),
            retry = tool.map(|t| t.retry),
            ended = tool.map(|t| t.ended.as_str()),
            code = tool.and_then(|t| t.code),
            "mcp request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_printable_short_methods_are_kept() {
        let mut facts = RequestFacts::new("POST", None);
        facts.set_method("tools/call");
        assert_eq!(facts.method.as_deref(), Some("tools/call"));
        facts.set_method("a\u{1b}[31mred");
        assert_eq!(facts.method.as_deref(), Some("(unprintable)"));
        facts.set_method(&"x".repeat(65));
        assert_eq!(facts.method.as_deref(), Some("(unprintable)"));
    }

    #[test]
    fn a_tool_name_the_client_chose_is_logged_as_a_short_prefix() {
        let unknown = crate::connect::errors::RequestError::UnknownTool("x".into());
        let outcome = Err(ErrorData::from(unknown));
        let known = CallToolRequestParams::new("whoami");
        assert_eq!(ToolOutcome::of(&known, &outcome).tool, "whoami");
        let huge = CallToolRequestParams::new("x".repeat(200_000));
        let logged = ToolOutcome::of(&huge, &outcome).tool;
        assert_eq!(logged, format!("{}…", "x".repeat(32)));
        let forged = CallToolRequestParams::new("a\n\"ended\":\"complete");
        assert!(
            !ToolOutcome::of(&forged, &outcome).tool.contains('\n'),
            "control characters are escaped"
        );
    }

    #[test]
    fn a_retryable_error_is_retried_after_its_own_seconds() {
        use crate::connect::errors::{RETRY_AFTER_SECS, RequestError};
        let after = |error: RequestError| {
            let record = CallRecord::default();
            record.ended_with(&ErrorData::from(error));
            record.unavailable()
        };
        let provider = "Demo".to_owned();
        let renewal = RequestError::ProviderUnavailable { provider };
        assert_eq!(after(renewal), Some(60));
        assert_eq!(after(RequestError::Unavailable), Some(RETRY_AFTER_SECS));
        assert_eq!(after(RequestError::Internal), None);
    }

    #[test]
    fn the_first_outcome_is_kept() {
        let record = CallRecord::default();
        for ended in [Ended::Complete, Ended::Other] {
            record.set(ToolOutcome {
                tool: "whoami".into(),
                retry: false,
                ended,
                code: None,
            });
        }
        assert_eq!(record.get().map(|o| o.ended), Some(Ended::Complete));
    }
}
