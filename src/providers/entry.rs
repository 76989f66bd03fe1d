//! One catalog entry as written in `catalog/<name>.toml` (or in an
//! operator's `[providers.<name>]` table, which is merged over it field by
//! field). Every field is optional here so that layers can be merged; which
//! ones a kind of entry needs is checked when the catalog resolves it.
//! Unknown fields are refused: a misspelt quirk must not be ignored.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::template::Pattern;
use crate::config::lenient;

/// What the user hands over to connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// The OAuth 2.0 authorization code flow.
    Oauth2,
    /// A key the user creates at the provider.
    ApiKey,
    /// A user name and password (or account id and token) sent as HTTP Basic.
    Basic,
}

impl CredentialKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oauth2 => "oauth2",
            Self::ApiKey => "api_key",
            Self::Basic => "basic",
        }
    }
}

/// How refresh works once connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refresh {
    /// Access tokens expire; the refresh token stays the same.
    Expiring,
    /// Every refresh answers a new refresh token and retires the old one.
    Rotating,
    /// Tokens do not expire; there is nothing to refresh.
    NonExpiring,
    /// Tokens expire and cannot be refreshed: the user reconnects.
    None,
}

impl Refresh {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Expiring => "expiring",
            Self::Rotating => "rotating",
            Self::NonExpiring => "non_expiring",
            Self::None => "none",
        }
    }
}

/// Data-named behaviours of the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum TokenResponseFormat {
    /// RFC 6749 JSON.
    Json,
    /// Form-encoded unless the request asked for JSON (GitHub), with errors
    /// in HTTP 200 answers.
    FormUnlessJsonAccept,
}

/// How the token request carries its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum TokenRequestFormat {
    /// RFC 6749 `application/x-www-form-urlencoded`.
    Form,
    /// A JSON object (Notion, Atlassian document only this).
    Json,
}

/// How a token is revoked at `revocation_url`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Revocation {
    /// RFC 7009: the token and its type hint in the body, with client
    /// authentication as at the token endpoint.
    Rfc7009,
    /// A POST without arguments carrying the access token as its bearer
    /// credential (Dropbox's `/2/auth/token/revoke`); it ends the grant's
    /// refresh token too, which cannot be revoked on its own.
    BearerAccessToken,
    /// The access token alone (`token`, no type hint), with client
    /// authentication and the API's headers, as at the token endpoint
    /// (Notion's `/v1/oauth/revoke`, which takes no other field and wants
    /// its `Notion-Version`); it ends the grant, refresh token included.
    AccessTokenOnly,
    /// A DELETE whose JSON body is `{"access_token": …}`, with the client
    /// as HTTP Basic whatever the token endpoint takes, and the API's
    /// headers (GitHub's `/applications/{client_id}/token`, which ends that
    /// token). Only an access token can be sent.
    DeleteJsonAccessToken,
}

/// A token endpoint refusal that means the grant is dead: the string
/// `value` at the JSON `pointer` of the answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeadGrantAnswer {
    pub pointer: String,
    pub value: String,
}

/// Answers wrapped in `{"ok": true|false, "error": …}` with HTTP 200 (Slack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ErrorEnvelope {
    OkField,
}

/// Rules on `api_request` paths beyond the base-URL check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ApiPathRules {
    /// Slack's RPC-style methods: `oauth.*`, `admin.*` and `auth.revoke`
    /// never, writes only when POST is allowed.
    SlackMethods,
}

/// Where the account id comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum AccountIdFrom {
    /// `account_id_pointer` in the identity answer.
    Response,
    /// The provider has no account to name (the identity URL only checks the
    /// credential): the id is a digest of the credential (see
    /// `identity::credential_account`).
    Credential,
}

/// A per-connection parameter the URL templates use.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParamSpec {
    /// What the connect page asks ("Your Zendesk subdomain").
    pub label: Option<String>,
    /// A regular expression the whole value must match.
    pub pattern: Option<Pattern>,
    /// `text` (default) or `url`: a URL is also limited to `allowed_hosts`.
    pub kind: Option<String>,
    pub default: Option<String>,
    /// A value that matches `pattern`, to check the templates with.
    pub example: Option<String>,
    /// For `url` parameters: the hosts an operator allows (`host` on the
    /// https port, `host:port` on that port).
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub allowed_hosts: Option<Vec<String>>,
    /// Learned after consent instead of asked: `token_response` or `lookup`.
    pub source: Option<String>,
    /// JSON pointer into the token answer or the lookup answer.
    pub pointer: Option<String>,
    /// For `lookup`: the URL to GET with the new access token.
    pub lookup_url: Option<String>,
}

/// A field of an API-key or Basic credential, and how it reaches the API.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FieldSpec {
    pub label: Option<String>,
    /// Shown on the connect page; `false` for identifiers such as an
    /// account SID, which URL templates may then use.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub secret: Option<bool>,
    pub pattern: Option<Pattern>,
    /// `bearer`, `basic_user`, `basic_password`, `header:<name>`,
    /// `query:<name>` or `none`.
    pub send: Option<String>,
}

/// A catalog entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Entry {
    pub display_name: Option<String>,
    pub kind: Option<CredentialKind>,
    /// The provider's documentation for operators.
    pub docs_url: Option<String>,
    /// Where a user creates the key (API-key and Basic kinds).
    pub key_url: Option<String>,
    /// What the connect page tells the user about the credential.
    pub instructions: Option<String>,

    pub authorize_url: Option<String>,
    pub token_url: Option<String>,
    /// When refresh goes elsewhere than `token_url`.
    pub refresh_url: Option<String>,
    pub revocation_url: Option<String>,
    /// `rfc7009` unless the provider revokes otherwise (Dropbox).
    pub revocation: Option<Revocation>,
    pub userinfo_url: Option<String>,
    /// `GET` unless the identity endpoint wants `POST` (Dropbox, GraphQL).
    pub userinfo_method: Option<String>,
    /// A JSON body for a `POST` identity request (a GraphQL query).
    pub userinfo_body: Option<serde_json::Value>,
    pub api_base_url: Option<String>,
    pub issuer: Option<String>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub require_iss: Option<bool>,

    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub scopes: Option<Vec<String>>,
    /// The authorize parameter for scopes (`user_scope` for Slack users).
    pub scope_param: Option<String>,
    pub scope_separator: Option<String>,
    /// Stripped before scopes are compared or described (Google's URLs).
    pub scope_prefix: Option<String>,
    /// Other spellings of a scope in grants (`userinfo.email` = `email`).
    pub scope_aliases: Option<BTreeMap<String, String>>,
    /// A scope and the broader one that includes it (GitHub's `repo`).
    pub scope_implied_by: Option<BTreeMap<String, String>>,
    /// Scopes the provider grants without ever naming them in the token
    /// answer's `scope` (Entra's `offline_access`): counted as granted, or
    /// every connection would seem to lack them and be asked again.
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub unlisted_scopes: Option<Vec<String>>,
    /// Plain words for scopes on the consent page.
    pub scope_descriptions: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub pkce: Option<bool>,
    /// `client_secret_post`, `client_secret_basic` or `none`.
    pub token_auth_method: Option<String>,
    pub token_request_format: Option<TokenRequestFormat>,
    pub token_response_format: Option<TokenResponseFormat>,
    /// JSON pointer to the object holding the user's token (Slack's
    /// `/authed_user`); the top level when absent or when it is not there.
    pub token_pointer: Option<String>,
    pub error_envelope: Option<ErrorEnvelope>,
    pub authorize_params: Option<BTreeMap<String, String>>,
    /// Fields added to the code exchange's token request (Shopify's
    /// `expiring = "1"`: an offline token that expires, with a refresh
    /// token, which Shopify requires of public apps).
    pub token_params: Option<BTreeMap<String, String>>,
    /// Authorize parameters that make the provider offer another account.
    pub account_chooser: Option<BTreeMap<String, String>>,
    /// Authorization error codes, besides RFC 6749's `access_denied`, with
    /// which the provider says the person declined (LinkedIn's
    /// `user_cancelled_authorize`).
    pub decline_errors: Option<Vec<String>>,
    /// Token endpoint refusals, besides RFC 6749's `invalid_grant`, with
    /// which the provider says the code or refresh token is dead (Strava
    /// names the field, Twitch says it in `message`).
    pub dead_grant_answers: Option<Vec<DeadGrantAnswer>>,
    pub refresh: Option<Refresh>,
    /// Seconds an access token is taken to live when the token answer
    /// names no `expires_in`, so it is refreshed in time (Salesforce).
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub token_lifetime_secs: Option<u64>,
    /// The redirect back from consent names the scopes the person accepted
    /// in `scope`, and the token answer does not (Strava, whose consent
    /// page lets them untick some): those asked for that it names are the
    /// ones granted.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub granted_scopes_in_callback: Option<bool>,

    pub account_id_from: Option<AccountIdFrom>,
    /// JSON pointer (RFC 6901) into the identity answer.
    pub account_id_pointer: Option<String>,
    /// Tried in order; the id is the last resort.
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub account_label_pointers: Option<Vec<String>>,

    /// How the OAuth access token reaches the API: `bearer` (default),
    /// `header:<name>` or `query:<name>`.
    pub api_auth: Option<String>,
    /// Headers on identity and API calls; `{client_id}` is replaced.
    pub api_headers: Option<BTreeMap<String, String>>,
    pub api_path_rules: Option<ApiPathRules>,
    /// Paths beneath the API base that manage the grant or the app's
    /// installation, besides the token, refresh and revocation URLs: `api_request`
    /// refuses them and everything beneath them (Zendesk's `oauth`).
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub grant_paths: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient::opt_list")]
    pub allowed_methods: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub max_response_bytes: Option<usize>,
    /// How long `api_request` waits for the provider's answer, in seconds.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    pub api_timeout_secs: Option<u64>,

    pub params: Option<BTreeMap<String, ParamSpec>>,
    pub fields: Option<BTreeMap<String, FieldSpec>>,
}

/// Merges `over` into `base`: tables key by key, anything else replaced.
pub(super) fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Deserializes a merged table, naming the field that is wrong.
pub(super) fn parse(table: toml::Table) -> Result<Entry, (String, String)> {
    let value = toml::Value::Table(table);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = without_the_value(e.into_inner().to_string());
        (path, message)
    })
}

/// serde's message for a value it refused, without the value: an entry's
/// fields can hold secrets (a static `api_headers` line with an API key),
/// and the message goes to stderr and the log. The path names the field.
fn without_the_value(message: String) -> String {
    let refused_a_value = ["invalid type:", "invalid value:", "invalid length"]
        .iter()
        .any(|start| message.starts_with(start));
    if !refused_a_value {
        return message;
    }
    match message.split_once(", expected ") {
        // (toml adds a line naming the field, which the path names.)
        Some((_, expected)) => format!(
            "not a valid value (expected {})",
            expected.lines().next().unwrap_or_default()
        ),
        None => "not a valid value".to_owned(),
    }
}
