//! The token endpoint calls: authorization code + PKCE exchange and
//! refresh (revocation is `revoke`).
//!
//! Done with reqwest directly rather than the `oauth2` crate's client: the
//! answers we must accept (GitHub's form-encoded bodies and HTTP 200 errors,
//! Slack's `ok` envelope and nested user token, string `expires_in`) are
//! outside what its typed response parser takes, and rewriting bodies so it
//! would accept them is more code than reading them (`token_answer`).

use std::{collections::BTreeMap, time::Duration};

use reqwest::header::{ACCEPT, AUTHORIZATION};
use secrecy::ExposeSecret;
use serde_json::Value;

use super::{
    Endpoint, Provider, ProviderError, TokenSet,
    http::{basic_auth, media_type, read_all},
    provider::TokenAuthMethod,
    token_answer::{self, Answer},
};
use crate::metrics::Call;

/// The values learned from a token answer, or why one was refused.
pub type Learned = Result<BTreeMap<String, String>, ProviderError>;

/// A refresh's outcome: the new tokens, and the connection's parameters
/// with the values the answer told again (each checked); `refused` says
/// which it told that did not match, whose stored values were kept.
pub struct Refreshed {
    pub tokens: TokenSet,
    pub params: BTreeMap<String, String>,
    pub refused: Vec<ProviderError>,
}

/// Whole-request bound for token endpoint calls: a person is waiting.
/// Inside the shutdown drain (`config::SHUTDOWN_DRAIN`), with an API call after it.
pub(super) const TIMEOUT: Duration = Duration::from_secs(10);
/// Token answers are small; anything bigger is not one.
pub(super) const MAX_ANSWER_BYTES: usize = 64 * 1024;

impl Provider {
    /// Exchanges the code from the callback, proving possession of the PKCE
    /// verifier whose challenge went into the authorize URL.
    pub async fn exchange_code(
        &self,
        http: &reqwest::Client,
        code: &str,
        pkce_verifier: &str,
    ) -> Result<TokenSet, ProviderError> {
        let (tokens, learned) = self
            .exchange_code_learning(http, code, pkce_verifier, &BTreeMap::new())
            .await?;
        learned.map(|_| tokens)
    }

    /// [`Provider::exchange_code`] at the token endpoint the connection's
    /// `params` make (a Microsoft tenant's), also answering the values the
    /// entry learns from the token answer (Salesforce's `instance_url`),
    /// each checked against its parameter's pattern. A refused value
    /// comes back beside the tokens, which were issued all the same: the
    /// caller must revoke them.
    pub async fn exchange_code_learning(
        &self,
        http: &reqwest::Client,
        code: &str,
        pkce_verifier: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<(TokenSet, Learned), ProviderError> {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", self.redirect_uri.as_str()),
        ];
        if self.quirks.pkce {
            form.push(("code_verifier", pkce_verifier));
        }
        for (key, value) in &self.quirks.token_params {
            form.push((key.as_str(), value.as_str()));
        }
        let url = self
            .url_for(Endpoint::Token, params)?
            .ok_or(ProviderError::Unsupported("the OAuth code flow"))?;
        let result = self
            .token_request(http, Call::Token, &url, form, &[code, pkce_verifier])
            .await
            .map(|(tokens, answer)| (tokens, self.learned_from_token_answer(&answer)));
        log_outcome(&self.name, "exchange", result.as_ref().map(|(t, _)| t));
        result
    }

    /// Trades a refresh token for a new access token, at the endpoint the
    /// connection's `params` make.
    /// [`ProviderError::InvalidGrant`] means the refresh token is dead.
    /// `refresh_token: None` in the answer means keep the old one.
    pub async fn refresh(
        &self,
        http: &reqwest::Client,
        refresh_token: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<TokenSet, ProviderError> {
        self.refresh_learning(http, refresh_token, params)
            .await
            .map(|refreshed| refreshed.tokens)
    }

    /// [`Provider::refresh`], also answering the connection's parameters
    /// as the refresh answer tells them again (a moved Salesforce org):
    /// see [`Refreshed`].
    pub async fn refresh_learning(
        &self,
        http: &reqwest::Client,
        refresh_token: &str,
        params: &BTreeMap<String, String>,
    ) -> Result<Refreshed, ProviderError> {
        let form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ];
        let url = self
            .url_for(Endpoint::Refresh, params)?
            .ok_or(ProviderError::Unsupported("refresh"))?;
        let result = self
            .token_request(http, Call::Refresh, &url, form, &[refresh_token])
            .await;
        log_outcome(&self.name, "refresh", result.as_ref().map(|(t, _)| t));
        let (tokens, answer) = result?;
        let (params, refused) = self.relearned(&answer, params);
        Ok(Refreshed {
            tokens,
            params,
            refused,
        })
    }

    async fn token_request(
        &self,
        http: &reqwest::Client,
        call: Call,
        url: &url::Url,
        form: Vec<(&str, &str)>,
        sent: &[&str],
    ) -> Result<(TokenSet, Value), ProviderError> {
        let request = self.authenticated_post(http, url, form);
        let (mut response, mut timer) = self.send(call, request).await?;
        let status = response.status().as_u16();
        let media = media_type(&response);
        let body = read_all(&mut response, MAX_ANSWER_BYTES, &mut timer).await?;
        timer.finish();
        let mut secrets = sent.to_vec();
        secrets.push(self.secret());
        let (mut tokens, answer) = token_answer::parse_keeping_fields(
            &Answer {
                status,
                media_type: media.as_deref(),
                body: &body,
                ok_envelope: self.quirks.ok_envelope,
                token_pointer: self.quirks.token_pointer.as_deref(),
                form_answers: self.quirks.form_answers,
                dead_grant: &self.quirks.dead_grant_answers,
            },
            &secrets,
        )?;
        // A lifetime the answer does not name is the entry's, so the token
        // is refreshed before it dies rather than after.
        if tokens.expires_in.is_none() {
            tokens.expires_in = self.quirks.token_lifetime;
        }
        Ok((tokens, answer))
    }

    /// A POST to the token or revocation endpoint with client
    /// authentication, form-encoded unless the entry says JSON (Notion,
    /// Atlassian). `Accept: application/json` always: GitHub answers
    /// form-encoded without it.
    pub(super) fn authenticated_post<'a>(
        &'a self,
        http: &reqwest::Client,
        url: &url::Url,
        mut form: Vec<(&'a str, &'a str)>,
    ) -> reqwest::RequestBuilder {
        let mut request = http
            .post(url.clone())
            .header(ACCEPT, "application/json")
            .timeout(TIMEOUT);
        let secret = self.secret();
        match self.auth_method {
            TokenAuthMethod::ClientSecretBasic => {
                request = request.header(AUTHORIZATION, basic_auth(&self.client_id, secret));
            }
            TokenAuthMethod::ClientSecretPost => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", secret));
            }
            TokenAuthMethod::None => form.push(("client_id", &self.client_id)),
        }
        if self.quirks.json_token_request {
            let body: serde_json::Map<String, Value> = form
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Value::String(v.to_owned())))
                .collect();
            return request.json(&body);
        }
        request.form(&form)
    }

    pub(super) fn secret(&self) -> &str {
        self.client_secret
            .as_ref()
            .map(|s| s.expose_secret())
            .unwrap_or_default()
    }
}

fn log_outcome(provider: &str, step: &str, result: Result<&TokenSet, &ProviderError>) {
    match result {
        Ok(t) => tracing::info!(
            provider = %provider,
            step = %step,
            expires_in = t.expires_in.map(|d| d.as_secs()),
            refresh_token = t.refresh_token.is_some(),
            "token endpoint answered"
        ),
        Err(e) => {
            tracing::warn!(provider = %provider, step = %step, error = %e, "token endpoint refused")
        }
    }
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
