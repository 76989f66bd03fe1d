//! The MCP endpoint as a 2026-07-28 client meets it: discovery, listing,
//! calling, and every protocol error surviving our bridge intact.

use serde_json::{Value, json};

use crate::helpers::{PROTOCOL, read, request, spawn_app};

#[tokio::test]
async fn discover_names_versions_server_info_and_only_real_capabilities() {
    let app = spawn_app().await;
    let (status, body) = app.mcp("alice", "server/discover", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete", "{body}");
    let versions: Vec<&str> = result["supportedVersions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(versions.contains(&"2026-07-28"), "{versions:?}");
    assert!(versions.contains(&"2025-11-25"), "{versions:?}");
    let info = &result["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert_eq!(info["name"], "mcp-connect", "{body}");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"), "{body}");
    // Discovery is where a client learns what the server is for.
    assert!(info["title"].is_string(), "{body}");
    assert!(info["description"].is_string(), "{body}");
    let caps = result["capabilities"].as_object().unwrap();
    assert!(caps.contains_key("tools"), "{body}");
    assert!(
        !caps.contains_key("prompts"),
        "no prompts exist, so no prompts capability: {body}"
    );
}

#[tokio::test]
async fn tools_list_carries_cache_hints_and_server_info() {
    let app = spawn_app().await;
    let (status, body) = app.mcp("alice", "tools/list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].as_u64().is_some(), "{body}");
    assert!(result["cacheScope"].is_string(), "{body}");
    assert!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(),
        "{body}"
    );
    let names: Vec<&str> = result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"connections_list"), "{names:?}");
}

/// An argument the tool does not take is the model's to correct: a result
/// it is shown (isError, `refused`, with what the list would have said),
/// not a JSON-RPC error its client may keep from it.
#[tokio::test]
async fn connections_list_refuses_an_argument_it_does_not_take_in_its_result() {
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    crate::helpers::store_demo_connection(&app.state.connect, &issuer, "alice", "t-1", None).await;
    let (status, body) = app
        .call_tool("alice", "connections_list", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("error").is_none(), "{body}");
    let result = &body["result"];
    assert_eq!(result["isError"], true, "{body}");
    let content = &result["structuredContent"];
    assert_eq!(content["error"]["kind"], "refused", "{body}");
    assert!(
        content["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown field `provider`"),
        "{body}"
    );
    // Beside the refusal, the list as it is: nothing said that is not so.
    assert_eq!(
        content["connections"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    assert!(
        content["providers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["provider"] == "demo" && p["connected_accounts"] == 1),
        "{body}"
    );
    // The output schema says so: `error` is a property, not required.
    let (_, tools) = app.mcp("alice", "tools/list", json!({})).await;
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "connections_list")
        .unwrap()
        .clone();
    assert!(
        tool["outputSchema"]["properties"]["error"].is_object(),
        "{tool}"
    );
    assert!(
        !tool["outputSchema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("error")),
        "{tool}"
    );
}

#[tokio::test]
async fn connections_list_shows_only_the_callers_connections_and_no_tokens() {
    let app = spawn_app().await;
    let (status, body) = app.call_tool("alice", "connections_list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete");
    assert_eq!(
        body["result"]["structuredContent"]["connections"],
        json!([])
    );
    // Every result names the server, by name and version only: the rest
    // of its identity was said in discovery.
    assert_eq!(
        body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "mcp-connect", "version": env!("CARGO_PKG_VERSION")}),
        "{body}"
    );

    let id = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO connections (id, issuer, subject, provider, account_id, account_label, access_token, key_id)
         VALUES ($1, $2, 'bob', 'demo', '42', 'bob@demo', '\\xdeadbeef', 'dev1')",
    )
    .bind(id)
    .bind(app.dev.issuer())
    .execute(&app.db)
    .await
    .unwrap();
    // Made through this client, which is approved for it by that consent.
    mcp_connect::db::client_grants::insert(&app.db, id, crate::helpers::CLIENT_ID)
        .await
        .unwrap();

    let (_, bob) = app.call_tool("bob", "connections_list", json!({})).await;
    let list = bob["result"]["structuredContent"]["connections"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(list.len(), 1, "{bob}");
    assert_eq!(list[0]["account"], "bob@demo");
    assert!(!bob.to_string().contains("deadbeef"), "{bob}");
    let (_, alice) = app.call_tool("alice", "connections_list", json!({})).await;
    assert_eq!(
        alice["result"]["structuredContent"]["connections"],
        json!([]),
        "{alice}"
    );
}

#[tokio::test]
async fn header_that_contradicts_the_body_is_a_header_mismatch() {
    let app = spawn_app().await;
    let body = request("tools/list", json!({}));
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .header("Mcp-Method", "prompts/list")
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
}

/// A header that disagrees with the body is a header mismatch (-32020,
/// the transport's MUST), also when the body's params are themselves
/// wrong: the params are not read against a header that routed the
/// request elsewhere.
#[tokio::test]
async fn a_header_mismatch_wins_over_wrong_params() {
    let app = spawn_app().await;
    let send = |method: &'static str, name: Option<&'static str>, params: Value| {
        let app = &app;
        async move {
            let body = request(method, params);
            let mut rb = app.raw_post("alice", PROTOCOL).header("Mcp-Method", method);
            if let Some(name) = name {
                rb = rb.header("Mcp-Name", name);
            }
            read(rb.json(&body).send().await.unwrap()).await
        }
    };
    // The name in the header is another tool's.
    let (status, body) = send(
        "tools/call",
        Some("whoami"),
        json!({"name": "api_request", "arguments": {}, "requestState": 5}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
    // A resource read without the name header at all.
    let (status, body) = send(
        "resources/read",
        None,
        json!({"uri": "connection://demo/profile", "requestState": 5}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
    // With the header right, the params are what is wrong.
    let (status, body) = send(
        "resources/read",
        Some("connection://demo/profile"),
        json!({"uri": "connection://demo/profile", "requestState": 5}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

/// A header the transport requires that is missing, or that the body
/// contradicts, is what the answer names (-32020), before any params the
/// body gets wrong: a client mends its headers on -32020.
#[tokio::test]
async fn a_missing_method_header_or_another_version_in_meta_wins_over_wrong_params() {
    let app = spawn_app().await;
    // The answer's status and JSON-RPC code for `body` sent with these
    // `Mcp-Method` headers.
    let code_for = |methods: &'static [&'static str], body: Value| {
        let app = &app;
        async move {
            let mut post = app.raw_post("alice", PROTOCOL);
            for method in methods {
                post = post.header("Mcp-Method", *method);
            }
            let (status, answer) = read(post.json(&body).send().await.unwrap()).await;
            (status, answer["error"]["code"].clone())
        }
    };
    // A tool name that is not a string, with no `Mcp-Method` at all, and
    // with the header twice.
    let call = request("tools/call", json!({"name": 5, "arguments": {}}));
    assert_eq!(code_for(&[], call.clone()).await, (400, json!(-32020)));
    let twice = &["tools/call", "tools/call"];
    assert_eq!(code_for(twice, call).await, (400, json!(-32020)));
    // A list whose `_meta` names another version than the header, and a
    // cursor that is not a string.
    let mut list = request("tools/list", json!({"cursor": 5}));
    let version = "io.modelcontextprotocol/protocolVersion";
    list["params"]["_meta"][version] = json!("2025-11-25");
    assert_eq!(
        code_for(&["tools/list"], list.clone()).await,
        (400, json!(-32020))
    );
    // Headers and `_meta` agreeing, the params are what is wrong.
    list["params"]["_meta"][version] = json!(PROTOCOL);
    assert_eq!(code_for(&["tools/list"], list).await, (400, json!(-32602)));
}

#[tokio::test]
async fn unsupported_version_lists_the_supported_ones() {
    let app = spawn_app().await;
    let mut body = request("tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let response = app
        .http
        .post(app.mcp_url())
        .bearer_auth(app.token("alice"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2099-01-01")
        .header("Mcp-Method", "tools/list")
        .json(&body)
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32022, "{body}");
    assert!(
        body["error"]["data"].to_string().contains(PROTOCOL),
        "{body}"
    );
}

/// A request that names no version, or one this server does not serve,
/// is refused in JSON-RPC terms a client can act on (streamable-http.mdx:
/// a server that does not serve clients older than 2025-06-18 MUST refuse
/// a request without the header; an unsupported version is -32022 listing
/// the supported ones). rmcp alone served both as 2025-03-26 or 2025-06-18.
#[tokio::test]
async fn a_request_without_a_served_protocol_version_is_refused() {
    let app = spawn_app().await;
    let call = json!({"jsonrpc": "2.0", "id": "c1", "method": "tools/call",
        "params": {"name": "connections_list", "arguments": {}}});
    let without = post_without_version(&app, &call).await;
    let (status, body) = read(without).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
    assert_eq!(body["id"], "c1", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MCP-Protocol-Version"),
        "{body}"
    );

    for version in ["2025-06-18", "2025-03-26", "2099-01-01"] {
        let response = app
            .raw_post("alice", version)
            .json(&call)
            .send()
            .await
            .unwrap();
        let (status, body) = read(response).await;
        assert_eq!(status, 400, "{version}: {body}");
        assert_eq!(body["error"]["code"], -32022, "{version}: {body}");
        assert_eq!(body["error"]["data"]["requested"], version, "{body}");
        assert_eq!(
            body["error"]["data"]["supported"],
            json!(["2026-07-28", "2025-11-25"]),
            "{body}"
        );
    }

    // A notification needs no answer and is not refused; a legacy client's
    // first `initialize` may come without the header (see
    // `legacy_initialize_client_is_served`).
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = post_without_version(&app, &notification).await;
    assert_eq!(response.status(), 202);
}

/// The same refusals for a request whose id is no `RequestId` (an object,
/// a boolean, a fraction): JSON-RPC's invalid request, without an id,
/// rather than the id repeated back.
#[tokio::test]
async fn a_refused_version_with_an_id_that_is_no_request_id_is_an_invalid_request() {
    let app = spawn_app().await;
    for id in [json!({"x": 1}), json!(true), json!(1.5)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        let without = post_without_version(&app, &call).await;
        let unsupported = app
            .raw_post("alice", "2099-01-01")
            .json(&call)
            .send()
            .await
            .unwrap();
        for response in [without, unsupported] {
            let (status, body) = read(response).await;
            assert_eq!(status, 400, "{id}: {body}");
            assert_eq!(body["error"]["code"], -32600, "{id}: {body}");
            assert!(body.get("id").is_none(), "{id}: {body}");
        }
    }
}

#[tokio::test]
async fn missing_meta_is_invalid_params() {
    let app = spawn_app().await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": PROTOCOL}
    }});
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

#[tokio::test]
async fn unknown_method_is_404_method_not_found() {
    let app = spawn_app().await;
    let (status, body) = app.mcp("alice", "nothing/here", json!({})).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], -32601, "{body}");
}

#[tokio::test]
async fn malformed_json_is_a_parse_error() {
    let app = spawn_app().await;
    let response = app
        .raw_post("alice", PROTOCOL)
        .body("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ")
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
    // The same with the routing headers of a 2026-07-28 request, which
    // rmcp reads before the bridge looks at the body.
    let response = app
        .raw_post("alice", PROTOCOL)
        .header("Mcp-Method", "tools/list")
        .body("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ")
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
}

#[tokio::test]
async fn bad_utf8_is_a_clear_error() {
    let app = spawn_app().await;
    let response = app
        .raw_post("alice", PROTOCOL)
        .body(vec![b'{', 0xff, 0xfe, b'}'])
        .send()
        .await
        .unwrap();
    let (status, _) = read(response).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn foreign_origin_is_403() {
    let app = spawn_app().await;
    let body = request("tools/list", json!({}));
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .header("Origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    // Its own origin is fine.
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .header("Origin", app.base.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

/// A request for another host (DNS rebinding) is refused as such, 403,
/// whatever else is wrong with it: mistyped params, no protocol version,
/// no token. Its own host is served.
#[tokio::test]
async fn a_foreign_host_is_403_whatever_else_is_wrong() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let mistyped = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": 5}});
    let cases = [
        app.mcp_request(Some(&token), &mistyped),
        app.mcp_request(Some(&token), &mistyped)
            .header("MCP-Protocol-Version", "1999-01-01"),
        app.mcp_request(None, &request("tools/list", json!({}))),
        app.mcp_request(Some(&token), &request("tools/list", json!({}))),
    ];
    for case in cases {
        let response = case.header("Host", "evil.example").send().await.unwrap();
        assert_eq!(response.status(), 403);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{body}");
    }
    let own = app
        .mcp_request(Some(&token), &request("tools/list", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
}

#[tokio::test]
async fn oversize_body_is_413() {
    let app = spawn_app().await;
    let mut body = request("tools/list", json!({}));
    body["params"]["padding"] = json!("x".repeat(2 * 1024 * 1024));
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
}

#[tokio::test]
async fn get_and_delete_are_405() {
    let app = spawn_app().await;
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = app
            .http
            .request(method.clone(), app.mcp_url())
            .bearer_auth(app.token("alice"))
            .header("Accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method}");
    }
}

#[tokio::test]
async fn legacy_initialize_client_is_served() {
    let app = spawn_app().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"url": {}}},
        "clientInfo": {"name": "legacy", "version": "1"}
    }});
    let response = post_without_version(&app, &body).await;
    let (status, body) = read(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25", "{body}");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "connections_list", "arguments": {}}});
    let response = app
        .http
        .post(app.mcp_url())
        .bearer_auth(app.token("alice"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&call)
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["connections"],
        json!([]),
        "{body}"
    );
}

/// `ping` is in 2025-11-25 (either side may send it, and must be answered
/// promptly with an empty result); 2026-07-28 removed it.
#[tokio::test]
async fn a_legacy_client_ping_is_answered_with_an_empty_result() {
    let app = spawn_app().await;
    let ping = json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"});
    let response = app
        .raw_post("alice", "2025-11-25")
        .json(&ping)
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], "p1", "{body}");
    assert_eq!(body["result"], json!({}), "{body}");
}

/// `body` POSTed as alice with no `MCP-Protocol-Version` header, as a
/// legacy client's first `initialize` (or a client that forgot it) sends it.
async fn post_without_version(
    app: &crate::helpers::TestApp,
    body: &serde_json::Value,
) -> reqwest::Response {
    app.http
        .post(app.mcp_url())
        .bearer_auth(app.token("alice"))
        .header("Accept", "application/json, text/event-stream")
        .json(body)
        .send()
        .await
        .unwrap()
}
