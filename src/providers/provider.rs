//! One configured provider: its resolved catalog entry and the authorize
//! URL. The network calls live beside it (`oauth`, `identity`, `api`).

use std::collections::BTreeMap;

use secrecy::SecretString;
use url::Url;

pub(super) use super::quirks::{ApiAuth, Quirks, TokenAuthMethod};
use super::{
    TokenHint,
    entry::{AccountIdFrom, CredentialKind, FieldSpec, ParamSpec, Revocation},
    scopes::ScopeRules,
};
use crate::{domain::ProviderName, metrics::ProviderCalls};

/// A provider users can connect, fully resolved from its catalog entry and
/// the operator's settings.
#[derive(Debug)]
pub struct Provider {
    pub(super) name: ProviderName,
    /// The catalog entry it was built from (`github`, or `custom`).
    pub(super) entry: String,
    pub(super) kind: CredentialKind,
    pub(super) display_name: String,
    pub(super) docs_url: Option<String>,
    pub(super) client_id: String,
    pub(super) client_secret: Option<SecretString>,
    pub(super) auth_method: TokenAuthMethod,
    /// The OAuth endpoints; `None` for API-key and Basic entries.
    pub(super) authorize_url: Option<Url>,
    pub(super) token_url: Option<Url>,
    pub(super) refresh_url: Option<Url>,
    pub(super) revocation_url: Option<Url>,
    /// `None` when the template needs a value only a connection has (a
    /// Twilio account SID): see `Provider::endpoints_for`.
    pub(super) userinfo_url: Option<Url>,
    pub(super) userinfo_method: reqwest::Method,
    pub(super) userinfo_body: Option<serde_json::Value>,
    /// Always ends with `/`, so relative paths join beneath it. `None` as
    /// for `userinfo_url`.
    pub(super) api_base_url: Option<Url>,
    pub(super) issuer: Option<String>,
    pub(super) require_iss: bool,
    pub(super) redirect_uri: String,
    pub(super) default_scopes: Vec<String>,
    pub(super) account_id_from: AccountIdFrom,
    /// JSON pointers into the identity answer.
    pub(super) account_id_pointer: String,
    pub(super) account_label_pointers: Vec<String>,
    /// Uppercase.
    pub(super) allowed_methods: Vec<String>,
    /// Beneath the API base, refused with everything under them.
    pub(super) grant_paths: Vec<String>,
    pub(super) max_response_bytes: usize,
    /// `api_request`'s wait for an answer.
    pub(super) api_timeout: std::time::Duration,
    pub(super) quirks: Quirks,
    pub(super) scope_rules: ScopeRules,
    /// The entry's URL templates and parameters, for per-connection values.
    pub(super) templates: Templates,
    pub(super) param_specs: BTreeMap<String, ParamSpec>,
    /// The fields of an API-key or Basic credential; empty for OAuth.
    pub(super) field_specs: BTreeMap<String, FieldSpec>,
    /// Where the user creates the key (API-key and Basic kinds).
    pub(super) key_url: Option<String>,
    /// What the connect page tells the user about the credential.
    pub(super) instructions: Option<String>,
    /// Built-in values and the operator's defaults.
    pub(super) fixed_values: BTreeMap<String, String>,
    /// Every call sent to this provider, for `/metrics`; made with it at
    /// start-up, so its name is the only provider label there is.
    pub(super) calls: ProviderCalls,
}

/// The entry's endpoints before parameters are filled in.
#[derive(Debug, Clone, Default)]
pub(super) struct Templates {
    pub authorize: Option<String>,
    pub token: Option<String>,
    /// `None`: refresh at `token`.
    pub refresh: Option<String>,
    pub revocation: Option<String>,
    pub userinfo: Option<String>,
    pub api_base: Option<String>,
}

impl Provider {
    /// The name in settings and URLs (`github`).
    pub fn name(&self) -> &ProviderName {
        &self.name
    }

    /// The catalog entry it was built from (`github`, …; `custom` for an
    /// operator's own).
    pub fn preset(&self) -> &str {
        &self.entry
    }

    /// `oauth2`, `api_key` or `basic`.
    pub fn credential_kind(&self) -> &'static str {
        self.kind.as_str()
    }

    /// How refresh works: `expiring`, `rotating`, `non_expiring`, `none`.
    pub fn refresh_behaviour(&self) -> &'static str {
        self.quirks.refresh.as_str()
    }

    /// Whether the entry says a refresh leaves the refresh token as it was
    /// (`refresh = "expiring"`, not merely by default): no refresh can
    /// have made another one unknown here.
    pub fn keeps_its_refresh_token(&self) -> bool {
        self.quirks.refresh_token_kept
    }

    /// Authorize parameters that make the provider offer another account
    /// (Google's `prompt=select_account`); empty when it has none.
    pub fn account_chooser(&self) -> &[(String, String)] {
        &self.quirks.account_chooser
    }

    /// The provider's documentation for operators.
    pub fn docs_url(&self) -> Option<&str> {
        self.docs_url.as_deref()
    }

    /// The name shown to people (`GitHub`).
    pub fn display_name(&self) -> &str {
        &self.display_name
    }

    /// Scopes requested when nobody asked for specific ones.
    pub fn default_scopes(&self) -> &[String] {
        &self.default_scopes
    }

    /// The authorization server's issuer, for the RFC 9207 `iss` check on
    /// the callback. `None`: the provider sends no `iss`; when a callback
    /// carries one anyway, there is nothing to match it against.
    pub fn issuer(&self) -> Option<&str> {
        self.issuer.as_deref()
    }

    /// Whether a callback without `iss` is refused: the provider says it
    /// always sends one (RFC 9207 §2.4), so a callback without it did not
    /// come from it.
    pub fn requires_iss(&self) -> bool {
        self.require_iss
    }

    /// `<base_url>/oauth/callback/<name>`, sent on authorize and exchange.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The only base URL [`Provider::api_request`] calls beneath, for a
    /// connection without parameters of its own; `None` when every
    /// connection has its own (a Twilio account SID in the path).
    pub fn api_base_url(&self) -> Option<&Url> {
        self.api_base_url.as_ref()
    }

    /// Whether the user connects through the OAuth code flow; `false`:
    /// they hand over an API key or Basic credential on the connect page.
    pub fn is_oauth(&self) -> bool {
        self.kind == CredentialKind::Oauth2
    }

    /// Whether the operator let `api_request` change anything at this
    /// provider: a method besides GET, HEAD and OPTIONS is allowed (for
    /// Slack, whose reads and writes are both RPC calls, POST is the sign).
    pub fn allows_writes(&self) -> bool {
        self.allowed_methods
            .iter()
            .any(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS"))
    }

    /// Whether [`Provider::revoke`] can revoke upstream (RFC 7009).
    pub fn supports_revocation(&self) -> bool {
        self.templates.revocation.is_some()
    }

    /// Whether a token of this kind can be revoked on its own: not a
    /// refresh token where revocation takes the access token as its
    /// credential (revoking that ends the whole grant).
    pub fn revokes(&self, hint: TokenHint) -> bool {
        self.supports_revocation()
            && (hint == TokenHint::AccessToken || self.quirks.revocation == Revocation::Rfc7009)
    }

    /// The redirect back from consent names the accepted scopes, and the
    /// token answer does not (Strava).
    pub fn granted_scopes_in_callback(&self) -> bool {
        self.quirks.granted_scopes_in_callback
    }

    /// Whether a grant of `granted` scopes includes `wanted`, as this
    /// provider spells and nests its scopes.
    pub fn scope_granted(&self, granted: &[String], wanted: &str) -> bool {
        self.scope_rules.granted(granted, wanted)
    }

    /// Plain words for a scope on the consent page; an unknown scope is
    /// shown as itself.
    pub fn describe_scope(&self, scope: &str) -> String {
        self.scope_rules
            .describe(scope)
            .map(str::to_owned)
            .unwrap_or_else(|| scope.to_owned())
    }

    /// The URL to send the browser to. `state` binds the flow to the browser
    /// session; `pkce_challenge` is the S256 challenge of the verifier later
    /// passed to [`Provider::exchange_code`]. Empty `scopes` means
    /// [`Provider::default_scopes`].
    /// `None` for a provider without the OAuth code flow, or whose
    /// authorize URL needs a connection's parameters.
    pub fn authorize_url(
        &self,
        state: &str,
        pkce_challenge: &str,
        scopes: &[String],
    ) -> Option<Url> {
        let none = BTreeMap::new();
        self.authorize_url_for(state, pkce_challenge, scopes, false, &none)
            .ok()
            .flatten()
    }

    /// [`Self::authorize_url`] at the endpoint the connection's `params`
    /// make (a Microsoft tenant's); `choose_account`: ask the provider to
    /// show its account chooser (to connect another account), where it has
    /// one. Refuses parameters the entry does not allow.
    pub fn authorize_url_for(
        &self,
        state: &str,
        pkce_challenge: &str,
        scopes: &[String],
        choose_account: bool,
        params: &BTreeMap<String, String>,
    ) -> Result<Option<Url>, super::ProviderError> {
        let scopes = if scopes.is_empty() {
            &self.default_scopes[..]
        } else {
            scopes
        };
        let Some(mut url) = self.url_for(super::Endpoint::Authorize, params)? else {
            return Ok(None);
        };
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &self.client_id)
                .append_pair("redirect_uri", &self.redirect_uri);
            if !scopes.is_empty() {
                query.append_pair(
                    &self.quirks.scope_param,
                    &scopes.join(&self.quirks.scope_separator),
                );
            }
            query.append_pair("state", state);
            // A provider without PKCE gets no challenge (nor, later, the
            // verifier): some refuse parameters they do not know.
            if self.quirks.pkce {
                query
                    .append_pair("code_challenge", pkce_challenge)
                    .append_pair("code_challenge_method", "S256");
            }
            // To connect another account, the entry's account-chooser
            // parameters replace authorize parameters of the same name.
            let chooser: &[(String, String)] = if choose_account {
                &self.quirks.account_chooser
            } else {
                &[]
            };
            for (key, value) in &self.quirks.authorize_params {
                if !chooser.iter().any(|(k, _)| k == key) {
                    query.append_pair(key, value);
                }
            }
            for (key, value) in chooser {
                query.append_pair(key, value);
            }
        }
        Ok(Some(url))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::providers::test_catalog::catalog_for;

    fn params(url: &url::Url) -> HashMap<String, String> {
        url.query_pairs().into_owned().collect()
    }

    fn scopes(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn github_authorize_url_carries_pkce_state_and_space_scopes() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let gh = catalog.get("github").unwrap();
        let url = gh
            .authorize_url("st4te", "ch4llenge", &scopes(&["repo", "read:user"]))
            .unwrap();
        assert!(
            url.as_str()
                .starts_with("http://127.0.0.1:9/github/authorize?")
        );
        let p = params(&url);
        assert_eq!(p["response_type"], "code");
        assert_eq!(p["client_id"], "gh-client");
        assert_eq!(
            p["redirect_uri"],
            "http://127.0.0.1:9/oauth/callback/github"
        );
        assert_eq!(p["scope"], "repo read:user");
        assert_eq!(p["state"], "st4te");
        assert_eq!(p["code_challenge"], "ch4llenge");
        assert_eq!(p["code_challenge_method"], "S256");
        assert!(!p.contains_key("access_type"));
    }

    #[test]
    fn google_asks_for_offline_access_with_consent() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let url = catalog
            .get("google")
            .unwrap()
            .authorize_url("s", "c", &[])
            .unwrap();
        let p = params(&url);
        assert_eq!(p["access_type"], "offline");
        assert_eq!(p["prompt"], "consent");
        assert_eq!(p["scope"], "openid email profile");
        assert_eq!(p["code_challenge_method"], "S256");
    }

    #[test]
    fn slack_puts_user_scopes_in_user_scope_with_commas() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let slack = catalog.get("slack").unwrap();
        let url = slack
            .authorize_url("s", "c", &scopes(&["channels:read", "chat:write"]))
            .unwrap();
        let p = params(&url);
        assert_eq!(p["user_scope"], "channels:read,chat:write");
        assert!(!p.contains_key("scope"), "{url}");
        // Slack refuses PKCE to an app that never turned it on.
        assert!(!p.contains_key("code_challenge"), "{url}");
        assert_eq!(p["state"], "s");
    }

    #[test]
    fn demo_and_generic_authorize_urls() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let demo = catalog
            .get("demo")
            .unwrap()
            .authorize_url("s", "c", &[])
            .unwrap();
        assert!(
            demo.as_str()
                .starts_with("http://127.0.0.1:9/dev/demo/authorize?")
        );
        assert_eq!(params(&demo)["scope"], "profile");
        let generic = catalog
            .get("rfc")
            .unwrap()
            .authorize_url("s", "c", &[])
            .unwrap();
        let p = params(&generic);
        assert_eq!(p["client_id"], "my client");
        assert!(!p.contains_key("scope"), "no default scopes: {generic}");
        assert_eq!(p["code_challenge_method"], "S256");
    }

    #[test]
    fn scopes_are_described_in_plain_words() {
        let catalog = catalog_for("http://127.0.0.1:9");
        let gh = catalog.get("github").unwrap();
        assert_eq!(gh.describe_scope("read:user"), "read your profile");
        assert_eq!(gh.describe_scope("made:up"), "made:up");
        let google = catalog.get("google").unwrap();
        assert!(
            google
                .describe_scope("calendar.readonly")
                .contains("calendar")
        );
        assert!(
            google
                .describe_scope("https://www.googleapis.com/auth/drive.readonly")
                .contains("Drive")
        );
    }
}
