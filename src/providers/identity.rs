//! Who the connected account is: one request to the provider's identity
//! URL with the credential, then the entry's JSON pointers into the answer
//! (`/data/viewer/id` reads a GraphQL answer).

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    Account, Endpoint, Provider, ProviderError, entry::AccountIdFrom, http::read_all,
    token_answer::oauth_error,
};
use crate::{domain::shown_text, metrics::Call};

/// Inside the shutdown drain (`config::SHUTDOWN_DRAIN`), with the code exchange before it.
const TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ANSWER_BYTES: usize = 256 * 1024;
pub(super) const USER_AGENT_VALUE: &str = concat!("mcp-connect/", env!("CARGO_PKG_VERSION"));

/// Slack errors that mean the token itself is no good.
pub(super) const SLACK_TOKEN_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "token_revoked",
    "token_expired",
    "account_inactive",
];

impl Provider {
    /// The account behind an access token: `{id, label}`.
    /// [`ProviderError::Denied`] when the provider refuses the token.
    pub async fn account(
        &self,
        http: &reqwest::Client,
        access_token: &str,
    ) -> Result<Account, ProviderError> {
        self.account_at(http, access_token, &BTreeMap::new()).await
    }

    /// [`Self::account`] at the identity URL the connection's `params`
    /// make (a Zendesk subdomain's).
    pub async fn account_at(
        &self,
        http: &reqwest::Client,
        access_token: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<Account, ProviderError> {
        let result = self.fetch_account(http, access_token, params).await;
        match &result {
            Ok(_) => tracing::debug!(provider = %self.name, "account identity read"),
            Err(e) => tracing::warn!(provider = %self.name, error = %e, "account identity failed"),
        }
        result
    }

    async fn fetch_account(
        &self,
        http: &reqwest::Client,
        access_token: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<Account, ProviderError> {
        // Without an identity URL here (an API-key entry's is made with the
        // credential's fields), `account_as` is the call to make.
        let userinfo_url =
            self.url_for(Endpoint::Userinfo, params)?
                .ok_or(ProviderError::Unsupported(
                    "an identity URL without the connection",
                ))?;
        let (mut request, _) = self.authorized(
            http,
            self.userinfo_method.clone(),
            userinfo_url,
            access_token,
        );
        request = request.timeout(TIMEOUT);
        if let Some(body) = &self.userinfo_body {
            request = request.json(body);
        }
        let (mut response, mut timer) = self.send(Call::Identity, request).await?;
        let status = response.status().as_u16();
        if status == 401 {
            return Err(ProviderError::Denied("HTTP 401".into()));
        }
        if !(200..300).contains(&status) {
            return Err(ProviderError::Status(status));
        }
        let body = read_all(&mut response, MAX_ANSWER_BYTES, &mut timer).await?;
        timer.finish();
        let Ok(answer) = serde_json::from_slice::<Value>(&body) else {
            return Err(ProviderError::BadResponse(
                "the account answer is not JSON".into(),
            ));
        };
        if self.quirks.ok_envelope && answer.get("ok") != Some(&Value::Bool(true)) {
            let code = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown_error");
            if SLACK_TOKEN_ERRORS.contains(&code) {
                return Err(ProviderError::Denied(code.to_owned()));
            }
            return Err(oauth_error(code, None, &[access_token]));
        }
        self.account_from(&answer, access_token)
            .map(|account| self.scoped(account, params))
    }

    /// The asked parameters the identity URL is made with. An account id
    /// is only unique at the host they name — user 42 of gitlab.com is not
    /// user 42 of git.example.org, one Atlassian account is on many Jira
    /// sites — so the stored id carries their values.
    pub fn account_scope(&self) -> Vec<&str> {
        let Some(template) = &self.templates.userinfo else {
            return Vec::new();
        };
        let asked: Vec<&str> = self.asked_params().into_iter().map(|(n, ..)| n).collect();
        super::template::names(template)
            .unwrap_or_default()
            .into_iter()
            .filter(|name| asked.contains(name))
            .collect()
    }

    /// The values of [`Self::account_scope`]'s parameters in `params`, in
    /// its order; `None` where the id is unique alone, derived from the
    /// credential, or a value is missing.
    pub fn account_scope_values<'p>(
        &self,
        params: &'p BTreeMap<String, String>,
    ) -> Option<Vec<(&str, &'p str)>> {
        if self.account_id_from == AccountIdFrom::Credential {
            return None;
        }
        let scope = self.account_scope();
        let values: Option<Vec<(&str, &str)>> = scope
            .into_iter()
            .map(|name| Some((name, params.get(name)?.as_str())))
            .collect();
        values.filter(|v| !v.is_empty())
    }

    /// What makes an account id unique across the places
    /// [`Self::account_scope`] names (`@https://git.example.org`).
    pub fn account_id_suffix(&self, params: &BTreeMap<String, String>) -> Option<String> {
        let values = self.account_scope_values(params)?;
        let values: Vec<&str> = values.into_iter().map(|(_, value)| value).collect();
        Some(format!("@{}", values.join("/")))
    }

    /// `account` with its id made unique: `42@https://git.example.org`.
    pub(super) fn scoped(
        &self,
        mut account: Account,
        params: &BTreeMap<String, String>,
    ) -> Account {
        if let Some(suffix) = self.account_id_suffix(params) {
            account.id.push_str(&suffix);
        }
        account
    }

    pub(super) fn account_from(
        &self,
        answer: &Value,
        credential: &str,
    ) -> Result<Account, ProviderError> {
        if self.account_id_from == AccountIdFrom::Credential {
            return Ok(credential_account(credential));
        }
        let id = scalar(answer, &self.account_id_pointer).ok_or_else(|| {
            ProviderError::BadResponse(format!(
                "the account answer has no `{}`",
                self.account_id_pointer
            ))
        })?;
        // The label is shown on pages and to clients, and some providers
        // let someone other than the person name the account (a Notion
        // workspace's owner): cleaned and cut like any outsider's text.
        let label = self
            .account_label_pointers
            .iter()
            .filter_map(|field| scalar(answer, field))
            .chain(std::iter::once(id.clone()))
            .map(|label| shown_text::shown(&label, shown_text::MAX_LABEL_CHARS))
            .find(|label| !label.is_empty())
            .unwrap_or_else(|| "account".to_owned());
        Ok(Account { id, label })
    }
}

/// For a provider that names no account: a digest of the credential as the
/// id (the same key connects as the same account), its last four
/// characters as the label. The digest cannot be turned back into the key.
pub(super) fn credential_account(credential: &str) -> Account {
    let digest = Sha256::digest(credential.as_bytes());
    let id: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let tail: String = credential.chars().rev().take(4).collect();
    let tail: String = tail.chars().rev().collect();
    Account {
        id: format!("key-{id}"),
        label: format!("key …{tail}"),
    }
}

/// A string or integer at a JSON pointer, as text; empty counts as absent.
fn scalar(value: &Value, pointer: &str) -> Option<String> {
    let found = value.pointer(pointer)?;
    let text = match found {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use provider_fakes::scripted::{DEMO_TOKEN, RFC_TOKEN};
    use serde_json::json;

    use super::*;
    use crate::providers::test_catalog::{Fakes, http};

    fn account(id: &str, label: &str) -> Account {
        Account {
            id: id.into(),
            label: label.into(),
        }
    }

    #[actix_web::test]
    async fn each_preset_reads_its_identity() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let http = http();
        let (github, _) = fakes.github.issue_grant("read:user", false);
        let (google, _) = fakes.google.issue_grant("openid email", false);
        let (slack, _) = fakes.slack.issue_grant("identity.basic", false);
        let cases = [
            ("github", github.as_str(), account("583231", "octocat")),
            (
                "google",
                google.as_str(),
                account("1234567890", "alice@example.com"),
            ),
            ("slack", slack.as_str(), account("U1234", "alice")),
            ("demo", DEMO_TOKEN, account("demo-alice", "alice")),
            ("rfc", RFC_TOKEN, account("abc-123", "alice")),
        ];
        for (name, token, expected) in cases {
            let got = catalog.get(name).unwrap().account(&http, token).await;
            assert_eq!(got.unwrap(), expected, "{name}");
        }
        // GitHub refuses requests without a User-Agent; we sent one, and its
        // versioned media type.
        let seen = &fakes.github.seen("/user")[0];
        assert!(seen.headers["user-agent"].starts_with("mcp-connect/"));
        assert_eq!(seen.headers["accept"], "application/vnd.github+json");
    }

    #[actix_web::test]
    async fn refused_tokens_are_denied_without_echoing_them() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let http = http();
        for name in ["github", "slack", "google"] {
            let e = catalog
                .get(name)
                .unwrap()
                .account(&http, "stale-token-XYZ")
                .await
                .unwrap_err();
            assert!(matches!(e, ProviderError::Denied(_)), "{name}: {e}");
            assert!(!e.to_string().contains("stale-token-XYZ"), "{e}");
        }
    }

    #[test]
    fn fields_are_json_pointers() {
        let v = json!({"user": {"id": "U1", "name": ""}, "n": 7, "f": 1.5, "data": [{"id": "x"}]});
        assert_eq!(scalar(&v, "/user/id").as_deref(), Some("U1"));
        assert_eq!(scalar(&v, "/user/name"), None);
        assert_eq!(scalar(&v, "/n").as_deref(), Some("7"));
        assert_eq!(scalar(&v, "/f"), None);
        assert_eq!(scalar(&v, "/user/id/deeper"), None);
        assert_eq!(scalar(&v, "/data/0/id").as_deref(), Some("x"));
    }

    #[test]
    fn an_account_label_is_cleaned_and_cut_like_any_outsiders_text() {
        let catalog = crate::providers::test_catalog::catalog_for("http://127.0.0.1:9");
        let github = catalog.get("github").unwrap();
        let long = format!("work\u{202E}{}", "x".repeat(5000));
        let a = github
            .account_from(&json!({"id": 7, "login": long}), "")
            .unwrap();
        assert_eq!(a.id, "7");
        assert_eq!(a.label, format!("work{}…", "x".repeat(59)));
        // Nothing visible left: the next field, then the id.
        let a = github
            .account_from(&json!({"id": 7, "login": "\u{200B}\u{2066}"}), "")
            .unwrap();
        assert_eq!(a.label, "7");
    }

    #[test]
    fn a_credential_account_shows_only_a_suffix() {
        let a = credential_account("sk-abcdefghijklmnop1234");
        assert_eq!(a.label, "key …1234");
        assert!(a.id.starts_with("key-") && a.id.len() == 28, "{}", a.id);
        assert!(!a.id.contains("abcdefgh"));
        assert_eq!(a, credential_account("sk-abcdefghijklmnop1234"));
        assert_ne!(a.id, credential_account("sk-abcdefghijklmnop1235").id);
    }
}
