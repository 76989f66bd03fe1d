//! Outbound provider calls in `/metrics`: counted by configured provider,
//! call and outcome (a 2xx answer, another status, no answer at all), with
//! their latency — and nothing else as a label.

use serde_json::json;

use super::{Exposition, TOKEN, scrape};
use provider_fakes as fakes;

use crate::{
    full_flow::connect_demo,
    helpers::{TestApp, spawn_app_with},
    provider_flows,
};
use mcp_connect::metrics::{CALL_LABELS, OUTCOME_LABELS};

const CALLS: &str = "mcp_connect_provider_calls_total";
const DURATION: &str = "mcp_connect_provider_call_duration_seconds";

fn calls(m: &Exposition, provider: &str, call: &str, outcome: &str) -> f64 {
    m.value(
        CALLS,
        &[("provider", provider), ("call", call), ("outcome", outcome)],
    )
}

/// Observations of `call` to `provider`, from the histogram.
fn timed(m: &Exposition, provider: &str, call: &str) -> f64 {
    let labels = [("provider", provider), ("call", call)];
    let count = m.value(&format!("{DURATION}_count"), &labels);
    let inf = m.value(
        &format!("{DURATION}_bucket"),
        &[labels[0], labels[1], ("le", "+Inf")],
    );
    assert_eq!(count, inf, "{provider} {call}");
    count
}

/// Every sample of the two families names a configured provider, a call
/// kind and an outcome (or a bucket bound), and nothing more.
fn only_fixed_labels(m: &Exposition, providers: &[&str]) {
    let mut seen = 0;
    for sample in
        m.0.iter()
            .filter(|s| s.name.starts_with("mcp_connect_provider_"))
    {
        seen += 1;
        let keys: Vec<&str> = sample.labels.iter().map(|(k, _)| k.as_str()).collect();
        let expected: &[&str] = if sample.name == CALLS {
            &["provider", "call", "outcome"]
        } else if sample.name.ends_with("_bucket") {
            &["provider", "call", "le"]
        } else {
            &["provider", "call"]
        };
        assert_eq!(keys, expected, "{}", sample.name);
        for (key, value) in &sample.labels {
            let allowed = match key.as_str() {
                "provider" => providers.contains(&value.as_str()),
                "call" => CALL_LABELS.contains(&value.as_str()),
                "outcome" => OUTCOME_LABELS.contains(&value.as_str()),
                _ => value == "+Inf" || value.parse::<f64>().is_ok(),
            };
            assert!(allowed, "{key}={value:?} on {}", sample.name);
        }
    }
    // Every call and outcome of every provider is listed.
    assert!(seen >= providers.len() * CALL_LABELS.len() * OUTCOME_LABELS.len());
}

async fn api_request(app: &TestApp, provider: &str, path: &str) -> serde_json::Value {
    let args = json!({"provider": provider, "method": "GET", "path": path});
    let (status, body) = app.call_tool("alice", "api_request", args).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn a_connect_flow_and_an_api_call_count_their_provider_calls() {
    let app = spawn_app_with(|t| {
        t.insert("metrics_token".into(), TOKEN.into());
    })
    .await;
    let (_, before) = scrape(&app).await;
    assert_eq!(calls(&before, "demo", "token", "ok"), 0.0);
    assert_eq!(timed(&before, "demo", "token"), 0.0);

    connect_demo(&app, "alice", "octo").await;
    let body = api_request(&app, "demo", "me").await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 200,
        "{body}"
    );

    let (text, m) = scrape(&app).await;
    assert_eq!(calls(&m, "demo", "token", "ok"), 1.0, "{text}");
    assert_eq!(calls(&m, "demo", "api", "ok"), 1.0, "{text}");
    let identity = calls(&m, "demo", "identity", "ok");
    assert!(identity >= 1.0, "{text}");
    for call in ["token", "identity", "api"] {
        for outcome in ["http_error", "transport"] {
            assert_eq!(calls(&m, "demo", call, outcome), 0.0, "{call} {outcome}");
        }
    }
    assert_eq!(timed(&m, "demo", "token"), 1.0);
    assert_eq!(timed(&m, "demo", "identity"), identity);
    assert_eq!(timed(&m, "demo", "api"), 1.0);
    assert!(
        m.value(
            &format!("{DURATION}_sum"),
            &[("provider", "demo"), ("call", "api")]
        ) > 0.0
    );
    assert_eq!(calls(&m, "demo", "refresh", "ok"), 0.0);
    only_fixed_labels(&m, &["demo"]);
}

#[tokio::test]
async fn a_provider_answering_500_counts_http_errors() {
    let github = fakes::github::start().await;
    let app = spawn_app_with(|t| {
        t.insert("metrics_token".into(), TOKEN.into());
        github.configure(t, "github");
    })
    .await;
    provider_flows::connect(&app, &github, "github").await;
    github.fail_with(Some(500));

    let body = api_request(&app, "github", "user/repos").await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 500,
        "{body}"
    );
    let (_, whoami) = app
        .call_tool("alice", "whoami", json!({"provider": "github"}))
        .await;
    assert!(whoami.get("result").is_some(), "{whoami}");

    let (text, m) = scrape(&app).await;
    assert_eq!(calls(&m, "github", "api", "http_error"), 1.0, "{text}");
    assert_eq!(calls(&m, "github", "api", "ok"), 0.0, "{text}");
    assert_eq!(calls(&m, "github", "identity", "http_error"), 1.0, "{text}");
    assert_eq!(calls(&m, "github", "token", "ok"), 1.0, "{text}");
    assert_eq!(timed(&m, "github", "api"), 1.0);
    assert_eq!(calls(&m, "demo", "api", "http_error"), 0.0);
    only_fixed_labels(&m, &["demo", "github"]);
}

#[tokio::test]
async fn a_provider_that_cannot_be_reached_counts_transport_failures() {
    // Nothing listens on port 9 of loopback.
    let nowhere = "http://127.0.0.1:9/".to_owned();
    let app = spawn_app_with(|t| {
        t.insert("metrics_token".into(), TOKEN.into());
        let demo = t["providers"]["demo"].as_table_mut().unwrap();
        demo.insert("api_base_url".into(), nowhere.clone().into());
    })
    .await;
    connect_demo(&app, "alice", "octo").await;

    let body = api_request(&app, "demo", "me").await;
    assert_eq!(body["result"]["isError"], true, "{body}");

    let (text, m) = scrape(&app).await;
    assert_eq!(calls(&m, "demo", "api", "transport"), 1.0, "{text}");
    assert_eq!(calls(&m, "demo", "api", "ok"), 0.0, "{text}");
    assert_eq!(calls(&m, "demo", "api", "http_error"), 0.0, "{text}");
    assert_eq!(timed(&m, "demo", "api"), 1.0);
    assert_eq!(calls(&m, "demo", "token", "ok"), 1.0, "{text}");
    assert!(!text.contains(&nowhere), "a URL became a label");
    only_fixed_labels(&m, &["demo"]);
}
