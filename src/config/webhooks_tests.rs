//! `[webhooks]`: endpoints from the file or the environment (the secret
//! from a file), and what validation refuses, each named by its setting.

use secrecy::ExposeSecret;

use super::{Settings, WebhookEvent, test_support::minimal};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn load(extra: &[(&str, &str)]) -> Result<Settings, String> {
    let mut vars = minimal();
    vars.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    Settings::from_sources(None, vars, toml::Table::new()).map_err(|e| e.to_string())
}

#[test]
fn no_endpoint_by_default() {
    let s = load(&[]).unwrap();
    assert!(s.webhooks.endpoints.is_empty());
    assert_eq!(s.webhooks.retry_for_secs, 24 * 3600);
    assert!(
        s.webhooks
            .endpoints_for(WebhookEvent::ConnectionCreated)
            .is_empty()
    );
}

#[test]
fn an_endpoint_comes_from_the_environment_with_its_secret_from_a_file() {
    let dir = std::env::temp_dir().join(format!("mcp-connect-cfg-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ops-secret");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let path = file.display().to_string();
    let s = load(&[
        (
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__URL",
            "https://hooks.example.com/mcp",
        ),
        ("MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SECRET_FILE", &path),
        (
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__EVENTS",
            "connection.created, grant.removed",
        ),
    ])
    .unwrap();
    let ops = &s.webhooks.endpoints["ops"];
    assert_eq!(ops.secret.expose_secret(), SECRET);
    assert!(ops.wants(WebhookEvent::GrantRemoved));
    assert!(!ops.wants(WebhookEvent::ConnectionDeleted));
    assert_eq!(
        s.webhooks.endpoints_for(WebhookEvent::ConnectionCreated),
        vec!["ops".to_owned()]
    );
    assert!(
        !format!("{s:?}").contains("MfKQ9r8"),
        "the secret is redacted"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_endpoints_are_refused_by_setting_and_secrets_are_not_echoed() {
    let url = "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__URL";
    let secret = "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SECRET";
    let good_url = "https://hooks.example.com/x";
    for (u, s, key) in [
        (
            "http://hooks.example.com/x",
            SECRET,
            "webhooks.endpoints.ops.url",
        ),
        (
            "ftp://hooks.example.com/x",
            SECRET,
            "webhooks.endpoints.ops.url",
        ),
        (
            "https://hooks.example.com/x#f",
            SECRET,
            "webhooks.endpoints.ops.url",
        ),
        (
            good_url,
            "not-a-whsec-secret",
            "webhooks.endpoints.ops.secret",
        ),
        (
            good_url,
            "whsec_!!notbase64!!",
            "webhooks.endpoints.ops.secret",
        ),
        (good_url, "whsec_c2hvcnQ=", "webhooks.endpoints.ops.secret"),
    ] {
        let err = load(&[(url, u), (secret, s)]).unwrap_err();
        assert!(err.contains(key), "{u} {s}: {err}");
        assert!(!err.contains(s), "the secret is not echoed: {err}");
    }
    // Plain http is for loopback (tests, dev).
    assert!(load(&[(url, "http://127.0.0.1:9000/x"), (secret, SECRET)]).is_ok());
    let err = load(&[(url, good_url)]).unwrap_err();
    assert!(err.contains("webhooks.endpoints.ops.secret"), "{err}");
    let err = load(&[
        (url, good_url),
        (secret, SECRET),
        (
            "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__EVENTS",
            "connection.updated",
        ),
    ])
    .unwrap_err();
    assert!(
        err.contains("connection.updated") && err.contains("grant.removed"),
        "the known events are listed: {err}"
    );
    // An empty list would read as every event: refused, in the
    // environment and in TOML alike.
    let err = load(&[
        (url, good_url),
        (secret, SECRET),
        ("MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__EVENTS", ""),
    ])
    .unwrap_err();
    assert!(
        err.contains("webhooks.endpoints.ops.events") && err.contains("leave `events` out"),
        "{err}"
    );
    let mut file = toml::Table::new();
    file.insert(
        "webhooks".into(),
        toml::from_str::<toml::Value>(&format!(
            "[endpoints.ops]\nurl = \"{good_url}\"\nsecret = \"{SECRET}\"\nevents = []\n"
        ))
        .unwrap(),
    );
    let err = Settings::from_sources(None, minimal(), file)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("leave `events` out"), "{err}");
    let err = load(&[("MCP_CONNECT_WEBHOOKS__TIMEOUT_SECS", "0")]).unwrap_err();
    assert!(err.contains("webhooks.timeout_secs"), "{err}");
    let err = load(&[
        (url, good_url),
        (secret, SECRET),
        ("MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SIGNING_KEY", "x"),
    ])
    .unwrap_err();
    assert!(err.contains("webhooks.endpoints.ops.signing_key"), "{err}");
}

#[test]
fn a_previous_secret_is_checked_like_the_secret_and_must_differ_from_it() {
    let url = (
        "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__URL",
        "https://hooks.example.com/x",
    );
    let secret = "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SECRET";
    let previous = "MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__PREVIOUS_SECRET";
    let newer = format!("whsec_{}", "A".repeat(32));
    let s = load(&[url, (secret, &newer), (previous, SECRET)]).unwrap();
    let ops = &s.webhooks.endpoints["ops"];
    assert_eq!(
        ops.previous_secret.as_ref().map(|p| p.expose_secret()),
        Some(SECRET)
    );
    assert!(!format!("{s:?}").contains("MfKQ9r8"), "redacted: {s:?}");
    for (bad, says) in [
        ("whsec_c2hvcnQ=", "webhooks.endpoints.ops.previous_secret"),
        (
            "not-a-whsec-secret",
            "webhooks.endpoints.ops.previous_secret",
        ),
        (newer.as_str(), "is the same key as secret"),
    ] {
        let err = load(&[url, (secret, &newer), (previous, bad)]).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
        assert!(!err.contains(bad), "the secret is not echoed: {err}");
    }
    // Without the current one, the previous one is no use.
    let err = load(&[url, (previous, SECRET)]).unwrap_err();
    assert!(err.contains("webhooks.endpoints.ops.secret"), "{err}");
}
