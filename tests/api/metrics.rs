//! `/metrics`: who may read it, that it is the Prometheus text format, that
//! MCP requests and the connect flow move its counters — and that nothing a
//! client chose or is (a made-up method, a subject, a client id, a ticket)
//! ends up in it. Outbound provider calls: `providers`.

mod providers;

use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::helpers::{CLIENT_ID, TestApp, read, request, server_url, spawn_app, spawn_app_with};

const TOKEN: &str = "metrics-0123456789abcdef";

async fn spawn_with_token() -> TestApp {
    spawn_app_with(|t| {
        t.insert("metrics_token".into(), TOKEN.into());
    })
    .await
}

async fn get(app: &TestApp, authorization: Option<&str>) -> reqwest::Response {
    let mut rb = app.http.get(format!("{}/metrics", app.addr));
    if let Some(value) = authorization {
        rb = rb.header("Authorization", value);
    }
    rb.send().await.unwrap()
}

/// The exposition, checked line by line and parsed.
async fn scrape(app: &TestApp) -> (String, Exposition) {
    let response = get(app, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let parsed = parse(&text);
    (text, parsed)
}

#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

struct Exposition(Vec<Sample>);

impl Exposition {
    /// The sample `name` with exactly `labels`; 0 when absent (a label
    /// combination is listed once it has been counted).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<&Sample> = self
            .0
            .iter()
            .filter(|s| {
                s.name == name
                    && s.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
            })
            .collect();
        assert!(found.len() <= 1, "{name} {labels:?} listed twice");
        found.first().map_or(0.0, |s| s.value)
    }

    fn has(&self, name: &str) -> bool {
        self.0.iter().any(|s| s.name == name)
    }
}

/// Parses the text format strictly: `# HELP`/`# TYPE` comments, and sample
/// lines `name{label="value",…} value`. Panics on anything else.
fn parse(text: &str) -> Exposition {
    let is_name = |s: &str| {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap(), parts.next().unwrap());
            assert!(matches!(kind, "HELP" | "TYPE"), "{line}");
            assert!(is_name(name), "{line}");
            if kind == "TYPE" {
                let t = parts.next().unwrap();
                assert!(matches!(t, "counter" | "gauge" | "histogram"), "{line}");
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                (name, parse_labels(body, line))
            }
        };
        assert!(is_name(name), "{line}");
        for (key, _) in &labels {
            assert!(is_name(key), "{line}");
        }
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    assert!(!samples.is_empty(), "{text}");
    Exposition(samples)
}

fn parse_labels(mut body: &str, line: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    while !body.is_empty() {
        let (key, rest) = body.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => panic!("bad escape in {line}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line}"),
            }
        };
        labels.push((key.to_owned(), value));
        body = &rest[end + 1..];
        body = body.strip_prefix(',').unwrap_or(body);
    }
    labels
}

#[tokio::test]
async fn metrics_do_not_exist_without_a_configured_token() {
    let app = spawn_app().await;
    assert_eq!(get(&app, None).await.status(), 404);
    assert_eq!(
        get(&app, Some(&format!("Bearer {TOKEN}"))).await.status(),
        404
    );
}

#[tokio::test]
async fn metrics_ask_for_the_configured_bearer_token() {
    let app = spawn_with_token().await;
    for refused in [
        None,
        Some("Bearer wrong-token-0123456789".to_owned()),
        Some(format!("Bearer {TOKEN}0")),
        Some(format!("Basic {TOKEN}")),
        Some(TOKEN.to_owned()),
    ] {
        let response = get(&app, refused.as_deref()).await;
        assert_eq!(response.status(), 401, "{refused:?}");
        assert_eq!(
            response.headers()["www-authenticate"],
            r#"Bearer realm="metrics""#
        );
        assert!(response.text().await.unwrap().is_empty());
    }

    let response = get(&app, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(response.headers()["cache-control"], "no-store");
    let metrics = parse(&response.text().await.unwrap());
    assert_eq!(
        metrics.value(
            "mcp_connect_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert!(metrics.value("mcp_connect_start_time_seconds", &[]) > 1.7e9);
    assert!(metrics.value("mcp_connect_db_pool_max_connections", &[]) >= 1.0);
    for gauge in [
        "mcp_connect_db_pool_connections",
        "mcp_connect_db_pool_idle_connections",
        "mcp_connect_db_hot_connections",
        "mcp_connect_db_hot_overflow_total",
    ] {
        assert!(metrics.has(gauge), "{gauge}");
    }
}

#[tokio::test]
async fn an_mcp_tool_call_moves_the_counters_of_its_method_tool_and_outcome() {
    let app = spawn_with_token().await;
    let (_, before) = scrape(&app).await;

    // Not connected yet: input_required, and a connect link is issued.
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let (status, body) = app.call_tool("alice", "connections_list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = app.call_tool("alice", "no_such_tool", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["error"]["code"].is_i64(), "{body}");

    let (_, after) = scrape(&app).await;
    let moved = |name: &str, labels: &[(&str, &str)]| {
        after.value(name, labels) - before.value(name, labels)
    };
    let calls = [("method", "tools/call"), ("status", "2xx")];
    assert_eq!(moved("mcp_connect_mcp_requests_total", &calls), 3.0);
    let method = [("method", "tools/call")];
    assert_eq!(
        moved("mcp_connect_mcp_request_duration_seconds_count", &method),
        3.0
    );
    assert_eq!(
        moved(
            "mcp_connect_mcp_request_duration_seconds_bucket",
            &[("method", "tools/call"), ("le", "+Inf")]
        ),
        3.0
    );
    assert!(moved("mcp_connect_mcp_request_duration_seconds_sum", &method) > 0.0);
    let tool = |tool, ended| {
        moved(
            "mcp_connect_tool_calls_total",
            &[("tool", tool), ("ended", ended)],
        )
    };
    assert_eq!(tool("whoami", "input_required"), 1.0);
    assert_eq!(tool("connections_list", "complete"), 1.0);
    assert_eq!(tool("other", "protocol_error"), 1.0);
    assert_eq!(moved("mcp_connect_tickets_issued_total", &[]), 1.0);
    assert!(after.value("mcp_connect_db_hot_connections", &[]) >= 1.0);
}

#[tokio::test]
async fn nothing_a_client_chose_or_is_appears_in_the_metrics() {
    let app = spawn_with_token().await;
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let subject = format!("subject-{marker}");
    let method = format!("x-attacker/{marker}");
    let tool = format!("tool-{marker}");

    let token = app.token(&subject);
    let (_, body) = read(
        app.mcp_request(Some(&token), &request(&method, json!({})))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(body["error"]["code"], -32601, "method not found: {body}");
    let (_, body) = app.call_tool(&subject, &tool, json!({})).await;
    assert!(body["error"].is_object(), "{body}");
    let (_, body) = app
        .call_tool(&subject, "whoami", json!({"provider": "demo"}))
        .await;
    let url = body["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let ticket = url.split_once("?ticket=").unwrap().1.to_owned();
    // Refused before its body is read: no method at all.
    let refused = app
        .mcp_request(None, &request("tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let (text, metrics) = scrape(&app).await;
    for secret in [
        marker.as_str(),
        subject.as_str(),
        CLIENT_ID,
        token.as_str(),
        ticket.as_str(),
        url.as_str(),
        app.base.as_str(),
    ] {
        assert!(!text.contains(secret), "{secret:?} in\n{text}");
    }
    let other: f64 = mcp_connect::metrics::labels::STATUS_LABELS
        .iter()
        .map(|status| {
            metrics.value(
                "mcp_connect_mcp_requests_total",
                &[("method", "other"), ("status", status)],
            )
        })
        .sum();
    assert_eq!(other, 1.0, "the made-up method counts as `other`");
    assert_eq!(
        metrics.value(
            "mcp_connect_mcp_requests_total",
            &[("method", "none"), ("status", "4xx")]
        ),
        1.0
    );
    assert_eq!(
        metrics.value(
            "mcp_connect_tool_calls_total",
            &[("tool", "other"), ("ended", "protocol_error")]
        ),
        1.0
    );
    // Every label value is one of the fixed ones.
    for sample in &metrics.0 {
        for (key, value) in &sample.labels {
            let allowed = match key.as_str() {
                "method" => mcp_connect::metrics::labels::METHOD_LABELS.contains(&value.as_str()),
                "status" => mcp_connect::metrics::labels::STATUS_LABELS.contains(&value.as_str()),
                "tool" => mcp_connect::metrics::labels::TOOL_LABELS.contains(&value.as_str()),
                "ended" => mcp_connect::metrics::labels::ENDED_LABELS.contains(&value.as_str()),
                "result" => ["ok", "needs_reauth", "error"].contains(&value.as_str()),
                // The configured provider's name, never one the client sent.
                "provider" => value == "demo",
                "call" => mcp_connect::metrics::CALL_LABELS.contains(&value.as_str()),
                "outcome" if sample.name.starts_with("mcp_connect_webhook_") => {
                    mcp_connect::metrics::DELIVERY_LABELS.contains(&value.as_str())
                }
                "outcome" if sample.name.starts_with("mcp_connect_revocation_") => {
                    mcp_connect::metrics::REVOCATION_LABELS.contains(&value.as_str())
                }
                "outcome" => mcp_connect::metrics::OUTCOME_LABELS.contains(&value.as_str()),
                "le" => value == "+Inf" || value.parse::<f64>().is_ok(),
                "version" => value == env!("CARGO_PKG_VERSION"),
                // A route pattern of the application's, never a raw path.
                "route" => value == "other" || (value.starts_with('/') && !value.contains('?')),
                _ => false,
            };
            assert!(allowed, "{key}={value:?} on {}", sample.name);
        }
    }
}

#[tokio::test]
async fn the_connect_flow_counts_links_connections_refreshes_and_refused_tokens() {
    let app = spawn_with_token().await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
    // The provider then refuses the (refreshed) token on an API call.
    let token = app.demo_token("alice").await;
    assert!(
        mcp_connect::connect::vault::token_rejected(&app.state.connect, &token)
            .await
            .unwrap()
    );

    let (_, metrics) = scrape(&app).await;
    assert_eq!(metrics.value("mcp_connect_tokens_refused_total", &[]), 1.0);
    assert_eq!(metrics.value("mcp_connect_tickets_issued_total", &[]), 1.0);
    assert_eq!(
        metrics.value("mcp_connect_connections_stored_total", &[]),
        1.0
    );
    let refreshes =
        |result| metrics.value("mcp_connect_token_refreshes_total", &[("result", result)]);
    assert_eq!(refreshes("ok"), 1.0);
    assert_eq!(refreshes("needs_reauth"), 0.0);
    assert_eq!(refreshes("error"), 0.0);
    assert_eq!(
        metrics.value(
            "mcp_connect_tool_calls_total",
            &[("tool", "whoami"), ("ended", "complete")]
        ),
        1.0
    );
}

/// `mcp-connect dev` serves `/metrics` without a token (on loopback).
#[tokio::test]
async fn dev_mode_serves_metrics_without_a_token() {
    // Only for its database, dropped at the end.
    let app = spawn_app().await;
    let mut dev = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-connect"))
        .args(["dev", "--port", "0", "--json", "--database-url"])
        .arg(format!("{}/{}", server_url(), app.db_name))
        .env_remove("MCP_CONNECT_METRICS_TOKEN")
        .env_remove("MCP_CONNECT_METRICS_TOKEN_FILE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = dev.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("dev mode announces itself")
        .unwrap()
        .expect("a line on stdout");
    let announced: serde_json::Value = serde_json::from_str(&line).unwrap();
    let web_url = announced["web_url"].as_str().unwrap();

    let response = app
        .http
        .get(format!("{web_url}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    parse(&response.text().await.unwrap());
    dev.kill().await.unwrap();
}

#[tokio::test]
async fn process_metrics_describe_this_process() {
    let app = spawn_with_token().await;
    let (text, m) = scrape(&app).await;
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
    ] {
        assert!(m.has(name), "{name} missing:\n{text}");
    }
    assert!(
        text.contains("# TYPE process_cpu_seconds_total counter"),
        "{text}"
    );
    // The test process: tens of megabytes, a pool's sockets and more open.
    assert!(m.value("process_resident_memory_bytes", &[]) > 1_000_000.0);
    assert!(m.value("process_open_fds", &[]) >= 3.0);
    assert!(m.value("process_max_fds", &[]) >= m.value("process_open_fds", &[]));
}

#[tokio::test]
async fn page_requests_are_counted_by_route_and_status_class_and_logged_without_query() {
    crate::logs::init();
    let app = spawn_with_token().await;
    let marker = uuid::Uuid::new_v4().simple().to_string();
    let secret = format!("secret{marker}");
    for path in [
        "/healthz".to_owned(),
        format!("/no-such-page-{marker}?ticket={secret}"),
    ] {
        app.http
            .get(format!("{}{path}", app.addr))
            .send()
            .await
            .unwrap();
    }
    let (text, m) = scrape(&app).await;
    assert!(
        m.value(
            "mcp_connect_page_requests_total",
            &[("route", "/healthz"), ("status", "2xx")]
        ) >= 1.0,
        "{text}"
    );
    assert!(
        m.value(
            "mcp_connect_page_requests_total",
            &[("route", "other"), ("status", "4xx")]
        ) >= 1.0,
        "{text}"
    );
    assert!(!text.contains(&marker), "a path became a label:\n{text}");
    // The line: structured fields, the path without its query, no file path
    // of the build.
    let logs = crate::logs::captured();
    let line = logs
        .lines()
        .find(|l| l.contains(&format!("/no-such-page-{marker}")))
        .unwrap_or_else(|| panic!("no access line:\n{logs}"));
    assert!(line.contains("status=404"), "{line}");
    assert!(
        line.contains("http=\"GET\"") || line.contains("http=GET"),
        "{line}"
    );
    assert!(
        !line.contains("log.file") && !line.contains(".cargo"),
        "{line}"
    );
    assert!(!logs.contains(&secret), "the query reached the log");
}

/// A page past `web.page_timeout_secs` (its session lookup held by a
/// table lock here) is counted under its route, not `other`: an alert on a
/// route's 5xx sees the pages that time out.
#[tokio::test]
async fn a_page_past_its_time_limit_is_counted_under_its_route() {
    let app = spawn_app_with(|t| {
        t.insert("metrics_token".into(), TOKEN.into());
        let mut web = toml::Table::new();
        web.insert("page_timeout_secs".into(), 2.into());
        t.insert("web".into(), web.into());
    })
    .await;
    let alice = crate::browser::Browser::new(&app);
    alice.sign_in("alice").await;
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("LOCK TABLE web_sessions IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let page = alice.get("/connections").await;
    assert_eq!(page.status, 503, "{}", page.body);
    holder.rollback().await.unwrap();
    let (text, m) = scrape(&app).await;
    assert_eq!(
        m.value(
            "mcp_connect_page_requests_total",
            &[("route", "/connections"), ("status", "5xx")]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        m.value(
            "mcp_connect_page_requests_total",
            &[("route", "other"), ("status", "5xx")]
        ),
        0.0,
        "{text}"
    );
}
