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

    // Disconnect revokes the grant at the login host.
    disconnect(&app, "salesforce").await;
    assert!(fake.calls().revoke >= 1);
    let whoami = fake.calls().userinfo;
    assert_eq!(whoami, 1, "the identity was read once, at the login host");
    drop(browser);
    crate::logs::assert_absent(&fake.secrets());
}
