//! Client-supplied strings cannot forge log lines: control characters,
//! newlines and ANSI escapes are written escaped in the `pretty` format.
//! Run against the real binary, so the service's own log set-up is what
//! is tested.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::Duration,
};

use crate::{browser::Browser, helpers::spawn_app};

#[tokio::test]
async fn client_strings_are_logged_escaped_in_the_pretty_format() {
    // The database, the dev identity provider and the key of a test app.
    let app = spawn_app().await;
    let key = mcp_connect::dev::dev_key_entry(&app.db).await.unwrap();
    // The server binds it in a process of its own, a while from now.
    let port = provider_fakes::ports::unused_port(&[]);
    let base = format!("http://127.0.0.1:{port}");
    let mut demo = toml::Table::new();
    demo.insert("demo".into(), app.dev.demo().provider_settings().into());
    let mut providers = toml::Table::new();
    providers.insert("providers".into(), demo.into());
    let config = std::env::temp_dir().join(format!("mcp-connect-{}.toml", uuid::Uuid::new_v4()));
    std::fs::write(&config, toml::to_string(&providers).unwrap()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(["--config", config.to_str().unwrap(), "serve"])
        .env("MCP_CONNECT_PUBLIC_URL", &base)
        .env("MCP_CONNECT_BIND", format!("127.0.0.1:{port}"))
        .env(
            "MCP_CONNECT_DATABASE_URL",
            format!("{}/{}", crate::helpers::server_url(), app.db_name),
        )
        .env("MCP_CONNECT_KEYS", key)
        .env("MCP_CONNECT_INSECURE_HTTP", "true")
        .env("MCP_CONNECT_AUTH__ISSUER", app.dev.issuer())
        .env("MCP_CONNECT_AUTH__WEB_CLIENT_ID", "mcp-connect-web")
        .env("MCP_CONNECT_LOG_FORMAT", "pretty")
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    for _ in 0..100 {
        if http.get(format!("{base}/healthz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let browser = Browser::at(&base);
    let marker = uuid::Uuid::new_v4().simple().to_string();
    // A well-formed state nobody issued: the provider name is logged.
    let state = "A".repeat(43);
    let forged = format!("x%0A{marker}-A%20INFO%20forged%1B%5B31m%0D");
    let page = browser
        .get(&format!(
            "{base}/oauth/callback/{forged}?state={state}&code=c"
        ))
        .await;
    assert_eq!(page.status, 400);
    // A sign-in this browser started, refused at the identity provider.
    let start = browser.get(&format!("{base}/login")).await;
    let authorize = url::Url::parse(start.location.as_deref().expect("to the idp")).unwrap();
    let (_, state) = authorize
        .query_pairs()
        .find(|(k, _)| k == "state")
        .expect("state");
    // Named by the issuer, as its answers are (RFC 9207).
    let iss = app.dev.issuer();
    let page = browser
        .get(&format!(
            "{base}/auth/callback?state={state}&error=x%0A{marker}-B%1B%5B2J&iss={iss}"
        ))
        .await;
    assert_eq!(page.status, 400);
    // A clean stop writes out every queued line.
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut logs = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    child.wait().unwrap();
    std::fs::remove_file(config).unwrap();

    let ours: Vec<&str> = logs.lines().filter(|l| l.contains(&marker)).collect();
    for line in &ours {
        assert!(!line.starts_with(&marker), "a forged line: {line:?}");
        assert!(!line.contains('\u{1b}') && !line.contains('\r'), "{line:?}");
    }
    for label in ["A", "B"] {
        let needle = format!("\\n{marker}-{label}");
        assert!(
            ours.iter().any(|l| l.contains(&needle)),
            "the {label} value is kept, escaped: {ours:?}"
        );
    }
}
