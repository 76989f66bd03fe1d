//! The fakes exercised on their own and through the app's own provider
//! code (no database needed), so that a fake drifting from its preset shows
//! here rather than in a long flow test.

use std::collections::BTreeMap;

use mcp_connect::{
    config::Settings,
    providers::outbound_http_client,
    providers::{PkcePair, ProviderCatalog, ProviderError, TokenHint, TokenSet},
};
use provider_fakes::{FakeProvider, github, google, no_redirects, slack};
use secrecy::ExposeSecret;
use serde_json::Value;

const PUBLIC_URL: &str = "http://127.0.0.1:9";

/// The app's catalog with `fake` configured as provider `name`.
fn catalog(fake: &FakeProvider, name: &str) -> ProviderCatalog {
    let mut table: toml::Table = toml::from_str(&format!(
        "public_url = \"{PUBLIC_URL}\"\n\
         database_url = \"postgres://localhost/unused\"\n\
         keys = [\"k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"]\n\
         [auth]\nissuer = \"https://idp.example.com\"\n"
    ))
    .unwrap();
    fake.configure(&mut table, name);
    let settings = Settings::from_sources(None, Vec::new(), table).unwrap();
    ProviderCatalog::from_settings(&settings).unwrap()
}

/// The browser leg and the code exchange, as the app does them.
async fn connect(fake: &FakeProvider, name: &str) -> (BTreeMap<String, String>, TokenSet) {
    let catalog = catalog(fake, name);
    let provider = catalog.get(name).unwrap();
    let pkce = PkcePair::generate();
    let url = provider
        .authorize_url("st4te", &pkce.challenge, &[])
        .unwrap();
    let back = fake.visit(url.as_str()).await;
    assert!(
        back.as_str()
            .starts_with(&format!("{PUBLIC_URL}/oauth/callback/{name}?"))
    );
    let query: BTreeMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(query["state"], "st4te");
    let http = outbound_http_client().unwrap();
    let tokens = provider
        .exchange_code(&http, &query["code"], pkce.verifier.expose_secret())
        .await
        .unwrap();
    (query, tokens)
}

#[tokio::test]
async fn the_app_presets_connect_to_each_fake() {
    let http = outbound_http_client().unwrap();
    let cases = [
        (github::start().await, "github", "583231", "octocat"),
        (
            google::start().await,
            "google",
            "1234567890",
            "alice@example.com",
        ),
        (slack::start().await, "slack", "U1234", "alice"),
    ];
    for (fake, name, id, label) in cases {
        let (_, tokens) = connect(&fake, name).await;
        let catalog = catalog(&fake, name);
        let account = catalog
            .get(name)
            .unwrap()
            .account(&http, tokens.access_token.expose_secret())
            .await
            .unwrap();
        assert_eq!(
            (account.id.as_str(), account.label.as_str()),
            (id, label),
            "{name}"
        );
        let calls = fake.calls();
        assert_eq!(
            (calls.authorize, calls.token, calls.userinfo),
            (1, 1, 1),
            "{name}"
        );
    }
}

#[tokio::test]
async fn google_gives_a_refresh_token_only_for_offline_consent() {
    let google = google::start().await;
    let (query, tokens) = connect(&google, "google").await;
    assert_eq!(query["iss"], google::ISSUER);
    let asked = google.last_authorize().unwrap();
    assert_eq!(
        (asked["access_type"].as_str(), asked["prompt"].as_str()),
        ("offline", "consent")
    );
    assert_eq!(tokens.expires_in.unwrap().as_secs(), 3599);
    let refresh_token = tokens.refresh_token.unwrap();

    let catalog = catalog(&google, "google");
    let provider = catalog.get("google").unwrap();
    let http = outbound_http_client().unwrap();
    let refreshed = provider
        .refresh(&http, refresh_token.expose_secret(), &Default::default())
        .await
        .unwrap();
    assert!(
        refreshed.refresh_token.is_none(),
        "Google keeps its refresh token"
    );
    assert_eq!(google.calls().refresh, 1);
    provider
        .revoke(
            &http,
            refresh_token.expose_secret(),
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap();
    let dead = provider
        .refresh(&http, refresh_token.expose_secret(), &Default::default())
        .await;
    assert!(matches!(dead, Err(ProviderError::InvalidGrant)), "{dead:?}");
    let gone = provider
        .account(&http, refreshed.access_token.expose_secret())
        .await;
    assert!(matches!(gone, Err(ProviderError::Denied(_))), "{gone:?}");

    // Without `prompt=consent`: no refresh token.
    let url = format!(
        "{}/o/oauth2/v2/auth?client_id={}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb\
         &response_type=code&scope=openid%20email&access_type=offline",
        google.base,
        google.client_id()
    );
    let back = google.visit(&url).await;
    let code = back
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let form = [
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
        ("client_id", google.client_id()),
        ("client_secret", google.client_secret()),
    ];
    let answer: Value = no_redirects()
        .post(format!("{}/token", google.base))
        .form(&form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        answer["access_token"]
            .as_str()
            .unwrap()
            .starts_with("ya29.")
    );
    assert!(answer.get("refresh_token").is_none(), "{answer}");
    assert!(
        answer["scope"]
            .as_str()
            .unwrap()
            .contains("auth/userinfo.email")
    );
}

#[tokio::test]
async fn slack_nests_the_user_token_and_answers_errors_with_200() {
    let slack = slack::start().await;
    let (_, tokens) = connect(&slack, "slack").await;
    assert!(tokens.access_token.expose_secret().starts_with("xoxp-"));
    assert_eq!(slack.last_authorize().unwrap()["user_scope"], "users:read");
    let form = [
        ("code", "made-up"),
        ("client_id", slack.client_id()),
        ("client_secret", slack.client_secret()),
    ];
    let response = no_redirects()
        .post(format!("{}/api/oauth.v2.access", slack.base))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        (answer["ok"].as_bool(), answer["error"].as_str()),
        (Some(false), Some("invalid_code"))
    );
    // `users.identity` needs `identity.basic`, which this token lacks.
    let identity: Value = no_redirects()
        .get(format!("{}/api/users.identity", slack.base))
        .bearer_auth(tokens.access_token.expose_secret())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(identity["error"], "missing_scope");
}

#[tokio::test]
async fn github_wants_a_user_agent_and_honours_deny_next() {
    let github = github::start().await;
    let (_, tokens) = connect(&github, "github").await;
    let token = tokens.access_token.expose_secret();
    let user = format!("{}/user", github.base);
    let bare = no_redirects()
        .get(&user)
        .header("Authorization", format!("token {token}"));
    assert_eq!(bare.send().await.unwrap().status(), 403);
    let response = no_redirects()
        .get(&user)
        .header("User-Agent", "tests")
        .header("Authorization", format!("token {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let response = no_redirects()
        .get(&user)
        .header("User-Agent", "tests")
        .bearer_auth("gho_nope");
    let refused = response.send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["message"],
        "Bad credentials"
    );
    assert!(github.secrets().iter().any(|s| s == token));

    github.deny_next();
    let catalog = catalog(&github, "github");
    let url = catalog
        .get("github")
        .unwrap()
        .authorize_url("s2", "c", &[])
        .unwrap();
    let back = github.visit(url.as_str()).await;
    let query: BTreeMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(
        (query["error"].as_str(), query["state"].as_str()),
        ("access_denied", "s2")
    );
    assert!(!query.contains_key("code"));
}

#[tokio::test]
async fn github_answers_form_encoded_without_accept_json() {
    let github = github::start().await;
    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let authorize = format!(
        "{}/login/oauth/authorize?client_id={}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb\
         &scope=read%3Auser&state=s1&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM\
         &code_challenge_method=S256",
        github.base,
        github.client_id()
    );
    let back = github.visit(&authorize).await;
    let query: BTreeMap<_, _> = back.query_pairs().into_owned().collect();
    assert_eq!(query["state"], "s1");
    let form = [
        ("client_id", github.client_id()),
        ("client_secret", github.client_secret()),
        ("code", &query["code"]),
        ("redirect_uri", "http://127.0.0.1:9/cb"),
        ("code_verifier", verifier),
    ];
    let url = format!("{}/login/oauth/access_token", github.base);
    let response = no_redirects().post(&url).form(&form).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/x-www-form-urlencoded")
    );
    let body = response.text().await.unwrap();
    let answer: BTreeMap<_, _> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    assert!(answer["access_token"].starts_with("gho_"), "{body}");
    assert_eq!(answer["scope"], "read:user");
    assert_eq!(answer["token_type"], "bearer");
    assert!(!answer.contains_key("expires_in") && !answer.contains_key("refresh_token"));
    assert!(body.contains("scope=read%3Auser"), "{body}");
    // The code is spent: the second try is an HTTP 200 error, as JSON now.
    let response = no_redirects()
        .post(&url)
        .header("Accept", "application/json")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"], "bad_verification_code");
    assert_eq!(github.calls().token, 2);
}
