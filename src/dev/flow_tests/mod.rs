//! The dev identity provider over real HTTP, without a database: a harness
//! that serves it on a free port, and the tests in `authorize` (discovery,
//! the sign-in page, refusals) and `token` (the exchange, refresh).

mod authorize;
mod token;

use std::{collections::HashMap, ops::Deref};

use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};
use serde_json::Value;

pub(super) use super::test_server::{CHALLENGE, VERIFIER};
use super::{
    configure,
    test_server::{self, DevServer, with_changes},
};

pub(super) const REDIRECT: &str = "http://127.0.0.1:9/callback";
pub(super) const CLIENT: &str = "test-client";

pub(super) struct Idp(DevServer);

impl Deref for Idp {
    type Target = DevServer;

    fn deref(&self) -> &DevServer {
        &self.0
    }
}

pub(super) async fn start() -> Idp {
    Idp(test_server::start(configure).await)
}

impl Idp {
    /// A valid authorization request, with `changes` applied (`None` removes).
    pub(super) fn request(&self, changes: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
        let resource = format!("{}/mcp", self.base);
        let defaults = [
            ("response_type", "code"),
            ("client_id", CLIENT),
            ("redirect_uri", REDIRECT),
            ("state", "st-1"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("scope", "openid profile"),
            ("nonce", "n-1"),
            ("resource", resource.as_str()),
        ];
        with_changes(&defaults, changes)
    }

    pub(super) async fn get(&self, path: &str, query: &[(String, String)]) -> reqwest::Response {
        self.http
            .get(format!("{}{path}", self.base))
            .query(query)
            .send()
            .await
            .unwrap()
    }

    pub(super) async fn post(&self, path: &str, form: &[(String, String)]) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    pub(super) async fn sign_in(
        &self,
        user: &str,
        changes: &[(&str, Option<&str>)],
    ) -> reqwest::Response {
        let mut form = self.request(changes);
        form.push(("username".into(), user.into()));
        form.push(("action".into(), "sign-in".into()));
        self.post("/dev/idp/authorize", &form).await
    }

    /// Signs `user` in and returns the code from the redirect.
    pub(super) async fn code_for(&self, user: &str) -> String {
        let back = redirected_query(&self.sign_in(user, &[]).await);
        back["code"].clone()
    }

    pub(super) async fn token(&self, pairs: &[(&str, &str)]) -> (reqwest::StatusCode, Value) {
        let form: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let response = self.post("/dev/idp/token", &form).await;
        assert_eq!(response.headers()["cache-control"], "no-store");
        (response.status(), response.json().await.unwrap())
    }

    pub(super) async fn exchange(
        &self,
        code: &str,
        verifier: &str,
    ) -> (reqwest::StatusCode, Value) {
        let pairs = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", CLIENT),
            ("code_verifier", verifier),
        ];
        self.token(&pairs).await
    }

    pub(super) fn decode(&self, jwt: &str, audience: &str) -> Value {
        let jwks: JwkSet = serde_json::from_value(self.dev.jwks()).unwrap();
        let kid = jsonwebtoken::decode_header(jwt).unwrap().kid.unwrap();
        let key = DecodingKey::from_jwk(jwks.find(&kid).unwrap()).unwrap();
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_audience(&[audience]);
        validation.set_issuer(&[self.dev.issuer()]);
        jsonwebtoken::decode::<Value>(jwt, &key, &validation)
            .unwrap()
            .claims
    }
}

pub(super) fn redirected_query(response: &reqwest::Response) -> HashMap<String, String> {
    test_server::redirected_query(response, REDIRECT)
}
