//! Refused `requestState`s: fixed reason codes, nothing an attacker chose
//! copied into a row or a log line, and a counter per principal and minute
//! rather than a row per request.

use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_4kb_key_id_is_recorded_as_a_fixed_reason_counted_per_minute() {
    let app = spawn_app().await;
    let kid = "K".repeat(4000);
    let hostile = format!("{kid}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    for _ in 0..20 {
        let (status, body) = app
            .mcp(
                "alice",
                "tools/call",
                json!({
                    "name": "whoami", "arguments": {"provider": "demo"},
                    "requestState": hostile,
                    "inputResponses": {"connect_demo": {"action": "accept"}},
                }),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["error"]["code"], -32602, "{body}");
    }
    let rows: Vec<(Value,)> =
        sqlx::query_as("SELECT detail FROM audit_events WHERE kind = 'state_rejected'")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1, "one row per principal and minute: {rows:?}");
    let detail = &rows[0].0;
    assert!(detail.to_string().len() < 300, "{detail}");
    assert_eq!(detail["reason"], "unknown_key", "{detail}");
    assert_eq!(detail["count"], 20, "{detail}");
    let run = "K".repeat(40);
    assert!(!detail.to_string().contains(&run), "{detail}");
    assert!(
        !crate::logs::captured().contains(&run),
        "the key id reached the logs"
    );
}

#[tokio::test]
async fn another_principal_gets_a_row_of_its_own() {
    let app = spawn_app().await;
    for subject in ["alice", "bob", "alice"] {
        let (_, body) = app
            .mcp(
                subject,
                "tools/call",
                json!({
                    "name": "whoami", "arguments": {"provider": "demo"},
                    "requestState": "junk.AAAA",
                    "inputResponses": {"connect_demo": {"action": "accept"}},
                }),
            )
            .await;
        assert_eq!(body["error"]["code"], -32602, "{body}");
    }
    let counts: Vec<(String, Value)> = sqlx::query_as(
        "SELECT subject, detail->'count' FROM audit_events WHERE kind = 'state_rejected' ORDER BY subject",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        counts,
        vec![("alice".to_owned(), json!(2)), ("bob".to_owned(), json!(1))]
    );
    assert_eq!(
        sqlx::query_scalar::<_, String>(
            "SELECT DISTINCT detail->>'reason' FROM audit_events WHERE kind = 'state_rejected'"
        )
        .fetch_one(&app.db)
        .await
        .unwrap(),
        "unknown_key"
    );
}
