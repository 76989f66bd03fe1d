//! Every request to `/mcp` writes exactly one access line, whatever became
//! of it: answered, refused by the bridge's own checks, or a notification.
//! (Operators count requests from these lines; a path that wrote none, or
//! two, would skew every dashboard built on them.)

use serde_json::json;

use crate::helpers::{PROTOCOL, read, request, spawn_app};

#[tokio::test]
async fn every_mcp_request_writes_exactly_one_access_line() {
    crate::logs::init();
    let app = spawn_app().await;
    let subject = format!("lines-{}", uuid::Uuid::new_v4().simple());
    let token = app.token(&subject);

    let mut statuses = Vec::new();
    for body in [
        request("tools/list", json!({})),
        // Gone from 2026-07-28: 404 with -32601, as the transport says.
        request("ping", json!({})),
        // Not connected: answered with a link to connect.
        request(
            "tools/call",
            json!({ "name": "connect", "arguments": { "provider": "demo" } }),
        ),
        // Refused by the bridge (400): a tool call without a name.
        request("tools/call", json!({ "arguments": {} })),
        // A notification: accepted, nothing to answer.
        json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": { "requestId": 7 } }),
    ] {
        let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
        statuses.push(read(response).await.0);
    }
    // Not JSON at all.
    let response = app
        .mcp_request(Some(&token), &json!({}))
        .body("{\"jsonrpc\":")
        .send()
        .await
        .unwrap();
    statuses.push(response.status().as_u16());
    assert_eq!(statuses, [200, 404, 200, 400, 202, 400], "statuses");

    let lines = access_lines_of(&subject).await;
    assert_eq!(
        lines.len(),
        statuses.len(),
        "one line per request: {lines:#?}"
    );
    for (line, status) in lines.iter().zip(&statuses) {
        assert!(line.contains(&format!("status={status}")), "{line}");
    }
    for method in [
        "tools/list",
        "ping",
        "tools/call",
        "notifications/cancelled",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(method)),
            "{method} named in {lines:#?}"
        );
    }
}

/// The line names the method the body says: a 2026-07-28 request's
/// `Mcp-Method` header is taken for it only where rmcp answered the request
/// (rmcp holds the header to the body); a header that disagrees with the
/// body is refused, and the line says what the body was.
#[tokio::test]
async fn the_line_names_the_bodys_method_not_a_header_that_disagrees() {
    crate::logs::init();
    let app = spawn_app().await;
    let subject = format!("claims-{}", uuid::Uuid::new_v4().simple());
    let token = app.token(&subject);

    let honest = app
        .mcp_request(Some(&token), &request("tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(honest.status(), 200);
    let body = request("tools/list", json!({}));
    let claimed = app
        .raw_post(&subject, PROTOCOL)
        .header("Mcp-Method", "tools/call")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(read(claimed).await.0, 400);
    // Two values for the header: rmcp refuses that too.
    let twice = app
        .mcp_request(Some(&token), &body)
        .header("Mcp-Method", "tools/list")
        .send()
        .await
        .unwrap();
    assert_eq!(read(twice).await.0, 400);

    let lines = access_lines_of(&subject).await;
    assert_eq!(lines.len(), 3, "{lines:#?}");
    for line in &lines {
        assert!(line.contains("tools/list"), "{line}");
        assert!(!line.contains("tools/call"), "{line}");
    }
}

/// A path is the visitor's to choose, of any length: a page's access line,
/// and the provider callback's line about an unknown `state` (which names
/// the provider from the path), hold only its start.
#[tokio::test]
async fn a_long_path_is_logged_as_a_short_prefix() {
    crate::logs::init();
    let app = spawn_app().await;
    // Unique, and within the logged prefix.
    let marker = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let long = "a".repeat(10 * 1024);
    let state = "A".repeat(43);
    for path in [
        format!("/p{marker}{long}"),
        format!("/oauth/callback/p{marker}{long}?state={state}"),
    ] {
        let response = app
            .http
            .get(format!("{}{path}", app.addr))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_client_error(), "{}", response.status());
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let logs = crate::logs::captured();
    let lines: Vec<&str> = logs.lines().filter(|l| l.contains(marker)).collect();
    assert!(
        lines.len() >= 3,
        "two access lines and the callback's: {lines:#?}"
    );
    let longest = "a".repeat(mcp_connect::web::access_log::PATH_CHARS);
    for line in lines {
        let start: String = line.chars().take(300).collect();
        assert!(!line.contains(&longest), "{start}…");
    }
}

/// A method is the sender's to choose too: actix takes any token up to the
/// size of a request head. A page's access line names the standard methods
/// and says `other` for the rest, as the `/mcp` line does.
#[tokio::test]
async fn a_made_up_method_is_logged_as_other() {
    crate::logs::init();
    let app = spawn_app().await;
    let marker = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let made_up = format!("M{}", "Q".repeat(20 * 1024));
    let method = reqwest::Method::from_bytes(made_up.as_bytes()).unwrap();
    for method in [method, reqwest::Method::PUT] {
        let response = app
            .http
            .request(method, format!("{}/p{marker}", app.addr))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_client_error(), "{}", response.status());
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let logs = crate::logs::captured();
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("request") && l.contains(marker))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let start = |line: &str| line.chars().take(300).collect::<String>();
    assert!(lines[0].contains("other"), "{}", start(lines[0]));
    assert!(!lines[0].contains("QQQQ"), "{}…", start(lines[0]));
    assert!(lines[1].contains("PUT"), "{}", lines[1]);
}

/// The access lines captured so far that name `subject`. They are written
/// as the responses go out: the last one is given a moment to be formatted.
async fn access_lines_of(subject: &str) -> Vec<String> {
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    crate::logs::captured()
        .lines()
        .filter(|l| l.contains("mcp request") && l.contains(subject))
        .map(str::to_owned)
        .collect()
}

/// Text a caller chose reaches the log only as a prefix: a token's long
/// subject and client id (the access line wrote them whole), an
/// `initialize` whose body names a long protocol version other than its
/// header's (rmcp warned with it whole), an Origin refused (the bridge
/// logged it whole, before any token was checked).
#[tokio::test]
async fn text_a_caller_chose_reaches_the_log_only_as_a_prefix() {
    crate::logs::init();
    let app = spawn_app().await;
    let marker = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let subject = format!("s{marker}{}", "s".repeat(600));
    let client = format!("c{marker}{}", "c".repeat(600));
    let (status, _) = app.mcp_as(&client, &subject, "tools/list", json!({})).await;
    assert_eq!(status, 200);

    let version = format!("v{marker}{}", "v".repeat(2000));
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "c", "version": "1"}}});
    let response = app
        .raw_post("someone", "2025-11-25")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);

    let origin = format!("https://o{marker}{}.example", "o".repeat(2000));
    let response = app
        .mcp_request(
            Some(&app.token("someone")),
            &request("tools/list", json!({})),
        )
        .header("Origin", &origin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);

    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let logs = crate::logs::captured();
    let access = logs
        .lines()
        .find(|l| l.contains("mcp request") && l.contains(&subject[..200]))
        .expect("the access line names a prefix of the subject");
    assert!(access.contains(&client[..100]), "{access}");
    for long in [
        &subject[..300],
        &client[..200],
        &version[..100],
        &origin[..100],
    ] {
        assert!(
            !logs.contains(long),
            "logged beyond a prefix: {}…",
            &long[..20]
        );
    }
}
