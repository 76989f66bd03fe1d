//! OAuth providers whose endpoints depend on the connection: a
//! Microsoft-like tenant asked on the consent page and put in the URL
//! path, a Salesforce-like org host learned from the token answer, an
//! Atlassian-like cloud id looked up after consent (with rotating refresh
//! tokens), all local fakes. Each test drives the real pages and the MCP
//! rounds; the shared steps live here (and in `key_connect`).

mod atlassian;
mod microsoft;
mod refusals;
mod salesforce;

use serde_json::{Value, json};

use provider_fakes::FakeProvider;

use crate::{
    browser::{Browser, Page},
    full_flow::retry_accepted,
    helpers::TestApp,
    key_connect::{first_round, open_form, submit},
};

/// `api_request` for `path` at alice's `provider` account.
pub(crate) fn api_args(provider: &str, path: &str) -> Value {
    json!({"provider": provider, "path": path})
}

/// The first round, the consent page answered with `params` (the browser
/// signs in on the way) and the provider's approval; returns the browser,
/// the page the callback showed and the request state of the first round.
pub(crate) async fn connect_with(
    app: &TestApp,
    fake: &FakeProvider,
    args: &Value,
    params: &[(&str, &str)],
) -> (Browser, Page, String) {
    let provider = args["provider"].as_str().unwrap().to_owned();
    let (url, state) = first_round(app, args, &provider).await;
    let (browser, consent) = open_form(app, &url, "alice").await;
    let to_provider = submit(&browser, &consent, params).await;
    assert_eq!(to_provider.status, 303, "{}", to_provider.body);
    let authorize = to_provider.location.clone().unwrap();
    let callback = fake.visit(&authorize).await;
    let done = browser.get(callback.as_str()).await;
    (browser, done, state)
}

/// The client's retry after the person said they were done.
pub(crate) async fn retry(app: &TestApp, args: &Value, state: &str) -> Value {
    let provider = args["provider"].as_str().unwrap();
    let key = format!("connect_{provider}");
    retry_accepted(app, "alice", "api_request", args.clone(), state, &key).await
}

/// The connection's stored parameters.
pub(crate) async fn stored_params(app: &TestApp) -> Value {
    sqlx::query_scalar("SELECT params FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// The stored access token expires now, as when its time has passed.
pub(crate) async fn expire(app: &TestApp) {
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
}

/// An `api_request` after the connection exists: its structured result.
pub(crate) async fn call(app: &TestApp, args: &Value) -> Value {
    let (_, body) = app.call_tool("alice", "api_request", args.clone()).await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    body["result"]["structuredContent"].clone()
}
