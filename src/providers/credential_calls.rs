//! Calls made with an API-key or Basic credential: each field presented
//! as the entry says (`send`: a header, HTTP Basic, a query parameter or a
//! bearer token), the identity check before the credential is stored, and
//! the forms a provider could echo a credential in, for redaction.

use std::{collections::BTreeMap, time::Duration};

use base64::{Engine, engine::general_purpose::STANDARD};
use reqwest::header::{AUTHORIZATION, USER_AGENT};
use serde_json::Value;
use url::Url;

use super::{
    Account, Credential, Provider, ProviderError,
    credential::FieldCredential,
    entry::AccountIdFrom,
    http::read_all,
    identity::{USER_AGENT_VALUE, credential_account},
    provider::ApiAuth,
};
use crate::metrics::Call;

/// Inside the connect page's request: the person waits for it.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ANSWER_BYTES: usize = 256 * 1024;

impl Provider {
    /// A request carrying `credential` as the entry presents each field,
    /// with the entry's headers. Answers the URL as sent, which a query
    /// field changes.
    pub(super) fn presented(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        mut url: Url,
        credential: &FieldCredential,
    ) -> (reqwest::RequestBuilder, Url) {
        let mut headers: Vec<(String, String)> = Vec::new();
        let (mut user, mut password) = (None, None);
        for (name, spec) in &self.field_specs {
            let Some(value) = credential.get(name) else {
                continue;
            };
            match spec.send.as_deref().unwrap_or("none") {
                "bearer" => headers.push((AUTHORIZATION.to_string(), format!("Bearer {value}"))),
                "basic_user" => user = Some(value),
                "basic_password" => password = Some(value),
                other => match ApiAuth::parse(other) {
                    Some(ApiAuth::Header(header)) => headers.push((header, value.to_owned())),
                    Some(ApiAuth::Query(param)) => {
                        url.query_pairs_mut().append_pair(&param, value);
                    }
                    _ => {}
                },
            }
        }
        let mut request = http
            .request(method, url.clone())
            .header(USER_AGENT, USER_AGENT_VALUE);
        for (name, value) in &self.quirks.api_headers {
            request = request.header(name.as_str(), value.as_str());
        }
        for (name, value) in headers {
            request = request.header(name, value);
        }
        if let Some(user) = user {
            request = request.basic_auth(user, password);
        }
        (request, url)
    }

    /// Checks a credential at the provider's identity URL (with the
    /// connection's parameters filled in) before it is stored, and reads
    /// the account it belongs to. [`ProviderError::Denied`] when the
    /// provider refuses it (HTTP 401 or 403).
    pub async fn verify_credential(
        &self,
        http: &reqwest::Client,
        credential: &FieldCredential,
        params: &BTreeMap<String, String>,
    ) -> Result<Account, ProviderError> {
        let result = self
            .fetch_credential_account(http, credential, params)
            .await;
        match &result {
            Ok(_) => tracing::debug!(provider = %self.name, "credential accepted"),
            // The caller says what a refusal means; only failures are news here.
            Err(ProviderError::Denied(_)) => {}
            Err(e) => tracing::info!(provider = %self.name, error = %e, "credential check failed"),
        }
        result
    }

    async fn fetch_credential_account(
        &self,
        http: &reqwest::Client,
        credential: &FieldCredential,
        params: &BTreeMap<String, String>,
    ) -> Result<Account, ProviderError> {
        let endpoints = self.endpoints_with(params, Some(credential))?;
        let (mut request, _) = self.presented(
            http,
            self.userinfo_method.clone(),
            endpoints.userinfo,
            credential,
        );
        request = request.timeout(CHECK_TIMEOUT);
        if let Some(body) = &self.userinfo_body {
            request = request.json(body);
        }
        let (mut response, mut timer) = self.send(Call::Identity, request).await?;
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            return Err(ProviderError::Denied(format!("HTTP {status}")));
        }
        if !(200..300).contains(&status) {
            return Err(ProviderError::Status(status));
        }
        let body = read_all(&mut response, MAX_ANSWER_BYTES, &mut timer).await?;
        timer.finish();
        if self.account_id_from == AccountIdFrom::Credential {
            return Ok(credential_account(self.primary_secret(credential)));
        }
        let answer: Value = serde_json::from_slice(&body)
            .map_err(|_| ProviderError::BadResponse("the account answer is not JSON".into()))?;
        self.account_from(&answer, self.primary_secret(credential))
            .map(|account| self.scoped(account, params))
    }

    /// The account behind a stored connection's credential, whatever its
    /// kind (`whoami`, the profile resource).
    pub async fn account_as(
        &self,
        http: &reqwest::Client,
        credential: &Credential<'_>,
    ) -> Result<Account, ProviderError> {
        if self.is_oauth() {
            return self
                .account_at(http, credential.secret, credential.params)
                .await;
        }
        let fields = FieldCredential::from_secret(credential.secret)?;
        self.verify_credential(http, &fields, credential.params)
            .await
    }

    /// Every form in which the provider could echo `credential`: each
    /// secret field, and the HTTP Basic pair as its header carries it.
    pub(super) fn credential_secrets(&self, credential: &FieldCredential) -> Vec<String> {
        let mut out: Vec<String> = self
            .credential_fields()
            .iter()
            .filter(|f| f.secret)
            .filter_map(|f| credential.get(&f.name).map(str::to_owned))
            .collect();
        let sent = |how: &str| {
            self.field_specs
                .iter()
                .find(|(_, s)| s.send.as_deref() == Some(how))
                .and_then(|(name, _)| credential.get(name))
        };
        // As `presented` sends it: a username alone goes as `user:`.
        if let Some(user) = sent("basic_user") {
            let password = sent("basic_password").unwrap_or_default();
            out.push(STANDARD.encode(format!("{user}:{password}")));
        }
        out
    }
}
