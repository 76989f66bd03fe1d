//! What is refused on the connect page of an API-key or Basic provider,
//! and what then is (not) stored or sent.

use serde_json::json;

use super::{app_with, datadog_entry, first_round, open_form, submit, twilio_entry};
use provider_fakes::key_providers::{datadog, twilio};

use crate::{full_flow::retry_accepted, helpers::count};

#[tokio::test]
async fn values_off_their_pattern_are_refused_before_any_request_leaves() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, _) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let wrong_key = "NOT-HEX-but-a-SECRET-anyway-1234";
    let page = submit(
        &browser,
        &form,
        &[
            ("param.site", "evil.example"),
            ("field.api_key", wrong_key),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(
        page.body
            .contains("Datadog site is not in the expected form"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("API key is not in the expected form"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Application key is"), "{}", page.body);
    // Secrets are not written back into the page.
    assert!(!page.body.contains(wrong_key), "{}", page.body);
    assert!(!page.body.contains(&fake.second), "{}", page.body);
    assert_eq!(fake.requests(), 0, "nothing was sent to the provider");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM connect_tickets WHERE redeemed_at IS NULL"
        )
        .await,
        1,
        "the link still works"
    );
}

#[tokio::test]
async fn a_key_the_provider_refuses_is_not_stored_and_the_page_says_so() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, state) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let revoked = "0000000000000000000000000000dead";
    let page = submit(
        &browser,
        &form,
        &[
            ("field.api_key", revoked),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(
        page.body
            .contains("Datadog refused these credentials (HTTP 403). Nothing was stored."),
        "{}",
        page.body
    );
    assert_eq!(fake.requests(), 1);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    // A good API key with an application key Datadog does not know is
    // refused too: the check asks about both.
    let unknown_app_key = "00000000000000000000000000000000000dead0";
    let page = submit(
        &browser,
        &page,
        &[
            ("field.api_key", &fake.first),
            ("field.application_key", unknown_app_key),
        ],
    )
    .await;
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(
        page.body
            .contains("Datadog refused these credentials (HTTP 403). Nothing was stored."),
        "{}",
        page.body
    );
    assert_eq!(fake.requests(), 2);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    // The client is still asked to wait; the same link takes the right key.
    let (_, waiting) = app
        .mcp(
            "alice",
            "tools/call",
            json!({"name": "api_request", "arguments": args.clone(),
            "requestState": state, "inputResponses": {"connect_datadog": {"action": "accept"}}}),
        )
        .await;
    assert_eq!(
        waiting["result"]["resultType"], "input_required",
        "{waiting}"
    );
    let done = submit(
        &browser,
        &page,
        &[
            ("field.api_key", &fake.first),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let state = waiting["result"]["requestState"].as_str().unwrap();
    let body = retry_accepted(&app, "alice", "api_request", args, state, "connect_datadog").await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 200,
        "{body}"
    );
}

#[tokio::test]
async fn basic_credentials_the_provider_refuses_are_not_stored() {
    let fake = twilio::start().await;
    let app = app_with(&fake, "twilio", twilio_entry(&fake)).await;
    let args = json!({"provider": "twilio", "path": "Messages.json"});
    let (url, _) = first_round(&app, &args, "twilio").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let page = submit(
        &browser,
        &form,
        &[
            ("field.account_sid", &fake.first),
            ("field.auth_token", "0123456789abcdef0123456789abcdef"),
        ],
    )
    .await;
    assert_eq!(page.status, 422, "{}", page.body);
    assert!(
        page.body
            .contains("Twilio refused these credentials (HTTP 401)"),
        "{}",
        page.body
    );
    // The identifier is shown again for correction; the token is not.
    assert!(page.body.contains(&fake.first), "{}", page.body);
    assert!(!page.body.contains("0123456789abcdef0123456789abcdef"));
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn cancel_on_the_key_form_declines() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, state) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let page = browser
        .submit(&form, "/connect", &[("action", "cancel")])
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Cancelled"), "{}", page.body);
    let body = retry_accepted(
        &app,
        "alice",
        "api_request",
        args,
        &state,
        "connect_datadog",
    )
    .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert_eq!(fake.requests(), 0);
}

#[tokio::test]
async fn a_link_no_longer_usable_checks_nothing_at_the_provider() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, _) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    sqlx::query("UPDATE connect_tickets SET expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let page = submit(
        &browser,
        &form,
        &[
            ("field.api_key", &fake.first),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_ne!(page.status, 200, "{}", page.body);
    assert_eq!(fake.requests(), 0, "an expired link is no way to test keys");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn checks_at_the_provider_are_limited_per_user_and_minute() {
    let fake = datadog::start().await;
    let app = app_with(&fake, "datadog", datadog_entry(&fake)).await;
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, _) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let limit = mcp_connect::connect::credentials::CHECKS_PER_MINUTE as usize;
    for attempt in 0..limit {
        let guess = format!("{attempt:032x}");
        let page = submit(
            &browser,
            &form,
            &[
                ("field.api_key", &guess),
                ("field.application_key", &fake.second),
            ],
        )
        .await;
        assert_eq!(page.status, 422, "{attempt}: {}", page.body);
    }
    let sent = fake.requests();
    assert_eq!(sent, limit);
    let page = submit(
        &browser,
        &form,
        &[
            ("field.api_key", &fake.first),
            ("field.application_key", &fake.second),
        ],
    )
    .await;
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(page.body.contains("Too many attempts"), "{}", page.body);
    assert_eq!(fake.requests(), sent, "nothing more was sent");
}
