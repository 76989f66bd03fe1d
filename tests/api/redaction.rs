//! What a hostile or slow provider API can make of an `api_request` result:
//! it gets none of the connection's secrets into it, whatever form it
//! reflects them in, and a request it sat on is not reported as unsent.

use serde_json::json;

use provider_fakes::{self as fakes, hostile::forms};

use crate::provider_flows::{app_with, connect};

#[tokio::test]
async fn echoed_secrets_are_redacted_in_every_form_json_and_text() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let secrets = fake.secrets();
    assert!(
        secrets.iter().any(|s| s.contains('/')),
        "a secret with a slash, for the \\/ escape: {secrets:?}"
    );
    for answer in ["", "?as=text"] {
        let before = fake.calls().api;
        let (_, body) = app
            .call_tool(
                "alice",
                "api_request",
                json!({"provider": "google", "path": format!("hostile/echo{answer}")}),
            )
            .await;
        assert_eq!(fake.calls().api, before + 1, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["http_status"], 200,
            "{body}"
        );
        let shown = body.to_string();
        assert!(shown.contains("[redacted]"), "{shown}");
        for secret in &secrets {
            for form in forms(secret) {
                assert!(
                    !shown.contains(&form),
                    "a form of a secret reached the result ({answer}): {form}"
                );
            }
            // A JSON parser decodes the escapes: the decoded text must not
            // hold the secret either.
            let structured = body["result"]["structuredContent"]["body"].to_string();
            assert!(!structured.contains(secret.as_str()), "{structured}");
        }
    }
}

#[tokio::test]
async fn a_timed_out_request_is_said_to_have_maybe_reached_the_provider() {
    let fake = fakes::google::start().await;
    let app = crate::helpers::spawn_app_with(|t| {
        fake.configure(t, "google");
        t["providers"]["google"]
            .as_table_mut()
            .unwrap()
            .insert("api_timeout_secs".into(), 1.into());
        t["providers"]["google"].as_table_mut().unwrap().insert(
            "allowed_methods".into(),
            toml::Value::Array(vec!["POST".into()]),
        );
    })
    .await;
    connect(&app, &fake, "google").await;
    let before = fake.calls().api;
    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "google", "method": "POST", "path": "hostile/slow", "body": {}}),
        )
        .await;
    assert_eq!(fake.calls().api, before + 1, "the request was sent: {body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains("not made"), "{text}");
    assert!(text.contains("may have reached the provider"), "{text}");
}
