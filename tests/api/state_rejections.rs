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

/// The client id is the client's choice: a refusal's row keeps it by the
/// rule of every audit row (a metadata document's URL, as a rule, whole),
/// so it matches the rows of that client's tickets.
#[tokio::test]
async fn a_refusal_keeps_the_client_id_as_its_tickets_row_does() {
    let app = spawn_app().await;
    // A metadata document's URL; on a loopback address, so no document is
    // fetched for its name.
    let client = format!("https://127.0.0.1/{}/client.json", "m".repeat(200));
    let refuse = json!({
        "name": "whoami", "arguments": {"provider": "demo"},
        "requestState": "junk.AAAA",
        "inputResponses": {"connect_demo": {"action": "accept"}},
    });
    let (_, body) = app.mcp_as(&client, "alice", "tools/call", refuse).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let ask = json!({"name": "whoami", "arguments": {"provider": "demo"}});
    let (_, body) = app.mcp_as(&client, "alice", "tools/call", ask).await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");

    let kept = |kind: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT detail->>'client_id' FROM audit_events WHERE kind = $1",
            )
            .bind(kind)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    let rejected = kept("state_rejected").await;
    assert_eq!(rejected, format!("{}…", &client[..128]));
    assert_eq!(rejected, kept("ticket_issued").await);
}
