//! The demo provider over real HTTP, without a database: a harness serving
//! it on a free port, and the tests in `authorize` (the consent page and its
//! refusals), `tokens` (exchange, refresh, revocation, the API) and `app`
//! (the app's `demo` preset end to end).

mod app;
mod authorize;
mod tokens;

use std::{collections::HashMap, ops::Deref};

use secrecy::ExposeSecret;
use serde_json::Value;

use super::{CLIENT_ID, configure};
use crate::dev::test_server::{self, DevServer, with_changes};
pub(super) use crate::dev::test_server::{CHALLENGE, VERIFIER};

pub(super) struct Demo(DevServer);

impl Deref for Demo {
    type Target = DevServer;

    fn deref(&self) -> &DevServer {
        &self.0
    }
}

pub(super) async fn start() -> Demo {
    Demo(test_server::start(configure).await)
}

impl Demo {
    pub(super) fn redirect_uri(&self) -> String {
        self.dev.demo().redirect_uri().to_owned()
    }

    /// A valid authorization request, with `changes` applied (`None` removes).
    pub(super) fn request(&self, changes: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
        let redirect_uri = self.redirect_uri();
        let defaults = [
            ("response_type", "code"),
            ("client_id", CLIENT_ID),
            ("redirect_uri", redirect_uri.as_str()),
            ("state", "st-1"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("scope", "profile"),
        ];
        with_changes(&defaults, changes)
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}/dev/demo{path}", self.base)
    }

    /// `GET /authorize` for a valid request with `changes` applied.
    pub(super) async fn show(&self, changes: &[(&str, Option<&str>)]) -> reqwest::Response {
        let url = self.url("/authorize");
        let query = self.request(changes);
        self.http.get(url).query(&query).send().await.unwrap()
    }

    /// Presses `decision` on the consent page for `account`.
    pub(super) async fn decide(
        &self,
        decision: &str,
        account: &str,
        changes: &[(&str, Option<&str>)],
    ) -> reqwest::Response {
        let mut form = self.request(changes);
        form.push(("account".into(), account.into()));
        form.push(("decision".into(), decision.into()));
        let url = self.url("/authorize");
        self.http.post(url).form(&form).send().await.unwrap()
    }

    /// Allows access for `account` and returns the code.
    pub(super) async fn code_for(&self, account: &str) -> String {
        let back = self.redirected_query(&self.decide("allow", account, &[]).await);
        back["code"].clone()
    }

    /// A token or revocation request with the registered client's Basic
    /// credentials.
    pub(super) async fn post_as_client(
        &self,
        path: &str,
        pairs: &[(&str, &str)],
    ) -> reqwest::Response {
        let secret = self.dev.demo().client_secret().expose_secret().to_owned();
        self.post_with(path, pairs, Some((CLIENT_ID, &secret)))
            .await
    }

    pub(super) async fn post_with(
        &self,
        path: &str,
        pairs: &[(&str, &str)],
        basic: Option<(&str, &str)>,
    ) -> reqwest::Response {
        let mut request = self.http.post(self.url(path)).form(pairs);
        if let Some((id, secret)) = basic {
            request = request.basic_auth(id, Some(secret));
        }
        request.send().await.unwrap()
    }

    pub(super) async fn token(&self, pairs: &[(&str, &str)]) -> (u16, Value) {
        let response = self.post_as_client("/token", pairs).await;
        assert_eq!(response.headers()["cache-control"], "no-store");
        (response.status().as_u16(), response.json().await.unwrap())
    }

    pub(super) async fn exchange(&self, code: &str, verifier: &str) -> (u16, Value) {
        let redirect_uri = self.redirect_uri();
        let pairs = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", &redirect_uri),
            ("code_verifier", verifier),
        ];
        self.token(&pairs).await
    }

    /// Tokens for `account`, through the whole flow.
    pub(super) async fn tokens_for(&self, account: &str) -> Value {
        let code = self.code_for(account).await;
        let (status, body) = self.exchange(&code, VERIFIER).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    pub(super) async fn refresh(&self, refresh_token: &str) -> (u16, Value) {
        let pairs = [
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
        ];
        self.token(&pairs).await
    }

    /// `GET /api/me` with `access_token`: status and body.
    pub(super) async fn me(&self, access_token: &str) -> (u16, Value) {
        let response = self
            .http
            .get(self.url("/api/me"))
            .bearer_auth(access_token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        if status == 401 {
            let challenge = response.headers()["www-authenticate"].to_str().unwrap();
            assert!(
                challenge.contains(r#"error="invalid_token""#),
                "{challenge}"
            );
        }
        (status, response.json().await.unwrap())
    }

    /// The query of a 303 back to the registered redirect URI.
    pub(super) fn redirected_query(&self, response: &reqwest::Response) -> HashMap<String, String> {
        test_server::redirected_query(response, &self.redirect_uri())
    }
}

/// A JSON value as `&str`, for short assertions.
pub(super) fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}
