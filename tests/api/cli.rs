//! The command line, run as the real binary.

use std::process::Command;

use serde_json::json;

use crate::helpers::{request, server_url, spawn_app};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
}

#[tokio::test]
async fn dev_token_for_bob_yields_principal_bob() {
    let app = spawn_app().await;
    // Bob owns a connection; the token printed by the CLI must see it.
    sqlx::query(
        "INSERT INTO connections (id, issuer, subject, provider, account_id, account_label, access_token, key_id)
         VALUES ($1, $2, 'bob', 'demo', '7', 'bob-account', '\\x00', 'dev1')",
    )
    .bind(uuid::Uuid::new_v4())
    .bind(app.dev.issuer())
    .execute(&app.db)
    .await
    .unwrap();
    let output = bin()
        .args([
            "dev",
            "--database-url",
            &format!("{}/{}", server_url(), app.db_name),
        ])
        .args(["--port", &app.port.to_string(), "token", "--sub", "bob"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "one JWT on stdout: {token}");

    let body = request(
        "tools/call",
        json!({"name": "connections_list", "arguments": {}}),
    );
    let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["result"]["structuredContent"]["connections"][0]["account"], "bob-account",
        "{body}"
    );
}

#[test]
fn keys_generate_prints_a_usable_key_entry() {
    let output = bin()
        .args(["keys", "generate", "--id", "k9"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let entry = String::from_utf8(output.stdout).unwrap();
    let entry = entry.trim();
    assert!(entry.starts_with("k9:"), "{entry}");
    mcp_connect::crypto::KeyRing::from_entries([entry]).unwrap();
}

#[test]
fn serve_without_configuration_names_the_missing_setting() {
    let output = bin()
        .arg("serve")
        .env_remove("MCP_CONNECT_PUBLIC_URL")
        .env("MCP_CONNECT_DATABASE_URL", "postgres://localhost/none")
        .env(
            "MCP_CONNECT_KEYS",
            "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .env("MCP_CONNECT_AUTH__ISSUER", "https://idp.example")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("public_url") && stderr.contains("MCP_CONNECT_PUBLIC_URL"),
        "{stderr}"
    );
}

#[test]
fn dev_refuses_a_non_loopback_address() {
    let output = bin()
        .args(["dev", "--bind-host", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("127.0.0.1") || stderr.contains("loopback"),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_commands() {
    let output = bin().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    for word in ["serve", "dev", "migrate", "keys"] {
        assert!(text.contains(word), "{text}");
    }
}
