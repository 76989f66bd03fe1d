//! What a model receives from each tool: on every path (connected, input
//! required then complete, declined, cancelled, provider error, refused by
//! the guard) the result's `structuredContent` conforms to the tool's
//! declared `outputSchema`, and its first text block is that JSON.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::{
    browser::Browser,
    full_flow::{approve_at_demo, elicit, open_and_continue, retry_accepted},
    helpers::{TestApp, spawn_app},
};

/// The output schemas of `tools/list`, checked as a client would.
pub struct Schemas(HashMap<String, Value>);

impl Schemas {
    pub async fn of(app: &TestApp) -> Self {
        let (_, list) = app.mcp("alice", "tools/list", json!({})).await;
        let tools = list["result"]["tools"].as_array().expect("tools");
        let mut schemas = HashMap::new();
        for tool in tools {
            let name = tool["name"].as_str().expect("name").to_owned();
            let schema = tool["outputSchema"].clone();
            assert_eq!(schema["type"], "object", "{name}: {tool}");
            jsonschema::validator_for(&schema).expect("output schema compiles");
            schemas.insert(name, schema);
        }
        Self(schemas)
    }

    /// Checks a completed `tool` result; returns its structured content.
    pub fn check(&self, tool: &str, body: &Value) -> Value {
        let result = &body["result"];
        assert_ne!(result["resultType"], "input_required", "{body}");
        let structured = result["structuredContent"].clone();
        let validator = jsonschema::validator_for(&self.0[tool]).expect("schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&structured)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{tool}: {errors:#?}\n{body}");
        let text = result["content"][0]["text"]
            .as_str()
            .expect("a first text block");
        let parsed: Value = serde_json::from_str(text).expect("the first text block is JSON");
        assert_eq!(parsed, structured, "first text block of {tool}");
        // isError exactly when the structured result reports an error.
        let is_error = result["isError"] == true;
        assert_eq!(is_error, structured.get("error").is_some(), "{body}");
        structured
    }
}

/// Input required, the user connects `account` in a browser, the retry
/// completes: the retry's body.
async fn through_the_browser(app: &TestApp, user: &str, tool: &str, args: Value) -> Value {
    let (url, state) = elicit(app, user, tool, args.clone(), "connect_demo").await;
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, user).await;
    approve_at_demo(&browser, &to_provider, &format!("{user}-octo")).await;
    retry_accepted(app, user, tool, args, &state, "connect_demo").await
}

/// Input required, then the client answers `action` itself.
async fn answered(app: &TestApp, user: &str, tool: &str, args: Value, action: &str) -> Value {
    let (_, state) = elicit(app, user, tool, args.clone(), "connect_demo").await;
    let (_, body) = app
        .mcp(
            user,
            "tools/call",
            json!({"name": tool, "arguments": args, "requestState": state,
                "inputResponses": {"connect_demo": {"action": action}}}),
        )
        .await;
    body
}

/// Declined and cancelled, for a tool that needs the account.
async fn declined_and_cancelled(app: &TestApp, schemas: &Schemas, tool: &str, args: Value) {
    let declined = schemas.check(
        tool,
        &answered(app, "dora", tool, args.clone(), "decline").await,
    );
    assert_eq!(declined["error"]["kind"], "declined", "{declined}");
    assert_eq!(declined["next_step"], "none");
    assert_eq!(declined["provider"], "demo");
    let cancelled = schemas.check(tool, &answered(app, "dora", tool, args, "cancel").await);
    assert_eq!(cancelled["error"]["kind"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["next_step"], "connect");
}

#[tokio::test]
async fn every_tool_declares_an_output_schema() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let mut names: Vec<&str> = schemas.0.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "api_request",
            "connect",
            "connections_list",
            "disconnect",
            "whoami"
        ]
    );
}

#[tokio::test]
async fn whoami_conforms_on_every_path() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let args = json!({"provider": "demo"});
    let done = through_the_browser(&app, "alice", "whoami", args.clone()).await;
    let done = schemas.check("whoami", &done);
    let expected = json!({"provider": "demo", "account": "alice-octo",
        "account_id": done["account_id"], "next_step": "none"});
    assert_eq!(done, expected);
    let (_, again) = app.call_tool("alice", "whoami", args.clone()).await;
    assert_eq!(schemas.check("whoami", &again), expected);
    declined_and_cancelled(&app, &schemas, "whoami", args.clone()).await;

    // The provider refuses the stored token: reconnect, and the next call
    // asks for it indeed.
    app.connect_directly("carol", "a-token-the-provider-never-issued")
        .await;
    let (_, refused) = app.call_tool("carol", "whoami", args.clone()).await;
    let refused = schemas.check("whoami", &refused);
    assert_eq!(refused["error"]["kind"], "token_rejected", "{refused}");
    assert_eq!(refused["next_step"], "connect");
    assert_eq!(refused["account"], "carol-at-demo");
    assert!(!refused.to_string().contains("never-issued"), "{refused}");
    let (_, next) = app.call_tool("carol", "whoami", args).await;
    assert_eq!(next["result"]["resultType"], "input_required", "{next}");
}

#[tokio::test]
async fn connect_conforms_on_every_path() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let args = json!({"provider": "demo"});
    let done = through_the_browser(&app, "alice", "connect", args.clone()).await;
    let done = schemas.check("connect", &done);
    assert_eq!(done["account"], "alice-octo", "{done}");
    assert!(done["scopes"].is_array(), "{done}");
    assert!(done.get("error").is_none(), "{done}");
    let (_, again) = app.call_tool("alice", "connect", args.clone()).await;
    assert_eq!(schemas.check("connect", &again), done);
    declined_and_cancelled(&app, &schemas, "connect", args).await;
}

#[tokio::test]
async fn api_request_conforms_on_every_path() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let me = json!({"provider": "demo", "path": "me"});
    let done = through_the_browser(&app, "alice", "api_request", me.clone()).await;
    let done = schemas.check("api_request", &done);
    assert_eq!(done["http_status"], 200, "{done}");
    assert_eq!(done["account"], "alice-octo", "{done}");
    assert_eq!(done["next_step"], "none");
    declined_and_cancelled(&app, &schemas, "api_request", me.clone()).await;

    // The provider answers an error status.
    let (_, missing) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "path": "nothing/here"}),
        )
        .await;
    let missing = schemas.check("api_request", &missing);
    assert_eq!(missing["http_status"], 404, "{missing}");
    assert_eq!(missing["error"]["kind"], "http_error");
    assert_eq!(missing["next_step"], "change_request");

    // Refused by the guard: nothing sent, so no status.
    for refused in [
        json!({"provider": "demo", "method": "DELETE", "path": "me"}),
        json!({"provider": "demo", "path": "../../oauth/callback/demo"}),
    ] {
        let (_, body) = app.call_tool("alice", "api_request", refused.clone()).await;
        let body = schemas.check("api_request", &body);
        assert_eq!(body["error"]["kind"], "refused", "{refused}: {body}");
        assert_eq!(body["next_step"], "change_request");
        assert!(
            body.get("http_status").is_none(),
            "{refused} was sent: {body}"
        );
    }
    // As README.md shows it: refused before any account is looked up,
    // so alice's connected account is not named.
    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "method": "DELETE", "path": "me"}),
        )
        .await;
    assert_eq!(
        body["result"]["content"][0]["text"],
        r#"{"provider":"demo","next_step":"change_request","error":{"kind":"refused","message":"method `DELETE` is not allowed for this provider"}}"#,
        "{body}"
    );
    assert_eq!(
        body["result"]["content"][1]["text"],
        "Request not made: method `DELETE` is not allowed for this provider",
        "{body}"
    );

    // The provider refuses the token.
    app.connect_directly("carol", "a-token-the-provider-never-issued")
        .await;
    let (_, rejected) = app.call_tool("carol", "api_request", me).await;
    let rejected = schemas.check("api_request", &rejected);
    assert_eq!(rejected["http_status"], 401, "{rejected}");
    assert_eq!(rejected["error"]["kind"], "token_rejected");
    assert_eq!(rejected["next_step"], "connect");
}

#[tokio::test]
async fn connections_list_and_disconnect_conform_on_every_path() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let (_, empty) = app.call_tool("alice", "connections_list", json!({})).await;
    let empty = schemas.check("connections_list", &empty);
    assert_eq!(empty["connections"], json!([]), "{empty}");
    // The model learns which providers exist without guessing names.
    let demo_entry = |list: &Value| {
        list["providers"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["provider"] == "demo"))
            .cloned()
            .unwrap_or_else(|| panic!("demo is not among the providers: {list}"))
    };
    assert_eq!(
        demo_entry(&empty),
        json!({"provider": "demo", "display_name": "Demo",
               "credential": "oauth2", "connected_accounts": 0})
    );
    let demo = json!({"provider": "demo"});
    let (_, nothing) = app.call_tool("alice", "disconnect", demo.clone()).await;
    let nothing = schemas.check("disconnect", &nothing);
    assert_eq!(nothing["connection"], "not_connected", "{nothing}");

    app.connect_directly("alice", "list-token").await;
    let (_, one) = app.call_tool("alice", "connections_list", json!({})).await;
    let one = schemas.check("connections_list", &one);
    assert_eq!(one["connections"][0]["account"], "alice-at-demo", "{one}");
    assert_eq!(one["connections"][0]["status"], "active", "{one}");
    assert_eq!(demo_entry(&one)["connected_accounts"], 1, "{one}");

    // A client that cannot ask the user to confirm.
    let (_, legacy) = app.legacy_call("alice", "disconnect", demo.clone()).await;
    let legacy = schemas.check("disconnect", &legacy);
    assert_eq!(
        legacy["error"]["kind"], "confirmation_unavailable",
        "{legacy}"
    );
    assert_eq!(legacy["next_step"], "ask_user");
    assert_eq!(legacy["connection"], "kept");

    // Input required (the confirmation form), then "no", then "yes".
    let (_, asked) = app.call_tool("alice", "disconnect", demo.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap();
    let answer = |confirm: bool| {
        app.mcp(
            "alice",
            "tools/call",
            json!({"name": "disconnect", "arguments": demo, "requestState": state,
                "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": confirm}}}}),
        )
    };
    let (_, kept) = answer(false).await;
    assert_eq!(schemas.check("disconnect", &kept)["connection"], "kept");
    let (_, gone) = answer(true).await;
    let gone = schemas.check("disconnect", &gone);
    assert_eq!(gone["connection"], "disconnected", "{gone}");
    assert_eq!(gone["account"], "alice-at-demo", "{gone}");
}

/// Arguments that do not fit a tool are the model's to correct: a tool
/// error in the tool's own shape, with serde's reason (tools.mdx lists
/// input validation among tool execution errors), not a JSON-RPC error.
/// `connections_list`, which takes nothing and has no place for a failure
/// in its result, stays -32602.
#[tokio::test]
async fn arguments_that_do_not_fit_are_tool_errors_the_model_reads() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    for (tool, args, said) in [
        ("whoami", json!({}), "missing field `provider`"),
        ("whoami", json!({"provider": 5}), "invalid type"),
        (
            "connect",
            json!({"provider": "demo", "scopes": ["a b"]}),
            "scopes must be",
        ),
        (
            "connect",
            json!({"provider": "demo", "scopes": ["profile,email"]}),
            "commas",
        ),
        (
            "api_request",
            json!({"provider": "demo", "path": "user", "colour": "red"}),
            "unknown field `colour`",
        ),
        (
            "disconnect",
            json!({"provider": "demo", "account": 7}),
            "invalid type",
        ),
    ] {
        let (status, body) = app.call_tool("alice", tool, args.clone()).await;
        assert_eq!(status, 200, "{tool} {args}: {body}");
        assert!(body.get("error").is_none(), "{tool} {args}: {body}");
        assert_eq!(body["result"]["isError"], true, "{tool} {args}: {body}");
        let structured = schemas.check(tool, &body);
        assert_eq!(
            structured["error"]["kind"], "refused",
            "{tool} {args}: {body}"
        );
        assert_eq!(
            structured["next_step"], "change_request",
            "{tool} {args}: {body}"
        );
        let message = structured["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(said), "{tool} {args}: {message}");
        if tool == "disconnect" {
            // Nothing was looked up: nothing is said of the connection
            // but that it was left as it was.
            assert_eq!(structured["connection"], "kept", "{body}");
        }
    }
    // `connections_list` takes none, and says so the same way (its result
    // has no `next_step`).
    let (_, body) = app
        .call_tool("alice", "connections_list", json!({"unexpected": 1}))
        .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    let structured = &body["result"]["structuredContent"];
    assert_eq!(structured["error"]["kind"], "refused", "{body}");
}

/// A provider the server does not have is the model's mistake to mend:
/// a tool error it sees, in the tool's own shape, naming the providers
/// there are, and no JSON-RPC error its client would keep from it.
#[tokio::test]
async fn an_unknown_provider_is_a_tool_error_naming_the_known_ones() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    for (tool, args) in [
        ("connect", json!({"provider": "gitbub"})),
        ("whoami", json!({"provider": "gitbub"})),
        ("api_request", json!({"provider": "gitbub", "path": "user"})),
        ("disconnect", json!({"provider": "gitbub"})),
    ] {
        let (status, body) = app.call_tool("alice", tool, args).await;
        assert_eq!(status, 200, "{tool}: {body}");
        assert!(body.get("error").is_none(), "{tool}: {body}");
        assert_eq!(body["result"]["resultType"], "complete", "{tool}: {body}");
        assert_eq!(body["result"]["isError"], true, "{tool}: {body}");
        let structured = schemas.check(tool, &body);
        assert_eq!(structured["error"]["kind"], "refused", "{tool}: {body}");
        assert_eq!(structured["next_step"], "change_request", "{tool}: {body}");
        let message = structured["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("gitbub") && message.contains("demo"),
            "{tool}: {message}"
        );
    }
    // As README.md shows it.
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "gitbub"}))
        .await;
    assert_eq!(
        body["result"]["content"][0]["text"],
        r#"{"provider":"gitbub","next_step":"change_request","error":{"kind":"refused","message":"Unknown provider `gitbub`. Available providers: demo."}}"#,
        "{body}"
    );
}

#[tokio::test]
async fn json_resources_say_so_and_use_the_tools_field_names() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let (_, list) = app.mcp("alice", "resources/list", json!({})).await;
    assert_eq!(
        list["result"]["resources"][0]["mimeType"], "application/json",
        "{list}"
    );
    let (_, templates) = app
        .mcp("alice", "resources/templates/list", json!({}))
        .await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["mimeType"], "application/json",
        "{templates}"
    );
    through_the_browser(&app, "alice", "connect", json!({"provider": "demo"})).await;
    for (uri, tool, args) in [
        ("connections://mine", "connections_list", json!({})),
        (
            "connection://demo/profile",
            "whoami",
            json!({"provider": "demo"}),
        ),
    ] {
        let (_, read) = app
            .mcp("alice", "resources/read", json!({"uri": uri}))
            .await;
        let contents = &read["result"]["contents"][0];
        assert_eq!(contents["mimeType"], "application/json", "{read}");
        let parsed: Value = serde_json::from_str(contents["text"].as_str().unwrap()).unwrap();
        let (_, called) = app.call_tool("alice", tool, args).await;
        let mut structured = schemas.check(tool, &called);
        if tool == "connections_list" {
            // Reading is not using: only the tool call moved last_used_at.
            structured["connections"][0]["last_used_at"] =
                parsed["connections"][0]["last_used_at"].clone();
        }
        assert_eq!(parsed, structured, "{uri} reads as {tool} answers");
    }
}

#[tokio::test]
async fn the_checks_can_fail() {
    let app = spawn_app().await;
    let schemas = Schemas::of(&app).await;
    let (_, good) = app.call_tool("alice", "connections_list", json!({})).await;
    schemas.check("connections_list", &good);
    let mut bad_shape = good.clone();
    bad_shape["result"]["structuredContent"] = json!({"connections": [{"provider": 1}]});
    let mut bad_text = good.clone();
    bad_text["result"]["content"][0]["text"] = json!("No accounts are connected yet.");
    let mut bad_flag = good.clone();
    bad_flag["result"]["isError"] = json!(true);
    for bad in [bad_shape, bad_text, bad_flag] {
        let caught = std::panic::catch_unwind(|| schemas.check("connections_list", &bad));
        assert!(caught.is_err(), "{bad}");
    }
}
