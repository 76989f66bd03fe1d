//! Every error an MCP client can be answered with, and the one place that
//! turns them into JSON-RPC errors (`From<RequestError> for ErrorData`).
//! Tools, resources and the connection service say *what* went wrong with
//! a [`RequestError`]; codes, messages and `data` are decided here only, so
//! two paths that mean the same thing cannot drift apart.
//!
//! A database outage is not a server bug: a request that failed because
//! Postgres is away gets [`UNAVAILABLE_CODE`] with a message that says to
//! retry, and the bridge sends it as HTTP 503 with `Retry-After`. `-32603`
//! stays for real bugs, whose cause goes to the log only.

use std::time::Duration;

use rmcp::model::{ErrorCode, ErrorData};
use serde_json::json;
use uuid::Uuid;

use super::state::INVALID_STATE_MESSAGE;

// This server's own error codes. basic/index.mdx: new codes SHOULD lie
// outside JSON-RPC's reserved range (-32768 to -32000), whose -32000 to
// -32019 are legacy that new implementations SHOULD NOT use at all, and
// whose -32020 to -32099 belong to the MCP specification.

/// Temporarily unavailable (the database, a provider's token endpoint, a
/// key): retry after `data.retryAfterSeconds`.
pub const UNAVAILABLE_CODE: i32 = -31000;
/// The user declined to connect the account a resource needs.
pub const DECLINED_CODE: i32 = -31001;
/// The user dismissed the request to connect; reading again starts over.
pub const CANCELLED_CODE: i32 = -31002;
/// The user's share of new connect links for this minute is spent.
pub const TOO_MANY_LINKS_CODE: i32 = -31003;
/// The account's token has expired and its provider refuses to renew it,
/// without saying the grant is dead: retrying does not help; the message
/// says whether the operator must act (this server's client refused) or
/// connecting again may.
pub const REFRESH_REFUSED_CODE: i32 = -31004;
/// The provider refused the authorization the user was sent to give
/// (its `error` code, not the user's own decline): the message says
/// whether reading again, other scopes or the operator would help.
pub const AUTHORIZATION_REFUSED_CODE: i32 = -31005;

/// Seconds the client is asked to wait before retrying.
pub const RETRY_AFTER_SECS: u64 = 5;

/// 2025-11-25 `URLElicitationRequiredError`.
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// An elicitation mode a client may not have declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitationMode {
    Url,
    Form,
}

/// What went wrong with a request, as the client is told.
#[derive(Debug)]
pub enum RequestError {
    /// Arguments that do not fit the tool's schema or rules.
    InvalidArguments(String),
    UnknownTool(String),
    /// `known`: the provider names there are, for the model's next try.
    UnknownProvider {
        name: String,
        known: Vec<String>,
    },
    /// A `requestState` that cannot be used, whatever the reason (the
    /// reason goes to the log and the audit, never to the client).
    InvalidState,
    /// A retry's answer to this server's own question (under `key`) that
    /// is not an elicitation result.
    MalformedAnswer {
        key: String,
    },
    /// The per-user limit on connect links.
    TooManyLinks {
        retry_after: Duration,
    },
    /// 2025-11-25 clients: the user must open `url` first.
    UrlElicitationRequired {
        provider: String,
        message: String,
        ticket_id: Uuid,
        url: String,
        /// Where the user connects by hand, for a client that cannot open
        /// the link.
        connections_page: String,
    },
    /// The client did not declare the elicitation mode this needs; `how`
    /// says what the user can do instead.
    MissingCapability {
        mode: ElicitationMode,
        how: String,
    },
    ResourceNotFound {
        uri: String,
    },
    /// The user declined, or cancelled, connecting `provider`.
    Declined {
        provider: String,
    },
    Cancelled {
        provider: String,
    },
    /// The user did not allow this client to use their `provider` account.
    ApprovalDenied {
        provider: String,
    },
    /// The provider did not answer as expected (the cause is logged where
    /// it happened).
    ProviderFailed {
        provider: String,
    },
    /// The token has expired and `provider` could not renew it: retry
    /// later.
    ProviderUnavailable {
        provider: String,
    },
    /// The token has expired and its provider refuses to renew it:
    /// `message` says who may mend it.
    RefreshRefused {
        message: String,
    },
    /// The provider refused the authorization the user was sent to give:
    /// `message` says what would help.
    AuthorizationRefused {
        message: String,
    },
    /// The database did not answer: retry shortly.
    Unavailable,
    /// This instance cannot open the stored credential (its ring lacks the
    /// key it was sealed by; another instance may have it): retry shortly.
    KeyMissing,
    /// A bug or an unexpected failure, already logged.
    Internal,
}

impl From<RequestError> for ErrorData {
    fn from(e: RequestError) -> Self {
        use RequestError as E;
        match e {
            E::InvalidArguments(message) => ErrorData::invalid_params(message, None),
            E::UnknownTool(name) => {
                ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
            }
            E::UnknownProvider { name, known } => ErrorData::invalid_params(
                format!(
                    "Unknown provider `{name}`. Available providers: {}.",
                    known.join(", ")
                ),
                None,
            ),
            E::InvalidState => ErrorData::invalid_params(INVALID_STATE_MESSAGE, None),
            E::MalformedAnswer { key } => ErrorData::invalid_params(
                format!(
                    "inputResponses.{key} is not an elicitation result: an object whose action is \"accept\", \"decline\" or \"cancel\", with form content (strings, numbers, booleans or arrays of strings) when accepted"
                ),
                None,
            ),
            E::TooManyLinks { retry_after } => {
                let secs = retry_after.as_secs().max(1);
                ErrorData::new(
                    ErrorCode(TOO_MANY_LINKS_CODE),
                    format!(
                        "Too many connect links were requested for this account in the last minute. Try again in {secs} s."
                    ),
                    Some(json!({ "retryable": true, "retryAfterSeconds": secs })),
                )
            }
            E::UrlElicitationRequired {
                provider,
                message,
                ticket_id,
                url,
                connections_page,
            } => ErrorData::new(
                ErrorCode(URL_ELICITATION_REQUIRED),
                format!(
                    "Your {provider} account is needed to continue. Open the link this error carries, \
                     or go to {connections_page} and connect the account (or allow this client) there, then call again."
                ),
                Some(json!({
                    "elicitations": [{
                        "mode": "url",
                        // The ticket's id, never the ticket itself.
                        "elicitationId": ticket_id.to_string(),
                        "url": url,
                        "message": message,
                    }]
                })),
            ),
            E::MissingCapability { mode, how } => {
                let mode = match mode {
                    ElicitationMode::Url => "url",
                    ElicitationMode::Form => "form",
                };
                ErrorData::new(
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    how,
                    Some(json!({ "requiredCapabilities": { "elicitation": { mode: {} } } })),
                )
            }
            E::ResourceNotFound { uri } => ErrorData::resource_not_found(
                format!("No such resource: {uri}"),
                Some(json!({ "uri": uri })),
            ),
            E::Declined { provider } => ErrorData::new(
                ErrorCode(DECLINED_CODE),
                format!("The user declined to connect {provider}."),
                None,
            ),
            E::ApprovalDenied { provider } => ErrorData::new(
                ErrorCode(DECLINED_CODE),
                format!("The user did not allow this client to use their {provider} account."),
                None,
            ),
            E::Cancelled { provider } => ErrorData::new(
                ErrorCode(CANCELLED_CODE),
                format!("Connecting {provider} was cancelled. Read the resource again to retry."),
                None,
            ),
            E::ProviderFailed { provider } => {
                ErrorData::internal_error(format!("{provider} did not answer as expected."), None)
            }
            E::ProviderUnavailable { provider } => ErrorData::new(
                ErrorCode(UNAVAILABLE_CODE),
                format!(
                    "{provider} could not renew this account's access just now. Please try again in a minute."
                ),
                Some(json!({ "retryable": true, "retryAfterSeconds": 60 })),
            ),
            E::RefreshRefused { message } => {
                ErrorData::new(ErrorCode(REFRESH_REFUSED_CODE), message, None)
            }
            E::AuthorizationRefused { message } => {
                ErrorData::new(ErrorCode(AUTHORIZATION_REFUSED_CODE), message, None)
            }
            E::Unavailable => ErrorData::new(
                ErrorCode(UNAVAILABLE_CODE),
                "The service is temporarily unavailable (its database did not answer). Please try again in a few seconds.",
                Some(json!({ "retryable": true, "retryAfterSeconds": RETRY_AFTER_SECS })),
            ),
            E::KeyMissing => ErrorData::new(
                ErrorCode(UNAVAILABLE_CODE),
                "The service is temporarily unable to use this connection. Please try again in a few seconds.",
                Some(json!({ "retryable": true, "retryAfterSeconds": RETRY_AFTER_SECS })),
            ),
            E::Internal => ErrorData::internal_error("Internal error", None),
        }
    }
}

/// The error for a failed step: `Unavailable` when the cause is a passing
/// database fault, else `Internal`. Either way the cause goes to the log
/// only, with `what` failed.
pub fn failure(e: impl Into<anyhow::Error>, what: &'static str) -> RequestError {
    let e: anyhow::Error = e.into();
    if let Some(missing) = e.downcast_ref::<crate::connect::stale_keys::KeyMissing>() {
        tracing::error!(
            connection = %missing.connection,
            key_id = %missing.key_id,
            what,
            "a stored token is sealed by a key this instance lacks; add the key to MCP_CONNECT_KEYS (the row is left as it is)"
        );
        return RequestError::KeyMissing;
    }
    if crate::db::faults::is_transient_chain(&e) {
        tracing::warn!(error = %format!("{e:#}"), what, "database unavailable");
        RequestError::Unavailable
    } else {
        tracing::error!(error = %format!("{e:#}"), what, "request failed");
        RequestError::Internal
    }
}

/// [`failure`] as the JSON-RPC error, for `map_err` in handlers.
pub fn internal(e: impl Into<anyhow::Error>) -> ErrorData {
    failure(e, "request").into()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// JSON-RPC errors are made in this file only: any other file of
    /// `src/` that builds one by hand fails this test (it did, in seven
    /// files, before this mapping).
    #[test]
    fn no_json_rpc_error_is_built_outside_this_mapping() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        visit(&src, &mut |path, text| {
            if path.ends_with("connect/errors.rs") {
                return;
            }
            // `ErrorData::from(…)` goes through the mapping; any other
            // associated function (`new`, `invalid_params`, …) builds one.
            for (at, _) in text.match_indices("ErrorData::") {
                let rest = &text[at + "ErrorData::".len()..];
                if !rest.starts_with("from(") {
                    let line = text[..at].lines().count();
                    found.push(format!("{}:{line}", path.display()));
                }
            }
        });
        assert!(found.is_empty(), "{found:#?}");
    }

    fn visit(dir: &Path, f: &mut dyn FnMut(&Path, &str)) {
        for entry in std::fs::read_dir(dir).expect("src is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                visit(&path, f);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file is readable");
                f(&path, &text);
            }
        }
    }
}
