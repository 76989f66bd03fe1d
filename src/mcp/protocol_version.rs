//! The `MCP-Protocol-Version` header of a POSTed request, held to the
//! versions this server serves (streamable-http.mdx, "Protocol Version
//! Header"). rmcp lets through what this server must refuse: a request
//! without the header is served as 2025-03-26 (a server that does not
//! serve clients older than 2025-06-18 MUST refuse it), one naming a
//! version rmcp knows but this server does not serve (2025-06-18, say) is
//! served in it, and an unknown one gets a plain-text 400 instead of the
//! `UnsupportedProtocolVersionError` that tells a client what to retry
//! with.
//!
//! Exempt, as the spec has them: `initialize` (a 2025-11-25 client's first
//! request may lack the header, and its version is negotiated in the body,
//! so it is rmcp's), and notifications and responses (only requests are
//! answered). A request with a supported version costs one header lookup;
//! the body is read only when the header is missing or refused.

use actix_web::HttpResponse;
use rmcp::model::ProtocolVersion;
use serde::Deserialize;
use serde_json::{Value, json};

use super::server::SUPPORTED_VERSIONS;

/// `HeaderMismatch`: a required standard header is missing or malformed.
const HEADER_MISMATCH: i32 = -32020;
/// `UnsupportedProtocolVersionError`.
const UNSUPPORTED_VERSION: i32 = -32022;

/// The longest requested version an error repeats (versions are dates).
const MAX_ECHO: usize = 32;

/// What the header says.
enum Header<'a> {
    Missing,
    /// Not one visible-ASCII value, or more than one.
    Malformed,
    Version(&'a str),
}

/// The refusal of a request whose header this server cannot serve it
/// under, or `None` to go on. `method_seen` is told the refused request's
/// method, for the access line.
pub(super) fn refusal(
    headers: &http::HeaderMap,
    body: &[u8],
    method_seen: impl FnOnce(&str),
) -> Option<HttpResponse> {
    let header = header(headers);
    if let Header::Version(version) = header
        && is_supported(version)
    {
        return None;
    }
    // The rare path: is it a request that needs the header at all?
    let request = serde_json::from_slice::<Request>(body).ok()?;
    let id = request.id?;
    if request.method == "initialize" {
        return None;
    }
    method_seen(&request.method);
    if !super::bridge::is_request_id(&id) {
        return Some(super::bridge::invalid_request_id());
    }
    Some(match header {
        Header::Missing => {
            tracing::info!("mcp: request without MCP-Protocol-Version refused");
            error(
                id,
                HEADER_MISMATCH,
                "Header mismatch: the MCP-Protocol-Version header is required".to_owned(),
                None,
            )
        }
        Header::Malformed => {
            tracing::info!("mcp: malformed MCP-Protocol-Version refused");
            error(
                id,
                HEADER_MISMATCH,
                "Header mismatch: the MCP-Protocol-Version header must be one version".to_owned(),
                None,
            )
        }
        Header::Version(requested) => {
            let requested: String = requested.chars().take(MAX_ECHO).collect();
            tracing::info!(requested, "mcp: unsupported protocol version refused");
            let supported: Vec<&str> = SUPPORTED_VERSIONS.iter().map(|v| v.as_str()).collect();
            error(
                id,
                UNSUPPORTED_VERSION,
                format!(
                    "Unsupported protocol version: {requested} (supported: {})",
                    supported.join(", ")
                ),
                Some(json!({ "requested": requested, "supported": supported })),
            )
        }
    })
}

fn header(headers: &http::HeaderMap) -> Header<'_> {
    use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
    let mut values = headers.get_all(HEADER_MCP_PROTOCOL_VERSION).iter();
    match (values.next(), values.next()) {
        (None, _) => Header::Missing,
        (Some(value), None) => match value.to_str() {
            Ok(v) if !v.is_empty() => Header::Version(v),
            _ => Header::Malformed,
        },
        (Some(_), Some(_)) => Header::Malformed,
    }
}

fn is_supported(version: &str) -> bool {
    SUPPORTED_VERSIONS
        .iter()
        .any(|v: &ProtocolVersion| v.as_str() == version)
}

/// Just enough of a JSON-RPC message to tell a request from the rest.
#[derive(Deserialize)]
struct Request {
    /// Absent in a notification.
    id: Option<Value>,
    method: String,
}

/// A JSON-RPC error at HTTP 400, as the spec wants for both codes.
fn error(id: Value, code: i32, message: String, data: Option<Value>) -> HttpResponse {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    HttpResponse::BadRequest().json(json!({ "jsonrpc": "2.0", "id": id, "error": error }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;

    fn headers(values: &[&str]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        for v in values {
            headers.append(HEADER_MCP_PROTOCOL_VERSION, v.parse().unwrap());
        }
        headers
    }

    fn status_of(values: &[&str], body: &str) -> Option<u16> {
        refusal(&headers(values), body.as_bytes(), |_| {}).map(|r| r.status().as_u16())
    }

    const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

    #[test]
    fn a_supported_version_goes_on_without_reading_the_body() {
        assert_eq!(status_of(&["2026-07-28"], "not even json"), None);
        assert_eq!(status_of(&["2025-11-25"], LIST), None);
    }

    #[test]
    fn a_request_without_the_header_or_with_another_version_is_refused() {
        assert_eq!(status_of(&[], LIST), Some(400));
        assert_eq!(status_of(&["2025-06-18"], LIST), Some(400));
        assert_eq!(status_of(&["2025-03-26"], LIST), Some(400));
        assert_eq!(status_of(&["2099-01-01"], LIST), Some(400));
        assert_eq!(status_of(&["2026-07-28", "2026-07-28"], LIST), Some(400));
    }

    #[test]
    fn initialize_notifications_and_unreadable_bodies_are_left_to_the_rest() {
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let response = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        for body in [initialize, notification, response, "{", "[]"] {
            assert_eq!(status_of(&[], body), None, "{body}");
            assert_eq!(status_of(&["2099-01-01"], body), None, "{body}");
        }
    }
}
