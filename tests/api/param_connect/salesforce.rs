//! A Salesforce-like provider: the org's host comes in the token answer
//! (`instance_url`), is stored with the connection, and is where the API
//! is called; refresh and revocation go to the login host.

use serde_json::json;

use provider_fakes::salesforce;

use super::{api_args, call, connect_with, expire, retry, stored_params};
use crate::{key_connect::disconnect, provider_flows::app_with};

#[tokio::test]
async fn the_org_host_from_the_token_answer_is_where_the_api_is_called() {
    let fake = salesforce::start().await;
    let app = app_with(&fake, "salesforce").await;
    let port = fake.base.rsplit(':').next().unwrap().to_owned();
    let args = api_args("salesforce", "v62.0/query");
    let (browser, done, state) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(
        done.body.contains("connected as alice@acme.example"),
        "{}",
        done.body
    );
    let instance = format!("http://localhost:{port}");
    assert_eq!(stored_params(&app).await, json!({"instance_url": instance}));
    // Salesforce names no expiry: the entry's shortest session is assumed.
    let minutes: f64 = sqlx::query_scalar(
        "SELECT (extract(epoch FROM access_token_expires_at - now()) / 60)::float8 FROM connections",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!((14.0..=15.0).contains(&minutes), "{minutes}");

    let body = retry(&app, &args, &state).await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(
        result["body"]["path"], "/services/data/v62.0/query",
        "{body}"
    );
    let (host, path) = fake.api_seen().pop().unwrap();
    assert_eq!(
        host,
        format!("localhost:{port}"),
        "the org's host, not the login host"
    );
    assert_eq!(path, "/services/data/v62.0/query");

    // Refreshed at the login host, the API still at the org's.
    expire(&app).await;
    let refreshed = call(&app, &args).await;
    assert_eq!(refreshed["http_status"], 200, "{refreshed}");
    assert_eq!(fake.calls().refresh, 1);
    assert_eq!(
        fake.api_seen().pop().unwrap().0,
        format!("localhost:{port}")
    );

    // Disconnect revokes the grant at the login host: the refresh token
    // (which takes its access tokens with it) is dead there afterwards.
    let refresh_token = fake.refresh_tokens().pop().expect("a refresh token");
    let gone = disconnect(&app, "salesforce").await;
    assert_eq!(
        gone["result"]["structuredContent"]["revocation"], "revoked",
        "{gone}"
    );
    assert!(fake.calls().revoke >= 1);
    let refreshed = fake.refresh_status("/services/oauth2/token", &refresh_token);
    assert_eq!(
        refreshed.await.unwrap(),
        400,
        "the refresh token still works"
    );
    let whoami = fake.calls().userinfo;
    assert_eq!(whoami, 1, "the identity was read once, at the login host");
    drop(browser);
    crate::logs::assert_absent(&fake.secrets());
}

/// The app, its entry allowing the fake's org at either loopback name
/// (the fake serves its API only at `localhost`, so an org at
/// `127.0.0.1` is one that moved away).
async fn app_allowing_both_hosts(fake: &provider_fakes::FakeProvider) -> crate::helpers::TestApp {
    let port = fake.base.rsplit(':').next().unwrap().to_owned();
    crate::helpers::spawn_app_with(|t| {
        fake.configure(t, "salesforce");
        let pattern = format!("http://(localhost|127\\.0\\.0\\.1):{port}");
        t["providers"]["salesforce"]["params"]["instance_url"]["pattern"] = pattern.into();
    })
    .await
}

/// The token expired; the next call refreshes and reaches the org's API
/// at `localhost`.
async fn refresh_then_call_at_localhost(
    app: &crate::helpers::TestApp,
    fake: &provider_fakes::FakeProvider,
    args: &serde_json::Value,
) {
    let port = fake.base.rsplit(':').next().unwrap().to_owned();
    expire(app).await;
    let refreshed = call(app, args).await;
    assert_eq!(fake.calls().refresh, 1);
    assert_eq!(refreshed["http_status"], 200, "{refreshed}");
    let host = fake.api_seen().pop().unwrap().0;
    assert_eq!(host, format!("localhost:{port}"));
}

#[tokio::test]
async fn the_org_host_a_refresh_answer_names_replaces_the_stored_one() {
    let fake = salesforce::start().await;
    let port = fake.base.rsplit(':').next().unwrap().to_owned();
    let app = app_allowing_both_hosts(&fake).await;
    let args = api_args("salesforce", "v62.0/query");
    let old = format!("http://127.0.0.1:{port}");
    fake.set_instance_url(&old);
    let (_, done, _) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(stored_params(&app).await, json!({"instance_url": old}));

    // The org moved: the refresh answer names its new host.
    let moved = format!("http://localhost:{port}");
    fake.set_instance_url(&moved);
    refresh_then_call_at_localhost(&app, &fake, &args).await;
    assert_eq!(stored_params(&app).await, json!({"instance_url": moved}));
    crate::logs::assert_absent(&fake.secrets());
}

#[tokio::test]
async fn a_refresh_answer_naming_an_org_host_elsewhere_keeps_the_stored_one() {
    let fake = salesforce::start().await;
    let app = app_with(&fake, "salesforce").await;
    let args = api_args("salesforce", "v62.0/query");
    let (_, done, _) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let stored = stored_params(&app).await;

    fake.set_instance_url("https://evil.example");
    refresh_then_call_at_localhost(&app, &fake, &args).await;
    assert_eq!(stored_params(&app).await, stored, "the stored org is kept");
    let logs = crate::logs::captured();
    let refusal = logs
        .lines()
        .find(|l| l.contains("refresh answer named a value refused; the stored one is kept"))
        .expect("the refusal is logged");
    assert!(!refusal.contains("evil.example"), "the value is not logged");
    crate::logs::assert_absent(&fake.secrets());
}
