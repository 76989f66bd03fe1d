//! A token endpoint that is down when a token needs renewing is the
//! provider's passing fault, not a bug and not the user's: a token that has
//! not expired yet still serves the call, and one that has is answered as
//! a result the model can act on ("try again later"), never as
//! `-32603 Internal error`. The connection stays as it was.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use actix_web::{HttpResponse, web};
use mcp_connect::{
    connect::vault::{TokenState, usable_token},
    domain::UserRef,
};
use serde_json::json;

use crate::{
    helpers::{TestApp, request, spawn_app_with},
    slow_refresh::store,
};

/// Google, whose token endpoint answers every request 503.
struct DownGoogle {
    google: provider_fakes::FakeProvider,
    token_endpoint: provider_fakes::server::Server,
    /// Requests the token endpoint answered.
    asked: Arc<AtomicUsize>,
}

impl DownGoogle {
    async fn start() -> Self {
        Self::answering_after(std::time::Duration::ZERO).await
    }

    /// Whose token endpoint takes `delay` to answer 503.
    async fn answering_after(delay: std::time::Duration) -> Self {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        Self {
            google: provider_fakes::google::start().await,
            token_endpoint: provider_fakes::server::start(move |cfg| {
                let counter = counter.clone();
                cfg.route(
                    "/token",
                    web::post().to(move || {
                        counter.fetch_add(1, Ordering::SeqCst);
                        async move {
                            tokio::time::sleep(delay).await;
                            HttpResponse::ServiceUnavailable().body("upstream maintenance")
                        }
                    }),
                );
            }),
            asked,
        }
    }

    async fn app(&self) -> TestApp {
        let mut table = self.google.provider_table();
        table.insert(
            "token_url".into(),
            format!("{}/token", self.token_endpoint.base).into(),
        );
        spawn_app_with(|t| {
            let mut providers = toml::Table::new();
            providers.insert("google".into(), table.into());
            t.insert("providers".into(), providers.into());
        })
        .await
    }
}

/// The stored token, received an hour ago, expires in `interval`: due
/// for renewal whenever that is within the refresh margin.
async fn expire_in(app: &TestApp, interval: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE connections SET access_token_expires_at = now() + interval '{interval}', \
                                tokens_stored_at = now() - interval '1 hour'"
    )))
    .execute(&app.db)
    .await
    .unwrap();
}

async fn status(app: &TestApp) -> String {
    sqlx::query_scalar("SELECT status::text FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_token_endpoint_that_is_down_leaves_a_valid_token_usable() {
    let down = DownGoogle::start().await;
    let app = down.app().await;
    store(&app, "alice").await;
    // Due for renewal (within the refresh margin), not expired.
    expire_in(&app, "20 seconds").await;
    let provider = app.state.connect.provider("google").unwrap();
    let user_issuer = app.dev.issuer();
    let user = UserRef::new(&user_issuer, "alice");
    let state = usable_token(&app.state.connect, user, provider, &[])
        .await
        .unwrap();
    let TokenState::Usable(token) = state else {
        panic!("the current token serves: {state:?}");
    };
    assert_eq!(
        secrecy::ExposeSecret::expose_secret(&token.access_token),
        "alice-access"
    );
    assert!(
        down.asked.load(Ordering::SeqCst) >= 1,
        "a renewal was tried"
    );
    assert_eq!(status(&app).await, "active");
}

#[tokio::test]
async fn an_expired_token_that_cannot_be_renewed_answers_retry_later() {
    let down = DownGoogle::start().await;
    let app = down.app().await;
    store(&app, "alice").await;
    expire_in(&app, "-1 second").await;
    let provider = app.state.connect.provider("google").unwrap();
    let user_issuer = app.dev.issuer();
    let user = UserRef::new(&user_issuer, "alice");
    let state = usable_token(&app.state.connect, user, provider, &[])
        .await
        .unwrap();
    assert!(
        matches!(state, TokenState::ProviderUnavailable),
        "{state:?}"
    );
    assert!(
        down.asked.load(Ordering::SeqCst) >= 1,
        "a renewal was tried"
    );

    let (http, body) = app
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(http, 200, "{body}");
    assert!(body.get("error").is_none(), "a result, not -32603: {body}");
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete", "{body}");
    assert_eq!(result["isError"], true, "{body}");
    let content = &result["structuredContent"];
    assert_eq!(content["error"]["kind"], "provider_unavailable", "{body}");
    assert_eq!(content["next_step"], "retry_later", "{body}");
    // Nothing of the outage reaches the model but that it was one.
    assert!(!body.to_string().contains("maintenance"), "{body}");
    // The user's grant is untouched: no reconnect asked for.
    assert_eq!(status(&app).await, "active");

    // The profile resource says the same in its own terms: retryable, and
    // after as long in HTTP terms as in its own.
    let body = request(
        "resources/read",
        json!({"uri": "connection://google/profile"}),
    );
    let answer = app
        .mcp_request(Some(&app.token("alice")), &body)
        .send()
        .await
        .unwrap();
    let retry_after = answer
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let (http, read) = crate::helpers::read(answer).await;
    assert_eq!(http, 503, "{read}");
    assert_eq!(read["error"]["code"], -31000, "{read}");
    assert_eq!(read["error"]["data"]["retryable"], true, "{read}");
    assert_eq!(
        retry_after,
        Some(read["error"]["data"]["retryAfterSeconds"].to_string()),
        "{read}"
    );
    assert!(
        read["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Google"),
        "{read}"
    );
}

/// Whether the token has expired is judged when the renewal has failed,
/// not when the row was read before it: a token that expired while the
/// token endpoint took its time does not serve.
#[tokio::test]
async fn a_token_that_expires_while_its_renewal_fails_does_not_serve() {
    let down = DownGoogle::answering_after(std::time::Duration::from_secs(3)).await;
    let app = down.app().await;
    store(&app, "alice").await;
    expire_in(&app, "1 second").await;
    let provider = app.state.connect.provider("google").unwrap();
    let user_issuer = app.dev.issuer();
    let user = UserRef::new(&user_issuer, "alice");
    let state = usable_token(&app.state.connect, user, provider, &[])
        .await
        .unwrap();
    assert!(
        matches!(state, TokenState::ProviderUnavailable),
        "expired by the time the renewal failed: {state:?}"
    );
    assert_eq!(down.asked.load(Ordering::SeqCst), 1, "a renewal was tried");
    assert_eq!(status(&app).await, "active");
}
