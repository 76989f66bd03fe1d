//! A Datadog-like API-key provider: two keys in two headers, the site in
//! the host, both checked at `/api/v2/validate_keys` before anything is stored.

use serde_json::json;

use super::{
    app_with, assert_not_stored_in_clear, datadog_entry, disconnect, first_round, open_form, submit,
};
use provider_fakes::{hostile::forms, key_providers::datadog};

use crate::{full_flow::retry_accepted, helpers::count};

#[tokio::test]
async fn two_keys_and_a_site_connect_and_call_the_api_at_that_site() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, state) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    assert!(form.body.contains("Application key"), "{}", form.body);
    assert!(form.body.contains("Datadog site"), "{}", form.body);
    assert!(
        form.body
            .contains("paste an API key and an application key")
    );
    assert!(
        form.body
            .contains("href=\"https://app.datadoghq.com/organization-settings/api-keys\""),
        "{}",
        form.body
    );
    assert!(form.body.contains("type=\"password\""), "{}", form.body);

    let done = submit(
        &browser,
        &form,
        &[
            ("param.site", "localhost"),
            ("field.api_key", &fake.first),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let hint = format!("…{}", &fake.first[28..]);
    assert!(
        done.body.contains(&format!("connected as key {hint}")),
        "{}",
        done.body
    );
    // The check went to the chosen site, with the API key in its header
    // (and the application key in its own: the check answers for both).
    let checked = &fake.seen()[0];
    assert_eq!(checked.host, format!("localhost:{}", fake.port));
    assert_eq!(checked.path, "/api/v2/validate_keys");
    assert_eq!(checked.api_key.as_deref(), Some(fake.first.as_str()));
    assert_eq!(
        checked.application_key.as_deref(),
        Some(fake.second.as_str())
    );
    let used: i64 = count(
        &app,
        "SELECT count(*) FROM connect_tickets WHERE redeemed_at IS NOT NULL",
    )
    .await;
    assert_eq!(used, 1, "the ticket is spent");

    // The client's retry completes with the API call at that site.
    let body = retry_accepted(
        &app,
        "alice",
        "api_request",
        args.clone(),
        &state,
        "connect_datadog",
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(result["body"]["path"], "/api/v1/monitor", "{body}");
    let call = fake.seen().pop().unwrap();
    assert_eq!(call.host, format!("localhost:{}", fake.port));
    assert_eq!(call.api_key.as_deref(), Some(fake.first.as_str()));
    assert_eq!(call.application_key.as_deref(), Some(fake.second.as_str()));
    assert_eq!(call.authorization, None);

    let site: String = sqlx::query_scalar("SELECT params->>'site' FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(site, "localhost");
    let secrets = fake.secrets(true);
    assert_not_stored_in_clear(&app, &secrets).await;
    // The connections page shows the masked suffix and nothing more.
    let page = browser.get("/connections").await;
    assert!(page.body.contains(&hint), "{}", page.body);
    for page in [&form.body, &done.body, &page.body] {
        for secret in &secrets {
            assert!(!page.contains(secret.as_str()), "a key reached a page");
        }
    }
    // whoami answers without asking again.
    let (_, who) = app
        .call_tool("alice", "whoami", json!({"provider": "datadog"}))
        .await;
    assert_eq!(
        who["result"]["structuredContent"]["account"],
        format!("key {hint}"),
        "{who}"
    );

    // The organization's keys are not for the model: refused, not sent.
    let before = fake.requests();
    for path in [
        "v2/api_keys",
        "V1/api_key/abc",
        "v2/current_user/application_keys",
    ] {
        let (_, keys) = app
            .call_tool(
                "alice",
                "api_request",
                json!({"provider": "datadog", "path": path}),
            )
            .await;
        assert_eq!(
            keys["result"]["structuredContent"]["error"]["kind"], "refused",
            "{path}: {keys}"
        );
    }
    assert_eq!(fake.requests(), before);

    // No refresh, no revocation: disconnect forgets it, calling nobody.
    let before = fake.requests();
    disconnect(&app, "datadog").await;
    assert_eq!(fake.requests(), before);
    let (_, again) = app.call_tool("alice", "api_request", args).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    crate::logs::assert_absent(&secrets);
}

#[tokio::test]
async fn an_echoed_key_is_redacted_from_the_result() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/echo"});
    let (url, state) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let keys = [
        ("field.api_key", fake.first.as_str()),
        ("field.application_key", fake.second.as_str()),
    ];
    let done = submit(&browser, &form, &keys).await;
    assert_eq!(done.status, 200, "{}", done.body);
    // The default site.
    assert_eq!(fake.seen()[0].host, format!("127.0.0.1:{}", fake.port));
    let body = retry_accepted(
        &app,
        "alice",
        "api_request",
        args,
        &state,
        "connect_datadog",
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 200,
        "{body}"
    );
    let shown = body.to_string();
    assert!(shown.contains("[redacted]"), "{shown}");
    for secret in fake.secrets(true) {
        for form in forms(&secret) {
            assert!(
                !shown.contains(&form),
                "an echoed key reached the result: {form}"
            );
        }
    }
}
