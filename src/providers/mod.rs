//! Third-party providers: the catalog built from settings over the entries
//! shipped in `catalog/` (data, not code: see `entry`), and
//! everything that talks OAuth 2.0 or HTTP to a provider — the authorize URL,
//! code exchange with PKCE, refresh, RFC 7009 revocation, the account
//! identity, and API calls made as the user.
//!
//! Nothing here touches the database: the connection vault stores what these
//! functions return, and the web pages drive the browser flow. Every request
//! goes through the `reqwest::Client` the caller passes in, which must not
//! follow redirects (see [`outbound_http_client`]).
//!
//! Tokens, codes, verifiers and client secrets stay in `SecretString`s or
//! borrowed `&str`s; no error message, `Debug` output or log line carries
//! one.

mod address_guard;
mod api;
mod catalog;
mod check;
mod credential;
mod credential_calls;
mod endpoints;
mod entry;
mod error;
mod guard;
mod http;
mod identity;
mod listing;
mod oauth;
mod per_connection;
mod pkce;
mod provider;
mod quirks;
mod rate_limit;
mod redact;
mod resolve;
mod revoke;
mod scopes;
mod shipped;
mod template;
mod token_answer;

#[cfg(test)]
pub(crate) mod test_catalog;

use std::{collections::BTreeMap, time::Duration};

use secrecy::SecretString;

pub use address_guard::{PublicOnly, guarded, is_public};
pub use catalog::ProviderCatalog;
pub use credential::{CheckedCredential, CredentialField, FieldCredential, FormProblem};
pub use endpoints::Endpoint;
pub use error::{ProviderConfigError, ProviderError};
pub use listing::catalog_markdown;
pub use oauth::{Learned, Refreshed};
pub use per_connection::ConnectionEndpoints;
pub use pkce::PkcePair;
pub use rate_limit::RateLimited;

/// The outbound HTTP client for identity providers and third-party
/// providers: never follows redirects, bounded connect and total times.
pub fn outbound_http_client() -> Result<reqwest::Client, reqwest::Error> {
    outbound_http_builder()
        .timeout(Duration::from_secs(15))
        .build()
}

/// [`outbound_http_client`] before its total time limit is set, for
/// callers with a limit of their own (webhook deliveries).
pub fn outbound_http_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("mcp-connect/", env!("CARGO_PKG_VERSION")))
}
pub use provider::Provider;

/// What a token endpoint granted. `refresh_token` is `None` when the answer
/// carried none — on refresh that usually means "keep the one you have"
/// (Google never sends a new one).
#[derive(Debug)]
pub struct TokenSet {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub expires_in: Option<Duration>,
    /// When the answer came: `expires_in` counts from then, however long
    /// the account's lookup or a lock wait takes before it is stored.
    pub received: std::time::Instant,
    /// Granted scopes when the provider said (it may grant fewer than asked).
    pub scopes: Option<Vec<String>>,
    pub token_type: String,
}

/// Who the connected account is at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Stable id at the provider (GitHub's numeric id, Google's `sub`, …).
    pub id: String,
    /// What people recognise ("octocat", "alice@example.com").
    pub label: String,
}

/// RFC 7009 `token_type_hint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenHint {
    AccessToken,
    RefreshToken,
}

impl TokenHint {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenHint::AccessToken => "access_token",
            TokenHint::RefreshToken => "refresh_token",
        }
    }
}

/// An API call as the user, as an MCP client asked for it. Every field is
/// untrusted (it comes from a model); [`Provider::api_request`] checks them.
#[derive(Debug, Clone, Default)]
pub struct ApiRequest {
    pub method: String,
    /// Relative to the provider's API base URL, e.g. `user/repos`.
    pub path: String,
    pub query: Option<serde_json::Map<String, serde_json::Value>>,
    pub body: Option<serde_json::Value>,
}

/// A stored connection's credential, as calls to its provider take it.
#[derive(Clone, Copy)]
pub struct Credential<'a> {
    /// The OAuth access token, or an API-key or Basic credential as
    /// [`FieldCredential::to_secret`] wrote it.
    pub secret: &'a str,
    /// Only to be hidden from what the provider answers.
    pub refresh_token: Option<&'a str>,
    /// The connection's parameters (a Datadog site).
    pub params: &'a BTreeMap<String, String>,
}

/// A provider's answer to an [`ApiRequest`], safe to show to the client.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    pub content_type: Option<String>,
    /// Parsed JSON, or the text as a JSON string; for a redirect, an object
    /// naming the target path only.
    pub body: serde_json::Value,
    /// The body was cut at the provider's `max_response_bytes`.
    pub truncated: bool,
    /// The provider refused the access token (HTTP 401, or Slack's
    /// `invalid_auth`-style errors): refresh, or ask the user to reconnect.
    pub token_rejected: bool,
    /// The error code of a failure the provider reports in its own
    /// envelope with a success status (Slack's `{"ok": false, "error":
    /// "missing_scope"}` at HTTP 200), cleaned for a message.
    pub envelope_error: Option<String>,
    /// The provider is rate limiting (429, or GitHub's 403 that says so).
    pub rate_limited: Option<RateLimited>,
}
