//! A provider that reflects the connection's secrets gets none of them into
//! an `api_request` result, whatever form it reflects them in.

use serde_json::json;

use crate::{
    fakes::{self, hostile::forms},
    provider_flows::{app_with, connect},
};

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
        assert_eq!(body["result"]["structuredContent"]["status"], 200, "{body}");
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
