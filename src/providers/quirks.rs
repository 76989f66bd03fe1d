//! What a provider's entry says about how it departs from RFC 6749, in
//! the form the calls use: client authentication, how the credential is
//! presented, and the named quirks.

use reqwest::header::{AUTHORIZATION, HeaderValue, USER_AGENT};
use url::Url;

use super::{
    Provider,
    entry::{ApiPathRules, Refresh, Revocation},
    identity::USER_AGENT_VALUE,
};

/// How the client authenticates at the token and revocation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenAuthMethod {
    ClientSecretPost,
    ClientSecretBasic,
    /// A public client: `client_id` in the body, no secret.
    None,
}

impl TokenAuthMethod {
    pub(super) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "client_secret_post" => Self::ClientSecretPost,
            "client_secret_basic" => Self::ClientSecretBasic,
            "none" => Self::None,
            _ => return None,
        })
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::ClientSecretPost => "client_secret_post",
            Self::ClientSecretBasic => "client_secret_basic",
            Self::None => "none",
        }
    }
}

/// How a credential reaches the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ApiAuth {
    Bearer,
    Header(String),
    Query(String),
}

impl ApiAuth {
    pub(super) fn parse(text: &str) -> Option<Self> {
        let valid_name = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        match text.split_once(':') {
            None if text == "bearer" => Some(Self::Bearer),
            Some(("header", name)) if valid_name(name) => Some(Self::Header(name.to_owned())),
            Some(("query", name)) if valid_name(name) => Some(Self::Query(name.to_owned())),
            _ => None,
        }
    }
}

/// Where a provider departs from RFC 6749, each named by its entry.
#[derive(Debug, Clone)]
pub(super) struct Quirks {
    /// The authorize parameter carrying scopes (`user_scope` for Slack user
    /// tokens: `scope` there asks for bot scopes).
    pub scope_param: String,
    pub scope_separator: String,
    pub pkce: bool,
    /// Extra authorize parameters (Google issues a refresh token only with
    /// `access_type=offline`, and again only with `prompt=consent`).
    pub authorize_params: Vec<(String, String)>,
    /// Fields added to the code exchange (`token_params`).
    pub token_params: Vec<(String, String)>,
    /// Authorize parameters that let the user pick another account.
    pub account_chooser: Vec<(String, String)>,
    /// Error codes meaning "the person declined", besides `access_denied`.
    pub decline_errors: Vec<String>,
    /// Token endpoint refusals that mean the grant is dead, besides
    /// `invalid_grant`: a JSON pointer and the string found there.
    pub dead_grant_answers: Vec<(String, String)>,
    pub json_token_request: bool,
    pub revocation: Revocation,
    /// Form-encoded token answers are accepted (GitHub's).
    pub form_answers: bool,
    /// Where the user's token sits in the token answer (Slack nests it).
    pub token_pointer: Option<String>,
    /// `{"ok": false, "error": …}` with HTTP 200 (Slack).
    pub ok_envelope: bool,
    pub refresh: Refresh,
    /// The entry says so in as many words (`refresh = "expiring"`): a
    /// refresh leaves the refresh token as it was. (An entry that says
    /// nothing is refreshed as `expiring` too, but may rotate.)
    pub refresh_token_kept: bool,
    /// How long an access token lives when the token answer names no
    /// `expires_in` (Salesforce: as the org says, at least 15 minutes).
    pub token_lifetime: Option<std::time::Duration>,
    /// The callback's `scope` names the granted scopes (Strava).
    pub granted_scopes_in_callback: bool,
    /// Headers on identity and API calls (GitHub wants a versioned media
    /// type; Twitch its client id).
    pub api_headers: Vec<(String, String)>,
    pub api_auth: ApiAuth,
    pub path_rules: Option<ApiPathRules>,
}

impl Provider {
    /// Whether an authorization `error` says the person declined: RFC 6749's
    /// `access_denied`, or one of the entry's own codes for it.
    pub fn is_decline(&self, error: &str) -> bool {
        error == "access_denied" || self.quirks.decline_errors.iter().any(|e| e == error)
    }

    /// A request carrying the credential as the entry presents it (bearer,
    /// its own header, or a query parameter), with the entry's headers.
    /// Answers the URL as sent, which a query credential changes.
    /// The query parameters a credential is sent in: the access token's
    /// (`api_auth = "query:…"`), or a key entry's fields' (`with_fields`).
    pub(super) fn credential_query_params(&self, with_fields: bool) -> Vec<String> {
        let query = |auth: Option<ApiAuth>| match auth {
            Some(ApiAuth::Query(name)) => Some(name),
            _ => None,
        };
        if !with_fields {
            return query(Some(self.quirks.api_auth.clone()))
                .into_iter()
                .collect();
        }
        self.field_specs
            .values()
            .filter_map(|spec| query(spec.send.as_deref().and_then(ApiAuth::parse)))
            .collect()
    }

    pub(super) fn authorized(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        mut url: Url,
        credential: &str,
    ) -> (reqwest::RequestBuilder, Url) {
        let auth: Option<(&str, String)> = match &self.quirks.api_auth {
            ApiAuth::Bearer => Some((AUTHORIZATION.as_str(), format!("Bearer {credential}"))),
            ApiAuth::Header(name) => Some((name.as_str(), credential.to_owned())),
            ApiAuth::Query(name) => {
                url.query_pairs_mut().append_pair(name, credential);
                None
            }
        };
        let mut request = http
            .request(method, url.clone())
            .header(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
        for (name, value) in &self.quirks.api_headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some((name, value)) = auth {
            request = request.header(name, value);
        }
        (request, url)
    }
}

#[cfg(test)]
#[path = "quirks_tests.rs"]
mod tests;
