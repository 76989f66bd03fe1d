//! The dev identity provider over real HTTP, without a database: a harness
//! that serves it on a free port, and the tests in `authorize` (discovery,
//! the sign-in page, refusals) and `token` (the exchange, refresh).

mod authorize;
mod token;

use std::{collections::HashMap, net::TcpListener};

use actix_web::{App, HttpServer, web};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};
use serde_json::Value;

use super::{DevServices, configure};

pub(super) const REDIRECT: &str = "http://127.0.0.1:9/callback";
pub(super) const CLIENT: &str = "test-client";
// RFC 7636 Appendix B.
pub(super) const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub(super) const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

pub(super) struct Idp {
    pub(super) base: String,
    pub(super) dev: DevServices,
    pub(super) http: reqwest::Client,
}

pub(super) async fn start() -> Idp {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let dev = DevServices::ephemeral(&base);
    let data = web::Data::new(dev.clone());
    let server = HttpServer::new(move || App::new().app_data(data.clone()).configure(configure))
        .workers(1)
        .listen(listener)
        .unwrap()
        .run();
    tokio::spawn(server);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap();
    Idp { base, dev, http }
}

impl Idp {
    /// A valid authorization request, with `changes` applied (`None` removes).
    pub(super) fn request(&self, changes: &[(&str, Option<&str>)]) -> Vec<(String, String)> {
        let resource = format!("{}/mcp", self.base);
        let mut params: Vec<(String, String)> = [
            ("response_type", "code"),
            ("client_id", CLIENT),
            ("redirect_uri", REDIRECT),
            ("state", "st-1"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("scope", "openid profile"),
            ("nonce", "n-1"),
            ("resource", resource.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        for (name, value) in changes {
            params.retain(|(k, _)| k != name);
            if let Some(value) = value {
                params.push(((*name).to_owned(), (*value).to_owned()));
            }
        }
        params
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
    assert_eq!(
        response.status(),
        303,
        "expected a redirect back to the client"
    );
    let location = response.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(REDIRECT), "{location}");
    url::Url::parse(location)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}
