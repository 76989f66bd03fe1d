//! A Twilio-like Basic provider: the account SID and auth token as HTTP
//! Basic, the SID also in every path.

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::json;

use super::{
    app_with, assert_not_stored_in_clear, disconnect, first_round, open_form, submit, twilio_entry,
};
use provider_fakes::{hostile::forms, key_providers::twilio};

use crate::full_flow::retry_accepted;

#[tokio::test]
async fn sid_and_token_connect_as_basic_and_the_sid_names_the_path() {
    let fake = twilio::start().await;
    let app = app_with(&fake, "twilio", twilio_entry(&fake)).await;
    let args = json!({"provider": "twilio", "path": "Messages.json"});
    let (url, state) = first_round(&app, &args, "twilio").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    assert!(form.body.contains("Account SID"), "{}", form.body);
    assert!(form.body.contains("Auth Token"), "{}", form.body);
    assert!(
        form.body.contains("href=\"https://console.twilio.com/\""),
        "{}",
        form.body
    );

    let done = submit(
        &browser,
        &form,
        &[
            ("field.account_sid", &fake.first),
            ("field.auth_token", &fake.second),
        ],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("connected as Alice"), "{}", done.body);
    let basic = format!(
        "Basic {}",
        STANDARD.encode(format!("{}:{}", fake.first, fake.second))
    );
    let checked = &fake.seen()[0];
    assert_eq!(
        checked.path,
        format!("/2010-04-01/Accounts/{}.json", fake.first)
    );
    assert_eq!(checked.authorization.as_deref(), Some(basic.as_str()));

    let body = retry_accepted(&app, "alice", "api_request", args, &state, "connect_twilio").await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(result["account"], "Alice's Twilio", "{body}");
    let call = fake.seen().pop().unwrap();
    assert_eq!(
        call.path,
        format!("/2010-04-01/Accounts/{}/Messages.json", fake.first)
    );
    assert_eq!(call.authorization.as_deref(), Some(basic.as_str()));
    let account_id: String = sqlx::query_scalar("SELECT account_id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(account_id, fake.first);

    // A provider that echoes the credential (the token, the Basic header)
    // in any form gets none of it into the result.
    let (_, echoed) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "twilio", "path": "Echo.json"}),
        )
        .await;
    assert_eq!(
        echoed["result"]["structuredContent"]["http_status"], 200,
        "{echoed}"
    );
    let shown = echoed.to_string();
    for secret in fake.secrets(false) {
        for form in forms(&secret) {
            assert!(
                !shown.contains(&form),
                "an echoed credential reached the result"
            );
        }
    }

    // A key has no scopes: asking for some does not send the user back.
    let (_, scoped) = app
        .call_tool(
            "alice",
            "connect",
            json!({"provider": "twilio", "scopes": ["messages"]}),
        )
        .await;
    assert_eq!(scoped["result"]["resultType"], "complete", "{scoped}");

    let secrets = fake.secrets(false);
    assert_not_stored_in_clear(&app, &secrets).await;
    let page = browser.get("/connections").await;
    assert!(
        page.body.contains(&format!("…{}", &fake.second[28..])),
        "{}",
        page.body
    );
    assert!(!page.body.contains(&fake.second));
    let before = fake.requests();
    disconnect(&app, "twilio").await;
    assert_eq!(fake.requests(), before, "no revocation call");
    crate::logs::assert_absent(&secrets);
}

/// Connect pressed twice (a double click, or a resubmitted form): both
/// answers say the account is connected — the second is not told the link
/// is spent while the key was stored — and one connection is stored.
#[tokio::test]
async fn a_second_submit_of_the_form_answers_as_the_first() {
    let fake = twilio::start().await;
    let app = app_with(&fake, "twilio", twilio_entry(&fake)).await;
    let args = json!({"provider": "twilio", "path": "Messages.json"});
    let (url, _) = first_round(&app, &args, "twilio").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let inputs = [
        ("field.account_sid", fake.first.as_str()),
        ("field.auth_token", fake.second.as_str()),
    ];
    let (one, two) = tokio::join!(
        submit(&browser, &form, &inputs),
        submit(&browser, &form, &inputs)
    );
    for page in [&one, &two] {
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("connected as Alice"), "{}", page.body);
    }
    let again = submit(&browser, &form, &inputs).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(again.body.contains("connected as Alice"), "{}", again.body);
    assert_eq!(
        crate::helpers::count(&app, "SELECT count(*) FROM connections").await,
        1
    );
}
