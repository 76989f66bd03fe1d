//! A stored token sealed by a key this ring lacks (retired too early, or
//! an instance still sealing with an old key): the user is asked to connect
//! again, `tokens rekey` says which rows it could not re-seal, and start-up
//! warns.

use std::{process::Command, time::Duration};

use mcp_connect::{
    connect::vault::{NewConnection, store_connection},
    domain::{ProviderName, UserRef},
    providers::{Account, TokenSet},
};
use secrecy::SecretString;
use serde_json::json;

use crate::helpers::{TestApp, server_url, spawn_app};

async fn connect(app: &TestApp, subject: &str) {
    let tokens = TokenSet {
        access_token: SecretString::from(format!("{subject}-access")),
        refresh_token: Some(SecretString::from(format!("{subject}-refresh"))),
        expires_in: Some(Duration::from_secs(3600)),
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    store_connection(
        &app.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), subject),
            provider: &ProviderName::parse("demo").unwrap(),
            account: &Account {
                id: subject.into(),
                label: subject.into(),
            },
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some("test-client"),
        },
    )
    .await
    .unwrap();
}

/// Makes `subject`'s row look sealed by a key the ring does not have.
async fn retire_key_of(app: &TestApp, subject: &str) {
    sqlx::query("UPDATE connections SET key_id = 'retired1' WHERE subject = $1")
        .bind(subject)
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_token_that_does_not_open_asks_the_user_to_connect_again() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    retire_key_of(&app, "alice").await;
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let (state, audited): (String, i64) = sqlx::query_as(
        "SELECT status, (SELECT count(*) FROM audit_events WHERE kind = 'token_unreadable' AND detail->>'key_id' = 'retired1')
         FROM connections WHERE subject = 'alice'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((state.as_str(), audited), ("needs_reauth", 1));
}

#[tokio::test]
async fn rekey_reports_rows_still_sealed_by_other_keys() {
    let app = spawn_app().await;
    connect(&app, "alice").await;
    connect(&app, "bob").await;
    retire_key_of(&app, "alice").await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(["tokens", "rekey"])
        .env("MCP_CONNECT_PUBLIC_URL", &app.base)
        .env(
            "MCP_CONNECT_DATABASE_URL",
            format!("{}/{}", server_url(), app.db_name),
        )
        .env("MCP_CONNECT_KEYS", key)
        .env("MCP_CONNECT_AUTH__ISSUER", app.dev.issuer())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 connection(s) still sealed by keys not in MCP_CONNECT_KEYS: retired1"),
        "{stdout}"
    );
}

#[tokio::test]
async fn start_up_warns_about_stored_key_ids_the_ring_lacks() {
    let app = spawn_app().await;
    connect(&app, "carol-stale-key").await;
    sqlx::query("UPDATE connections SET key_id = 'gone-key-7' WHERE subject = 'carol-stale-key'")
        .execute(&app.db)
        .await
        .unwrap();
    let _second = app.second_instance().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let logs = crate::logs::captured();
        if logs
            .lines()
            .any(|l| l.contains("gone-key-7") && l.contains("key ids the ring lacks"))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no start-up warning");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
