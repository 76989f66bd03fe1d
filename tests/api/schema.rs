//! What goes on the wire matches the 2026-07-28 schema (`tests/schema/`, a
//! copy of the specification's schema.json).

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::helpers::spawn_app;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let text = include_str!("../schema/mcp-2026-07-28.json");
        serde_json::from_str(text).expect("schema.json parses")
    })
}

/// Validates `instance` against `#/$defs/<definition>`; panics with every error.
pub fn assert_matches(definition: &str, instance: &Value) {
    let mut root = schema().clone();
    let defs = root["$defs"].clone();
    root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": format!("#/$defs/{definition}"),
        "$defs": defs,
    });
    let validator = jsonschema::validator_for(&root).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{definition}: {errors:#?}\n{instance}");
}

/// The schema does not forbid extra properties; where 2026-07-28 removed a
/// field, check it is really gone.
pub fn assert_no_url_elicitation_ids(instance: &Value) {
    if let Some(requests) = instance["result"]["inputRequests"].as_object() {
        for (key, request) in requests {
            let params = &request["params"];
            if params["mode"] == "url" {
                assert!(
                    params.get("elicitationId").is_none(),
                    "{key}: 2026-07-28 has no elicitationId: {params}"
                );
            }
        }
    }
}

#[tokio::test]
async fn discover_list_and_call_match_the_schema() {
    let app = spawn_app().await;
    let (_, discover) = app.mcp("alice", "server/discover", json!({})).await;
    assert_matches("DiscoverResultResponse", &discover);
    let (_, tools) = app.mcp("alice", "tools/list", json!({})).await;
    assert_matches("ListToolsResultResponse", &tools);
    let (_, call) = app.call_tool("alice", "connections_list", json!({})).await;
    assert_matches("CallToolResultResponse", &call);
    let (_, error) = app.mcp("alice", "nothing/here", json!({})).await;
    assert_matches("JSONRPCErrorResponse", &error);
}

#[test]
fn the_checks_can_fail() {
    let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": "not a list"}});
    assert!(std::panic::catch_unwind(|| assert_matches("ListToolsResultResponse", &bad)).is_err());
    let with_id = json!({"result": {"inputRequests": {"k": {"method": "elicitation/create",
        "params": {"mode": "url", "url": "https://x", "message": "m", "elicitationId": ""}}}}});
    assert!(std::panic::catch_unwind(|| assert_no_url_elicitation_ids(&with_id)).is_err());
}
