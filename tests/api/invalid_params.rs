//! Well-formed JSON-RPC requests with wrongly typed parameters are invalid
//! params (-32602), not an unknown method.

use serde_json::json;

use crate::helpers::{request, spawn_app};

#[tokio::test]
async fn wrongly_typed_tools_call_params_are_invalid_params() {
    let app = spawn_app().await;
    let token = app.token("alice");
    for params in [
        json!({"name": "whoami", "arguments": {"provider": "demo"}, "requestState": 5}),
        json!({"name": "whoami", "arguments": {"provider": "demo"}, "requestState": {"x": 1}}),
        json!({"name": 5, "arguments": {}}),
        json!({"name": "whoami", "arguments": "demo"}),
        json!({"name": "whoami", "arguments": {}, "inputResponses": "yes"}),
        json!({"arguments": {}}),
    ] {
        let body = request("tools/call", params.clone());
        // With the routing headers (rmcp reads the body first, and the
        // bridge looks again at what it refused) and from a 2025-11-25
        // client, which sends none (the bridge looks before rmcp): the
        // same answer. (A 2026-07-28 request without them is refused for
        // its headers first: `mcp_protocol`.)
        let routed = app.mcp_request(Some(&token), &body);
        let mut legacy_body = body.clone();
        legacy_body["params"]
            .as_object_mut()
            .expect("params")
            .remove("_meta");
        let legacy = app.raw_post("alice", "2025-11-25").json(&legacy_body);
        for (how, builder) in [("routed", routed), ("legacy", legacy)] {
            let response = builder.send().await.unwrap();
            let status = response.status().as_u16();
            let answer: serde_json::Value = response.json().await.unwrap_or_default();
            assert_eq!(
                answer["error"]["code"], -32602,
                "{how} {params}: {status} {answer}"
            );
            assert_eq!(answer["id"], 1, "{how} {params}: {answer}");
            // As for any other malformed request (a missing `_meta`…).
            assert_eq!(status, 400, "{how} {params}: {answer}");
        }
    }
    // The method itself unknown stays -32601.
    let body = request("tools/nope", json!({}));
    let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
    let answer: serde_json::Value = response.json().await.unwrap_or_default();
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
}

/// Any method this server serves answers mistyped params as invalid
/// params: a 404 (-32601) would tell the client the server has no such
/// method (no resources at all, say). So do the list methods a cursor
/// (every list is one page: the server never issued one), which they
/// answered with the first page.
#[tokio::test]
async fn wrongly_typed_params_of_other_served_methods_are_invalid_params() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let uri = "connection://demo/profile";
    for (method, params, named) in [
        (
            "resources/read",
            json!({"uri": uri, "requestState": 5}),
            "params.requestState",
        ),
        (
            "resources/read",
            json!({"uri": uri, "inputResponses": []}),
            "params.inputResponses",
        ),
        ("tools/list", json!({"cursor": 5}), "params.cursor"),
        // Every list is one page: a cursor is never one this server issued.
        ("tools/list", json!({"cursor": "page-2"}), "params.cursor"),
        (
            "resources/list",
            json!({"cursor": "page-2"}),
            "params.cursor",
        ),
    ] {
        let body = request(method, params.clone());
        let routed = app.mcp_request(Some(&token), &body);
        let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let legacy = app.raw_post("alice", "2025-11-25").json(&legacy);
        for (how, builder) in [("routed", routed), ("legacy", legacy)] {
            let response = builder.send().await.unwrap();
            let status = response.status().as_u16();
            let answer: serde_json::Value = response.json().await.unwrap_or_default();
            assert_eq!(
                answer["error"]["code"], -32602,
                "{how} {method} {params}: {status} {answer}"
            );
            assert_eq!(status, 400, "{how} {method} {params}: {answer}");
            assert_eq!(answer["id"], 1, "{how} {method} {params}: {answer}");
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(named), "{how} {method}: {answer}");
        }
    }
    // A method the server does not serve stays 404 -32601, its params
    // whatever they are; so does `initialize`, which 2026-07-28 removed.
    for (method, params) in [
        ("tools/nope", json!({})),
        ("prompts/get", json!({"name": 5})),
        ("initialize", json!({"protocolVersion": "2026-07-28"})),
    ] {
        let body = request(method, params);
        let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
        let status = response.status().as_u16();
        let answer: serde_json::Value = response.json().await.unwrap_or_default();
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
        assert_eq!(status, 404, "{method}: {answer}");
    }
}
