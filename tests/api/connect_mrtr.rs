//! The MCP side of the connect flow: the URL elicitation, the one-time
//! ticket, the sealed requestState and what every kind of retry gets.

use mcp_connect::domain::{ProviderName, UserRef};
use std::time::Duration;

use mcp_connect::{
    connect::state::{Binding, RoundState, RoundTicket, seal},
    connect::vault::{NewConnection, store_connection},
    crypto::KeyRing,
    providers::{Account, TokenSet},
};
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::{
    helpers::{CLIENT_ID, PROTOCOL, TestApp, read, request, spawn_app, spawn_app_with},
    schema::{assert_matches, assert_no_url_elicitation_ids},
};

const INVALID_STATE: &str = "Invalid or expired requestState";

/// The first round: `input_required` with one URL elicitation.
async fn ask(app: &TestApp, subject: &str, tool: &str, args: Value) -> Value {
    let (status, body) = app.call_tool(subject, tool, args).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    body
}

fn elicitation(body: &Value) -> &Value {
    &body["result"]["inputRequests"]["connect_demo"]["params"]
}

fn ticket_of(body: &Value) -> String {
    let url = elicitation(body)["url"].as_str().expect("url").to_owned();
    url.split_once("?ticket=")
        .expect("ticket in url")
        .1
        .to_owned()
}

fn state_of(body: &Value) -> String {
    body["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned()
}

/// A retry of `tool` with `inputResponses` and the echoed state.
async fn retry(
    app: &TestApp,
    subject: &str,
    tool: &str,
    args: Value,
    state: &str,
    responses: Value,
) -> (u16, Value) {
    app.mcp(
        subject,
        "tools/call",
        json!({
            "name": tool, "arguments": args, "requestState": state, "inputResponses": responses,
        }),
    )
    .await
}

fn accept() -> Value {
    json!({"connect_demo": {"action": "accept"}})
}

#[tokio::test]
async fn unconnected_call_answers_input_required_with_a_url_elicitation_and_a_hashed_ticket() {
    let app = spawn_app().await;
    let body = ask(&app, "alice", "whoami", json!({"provider": "demo"})).await;
    assert_matches("JSONRPCResultResponse", &body);
    assert_matches("InputRequiredResult", &body["result"]);
    assert_matches(
        "ElicitRequest",
        &body["result"]["inputRequests"]["connect_demo"],
    );
    assert_no_url_elicitation_ids(&body);
    assert!(
        body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].is_object(),
        "{body}"
    );

    let params = elicitation(&body);
    assert_eq!(params["mode"], "url");
    let url = params["url"].as_str().unwrap();
    let ticket = ticket_of(&body);
    assert_eq!(
        url,
        format!("{}/connect?ticket={ticket}", app.base),
        "the URL carries the ticket and nothing else"
    );
    assert_eq!(ticket.len(), 43, "256 bits in base64url");
    assert!(
        params["message"].as_str().unwrap().contains("Demo"),
        "{params}"
    );

    let rows: Vec<(Vec<u8>, String, String, String)> =
        sqlx::query_as("SELECT ticket_hash, subject, client_id, provider FROM connect_tickets")
            .fetch_all(&app.db)
            .await
            .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].0,
        Sha256::digest(ticket.as_bytes()).to_vec(),
        "stored as SHA-256 only"
    );
    assert_eq!(
        (rows[0].1.as_str(), rows[0].2.as_str(), rows[0].3.as_str()),
        ("alice", CLIENT_ID, "demo")
    );
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(
        id.get_version_num(),
        7,
        "time-ordered: each ask appends to the primary key instead of touching a random page"
    );
    let dump: String = sqlx::query_scalar("SELECT string_agg(t::text, ' ') FROM connect_tickets t")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(
        !dump.contains(&ticket),
        "the ticket itself is not in the database"
    );
    let state = state_of(&body);
    assert!(
        !state.contains("alice") && !state.contains(&ticket),
        "requestState is opaque"
    );
}

#[tokio::test]
async fn client_without_url_elicitation_gets_32021_naming_the_connections_page() {
    let app = spawn_app().await;
    let mut body = request(
        "tools/call",
        json!({"name": "whoami", "arguments": {"provider": "demo"}}),
    );
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    let response = app
        .mcp_request(Some(&app.token("alice")), &body)
        .send()
        .await
        .unwrap();
    let (status, body) = read(response).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {"url": {}}})
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{}/connections", app.base)),
        "{body}"
    );
    assert_matches("MissingRequiredClientCapabilityError", &body);
}

#[tokio::test]
async fn legacy_client_gets_32042_with_the_ticket_id_as_elicitation_id() {
    let app = spawn_app().await;
    let (status, body) = app
        .legacy_call("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "legacy errors stay HTTP 200: {body}");
    assert_eq!(body["error"]["code"], -32042, "{body}");
    // A legacy client's capabilities are unknown here: for one that cannot
    // open the link, the message says where to connect by hand (and never
    // holds the link, which a client may log).
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("go to {}/connections", app.base)),
        "{message}"
    );
    assert!(!message.contains("ticket="), "{message}");
    let e = &body["error"]["data"]["elicitations"][0];
    assert_eq!(e["mode"], "url");
    let ticket_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(e["elicitationId"], ticket_id.to_string());
    let url = e["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{}/connect?ticket=", app.base)),
        "{url}"
    );
    assert!(
        !url.contains(&ticket_id.to_string()),
        "the id is not the ticket"
    );
    // The error carries the link; no log line may (rmcp logs errors it sends).
    let ticket = url.split_once("ticket=").unwrap().1.to_owned();
    crate::logs::assert_absent(&[ticket]);

    // Once connected, the legacy client's plain retry completes.
    app.connect_directly("alice", "legacy-token").await;
    let (_, body) = app
        .legacy_call("alice", "connect", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice-at-demo",
        "{body}"
    );
    assert_ne!(body["result"]["isError"], true, "{body}");
}

#[tokio::test]
async fn retry_without_an_answer_asks_again_with_the_same_url() {
    let app = spawn_app().await;
    let first = ask(&app, "alice", "whoami", json!({"provider": "demo"})).await;
    let (_, second) = retry(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state_of(&first),
        json!({}),
    )
    .await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert_eq!(
        ticket_of(&second),
        ticket_of(&first),
        "same ticket while it lives"
    );
    // Unknown extra keys are ignored.
    let (_, third) = retry(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state_of(&second),
        json!({"something_else": {"action": "accept"}}),
    )
    .await;
    assert_eq!(ticket_of(&third), ticket_of(&first), "{third}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(count, 1);
}

#[tokio::test]
async fn decline_and_cancel_complete_with_is_error_and_say_so() {
    let app = spawn_app().await;
    let first = ask(&app, "alice", "whoami", json!({"provider": "demo"})).await;
    let (_, declined) = retry(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state_of(&first),
        json!({"connect_demo": {"action": "decline"}}),
    )
    .await;
    assert_eq!(declined["result"]["resultType"], "complete", "{declined}");
    assert_eq!(declined["result"]["isError"], true);
    assert!(
        declined["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined"),
        "{declined}"
    );
    assert_matches("CallToolResultResponse", &declined);

    let (_, cancelled) = retry(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state_of(&first),
        json!({"connect_demo": {"action": "cancel"}}),
    )
    .await;
    assert_eq!(cancelled["result"]["isError"], true);
    let text = cancelled["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("cancelled") && text.contains("again"),
        "{text}"
    );
}

#[tokio::test]
async fn cancel_on_the_consent_page_makes_the_retry_say_declined() {
    let app = spawn_app().await;
    let first = ask(&app, "alice", "whoami", json!({"provider": "demo"})).await;
    sqlx::query("UPDATE connect_tickets SET declined_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    let (_, body) = retry(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state_of(&first),
        accept(),
    )
    .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(
        body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("declined"),
        "{body}"
    );
}

#[tokio::test]
async fn accept_before_the_user_finished_asks_again_after_the_wait() {
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 300").unwrap()),
        );
    })
    .await;
    let first = ask(&app, "alice", "connect", json!({"provider": "demo"})).await;
    let started = std::time::Instant::now();
    let (_, again) = retry(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo"}),
        &state_of(&first),
        accept(),
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "it waited for the connection"
    );
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(ticket_of(&again), ticket_of(&first));
}

#[tokio::test]
async fn accept_is_woken_by_a_connection_stored_on_another_instance() {
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 10000").unwrap()),
        );
    })
    .await;
    let other = app.second_instance().await;
    let first = ask(&app, "alice", "connect", json!({"provider": "demo"})).await;
    let state = state_of(&first);
    let started = std::time::Instant::now();
    let waiting = tokio::spawn({
        let token = app.token("alice");
        let http = app.http.clone();
        let url = app.mcp_url();
        async move {
            let body = request(
                "tools/call",
                json!({"name": "connect", "arguments": {"provider": "demo"},
                "requestState": state, "inputResponses": {"connect_demo": {"action": "accept"}}}),
            );
            let response = http
                .post(url)
                .bearer_auth(token)
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", PROTOCOL)
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", "connect")
                .json(&body)
                .send()
                .await
                .unwrap();
            read(response).await
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The callback lands on the other instance.
    let tokens = TokenSet {
        access_token: SecretString::from("from-other-instance".to_owned()),
        received: std::time::Instant::now(),
        refresh_token: None,
        expires_in: None,
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    store_connection(
        &other.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), "alice"),
            provider: &ProviderName::parse("demo").unwrap(),
            account: &Account {
                id: "1".into(),
                label: "alice-demo".into(),
            },
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some("test-client"),
        },
    )
    .await
    .unwrap();
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(body["result"]["structuredContent"]["account"], "alice-demo");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by NOTIFY, not by the 10 s limit: {:?}",
        started.elapsed()
    );
    assert!(
        !body.to_string().contains("from-other-instance"),
        "no token in a result"
    );
}

/// A call that names an account there is none of waits on accept like any
/// other, but the account stored meanwhile is another: it is not taken for
/// the named one (a retry a moment later would not take it either).
#[tokio::test]
async fn accept_for_a_named_account_is_not_completed_with_another() {
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 10000").unwrap()),
        );
    })
    .await;
    let args = json!({"provider": "demo", "account": "work"});
    let first = ask(&app, "alice", "whoami", args.clone()).await;
    let key = first["result"]["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("one question");
    let retry = request(
        "tools/call",
        json!({"name": "whoami", "arguments": args, "requestState": state_of(&first),
               "inputResponses": {key: {"action": "accept"}}}),
    );
    let sent = app.mcp_request(Some(&app.token("alice")), &retry).send();
    let waiting = tokio::spawn(async move { read(sent.await.unwrap()).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.connect_directly("alice", "PERSONAL-ACCOUNT-TOKEN")
        .await;
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["result"]["resultType"], "complete", "{body}");
    assert!(
        !body.to_string().contains("PERSONAL-ACCOUNT-TOKEN"),
        "no token in a result"
    );
}

#[tokio::test]
async fn accept_when_connected_completes_and_no_token_leaks() {
    let app = spawn_app().await;
    let first = ask(&app, "alice", "connect", json!({"provider": "demo"})).await;
    app.connect_directly("alice", "SECRET-ACCESS-TOKEN-42")
        .await;
    let (_, body) = retry(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo"}),
        &state_of(&first),
        accept(),
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"],
        "alice-at-demo"
    );
    assert!(!body.to_string().contains("SECRET-ACCESS-TOKEN-42"));
    let (_, list) = app.call_tool("alice", "connections_list", json!({})).await;
    assert!(!list.to_string().contains("SECRET-ACCESS-TOKEN-42"));
    // In the database: sealed, never in clear.
    let raw: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        sqlx::query_as("SELECT access_token, refresh_token FROM connections")
            .fetch_all(&app.db)
            .await
            .unwrap();
    for (access, refresh) in raw {
        for bytes in [Some(access), refresh].into_iter().flatten() {
            assert!(
                !String::from_utf8_lossy(&bytes).contains("SECRET-ACCESS-TOKEN"),
                "token stored in clear"
            );
        }
    }
    let dump: String = sqlx::query_scalar("SELECT string_agg(c::text, ' ') FROM connections c")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!dump.contains("SECRET-ACCESS-TOKEN"));
}

/// Seals a state for alice's `whoami {provider: demo}` the way the server
/// does, with a key, audience and lifetime the server would never use.
fn forge(app: &TestApp, keys: &KeyRing, audience: &str, ttl: u64) -> String {
    let issuer = app.dev.issuer();
    let args = json!({"provider": "demo"});
    let binding = Binding {
        audience,
        user: UserRef::new(&issuer, "alice"),
        client_id: CLIENT_ID,
        method: "tools/call",
        target: "whoami",
        arguments: args.as_object(),
    };
    let round = RoundState {
        ticket: Some(RoundTicket {
            id: uuid::Uuid::new_v4(),
            secret: mcp_connect::connect::tickets::TicketSecret::generate(),
        }),
        provider: ProviderName::parse("demo").unwrap(),
        round: 1,
        account: None,
        offered: Vec::new(),
    };
    seal(keys, &binding, &round, Duration::from_secs(ttl)).unwrap()
}

#[tokio::test]
async fn every_tampered_or_misbound_request_state_gets_the_one_fixed_error() {
    let app = spawn_app().await;
    let args = json!({"provider": "demo"});
    let first = ask(&app, "alice", "whoami", args.clone()).await;
    let good = state_of(&first);
    let keys = KeyRing::from_entries([mcp_connect::dev::dev_key_entry(&app.db)
        .await
        .unwrap()
        .as_str()])
    .unwrap();
    let other_keys = KeyRing::from_entries([KeyRing::generate_entry("dev1").as_str()]).unwrap();
    let mut flipped = good.clone().into_bytes();
    let i = flipped.len() / 2 + 3;
    flipped[i] = if flipped[i] == b'A' { b'B' } else { b'A' };
    let flipped = String::from_utf8(flipped).unwrap();
    let (kid, _) = good.split_once('.').unwrap();
    let aud = app.mcp_url();

    let cases: Vec<(&str, &str, &str, &str, Value, String)> = vec![
        // (case, subject, client, tool, arguments, state)
        (
            "flipped bit",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            flipped,
        ),
        (
            "truncated",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            good[..good.len() - 10].to_owned(),
        ),
        (
            "empty",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            String::new(),
        ),
        (
            "not base64",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            format!("{kid}.!!!not*base64!!!"),
        ),
        (
            "unknown kid",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            good.replacen(kid, "nokey", 1),
        ),
        (
            "other key",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            forge(&app, &other_keys, &aud, 60),
        ),
        (
            "another user",
            "bob",
            CLIENT_ID,
            "whoami",
            args.clone(),
            good.clone(),
        ),
        (
            "another client id",
            "alice",
            "other-client",
            "whoami",
            args.clone(),
            good.clone(),
        ),
        (
            "another tool",
            "alice",
            CLIENT_ID,
            "connect",
            args.clone(),
            good.clone(),
        ),
        (
            "another audience",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            forge(&app, &keys, "https://elsewhere.example/mcp", 60),
        ),
        (
            "expired",
            "alice",
            CLIENT_ID,
            "whoami",
            args.clone(),
            forge(&app, &keys, &aud, 0),
        ),
    ];
    for (case, subject, client, tool, arguments, state) in cases {
        let token = app
            .dev
            .mint_access_token(subject, client, &["openid"], Duration::from_secs(600))
            .unwrap();
        let body = request(
            "tools/call",
            json!({"name": tool, "arguments": arguments,
            "requestState": state, "inputResponses": {"connect_demo": {"action": "accept"}}}),
        );
        let response = app.mcp_request(Some(&token), &body).send().await.unwrap();
        let (status, body) = read(response).await;
        assert_eq!(body["error"]["code"], -32602, "{case}: {status} {body}");
        assert_eq!(body["error"]["message"], INVALID_STATE, "{case}: {body}");
        assert!(
            body["error"].get("data").is_none_or(Value::is_null),
            "{case}: no hint why: {body}"
        );
    }
    // Other (valid) arguments for the same tool.
    let connect_state = state_of(&ask(&app, "alice", "connect", args.clone()).await);
    let (_, body) = retry(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo", "scopes": ["echo"]}),
        &connect_state,
        json!({}),
    )
    .await;
    assert_eq!(
        body["error"]["message"], INVALID_STATE,
        "other arguments: {body}"
    );

    // The forged-but-valid control passes: the rejections above are about the binding.
    let control = forge(&app, &keys, &aud, 60);
    let (_, body) = retry(&app, "alice", "whoami", args.clone(), &control, json!({})).await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    // Counted per principal and minute, not a row each.
    let rejected: i64 = sqlx::query_scalar(
        "SELECT COALESCE(sum((detail->>'count')::bigint), 0)::bigint FROM audit_events WHERE kind = 'state_rejected'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(rejected >= 12, "every rejection is audited: {rejected}");
}

#[tokio::test]
async fn api_request_refuses_other_hosts_dot_dot_absolute_urls_and_disallowed_methods() {
    let app = spawn_app().await;
    app.connect_directly("alice", "api-token").await;
    let cases = [
        ("GET", "https://evil.example/steal"),
        ("GET", "//evil.example/steal"),
        ("GET", "../../oauth/callback/demo"),
        ("GET", "%2e%2e/%2e%2e/admin"),
        ("GET", "me/../../../x"),
        ("DELETE", "me"),
        ("TRACE", "me"),
    ];
    for (method, path) in cases {
        let (_, body) = app
            .call_tool(
                "alice",
                "api_request",
                json!({"provider": "demo", "method": method, "path": path}),
            )
            .await;
        assert_eq!(body["result"]["isError"], true, "{method} {path}: {body}");
        assert!(
            body["result"]["structuredContent"]
                .get("http_status")
                .is_none(),
            "{method} {path} was sent: {body}"
        );
    }
}

/// A request that would be refused whatever the account (a method the
/// operator did not allow, a path that leaves any API base, a query value
/// that is no scalar, a body on a GET) is refused at once: the user is not
/// sent to connect an account, nor a connect link spent, for a request
/// that would be refused after.
#[tokio::test]
async fn api_request_refuses_what_no_account_could_make_before_asking_to_connect() {
    let app = spawn_app().await;
    for refused in [
        json!({"provider": "demo", "method": "DELETE", "path": "me"}),
        json!({"provider": "demo", "path": "../x"}),
        json!({"provider": "demo", "path": "https://evil.example/steal"}),
        json!({"provider": "demo", "path": "//evil.example/steal"}),
        json!({"provider": "demo", "path": "me\\..\\x"}),
        json!({"provider": "demo", "path": "me", "query": {"q": {"nested": 1}}}),
        json!({"provider": "demo", "path": "me", "body": {"a": 1}}),
    ] {
        let (_, body) = app.call_tool("alice", "api_request", refused.clone()).await;
        assert_ne!(
            body["result"]["resultType"], "input_required",
            "{refused}: {body}"
        );
        assert_eq!(body["result"]["isError"], true, "{refused}: {body}");
        let result = &body["result"]["structuredContent"];
        assert_eq!(result["error"]["kind"], "refused", "{refused}: {body}");
        assert_eq!(result["next_step"], "change_request", "{refused}: {body}");
    }
    let tickets: i64 = sqlx::query_scalar("SELECT count(*) FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(tickets, 0, "no connect link was made");
    // An allowed request still asks to connect.
    let (_, allowed) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "path": "me"}),
        )
        .await;
    assert_eq!(
        allowed["result"]["resultType"], "input_required",
        "{allowed}"
    );
}

#[tokio::test]
async fn resources_list_and_the_profile_template_uses_the_same_flow() {
    let app = spawn_app().await;
    let (_, list) = app.mcp("alice", "resources/list", json!({})).await;
    assert_matches("ListResourcesResultResponse", &list);
    let (_, templates) = app
        .mcp("alice", "resources/templates/list", json!({}))
        .await;
    assert_matches("ListResourceTemplatesResultResponse", &templates);
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "connection://{provider}/profile"
    );
    let (_, read) = app
        .mcp(
            "alice",
            "resources/read",
            json!({"uri": "connection://demo/profile"}),
        )
        .await;
    assert_eq!(read["result"]["resultType"], "input_required", "{read}");
    assert_no_url_elicitation_ids(&read);
    let (_, mine) = app
        .mcp(
            "alice",
            "resources/read",
            json!({"uri": "connections://mine"}),
        )
        .await;
    assert_matches("ReadResourceResultResponse", &mine);
}

#[tokio::test]
async fn an_unknown_resource_names_its_uri() {
    let app = spawn_app().await;
    let (_, body) = app
        .mcp(
            "alice",
            "resources/read",
            json!({"uri": "connection://demo/nothing"}),
        )
        .await;
    // 2026-07-28: -32602 (Invalid Params) with the URI in data.
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert_eq!(
        body["error"]["data"]["uri"], "connection://demo/nothing",
        "{body}"
    );
}

#[tokio::test]
async fn every_ticket_issued_is_audited_with_its_id_and_client() {
    let app = spawn_app().await;
    ask(&app, "alice", "whoami", json!({"provider": "demo"})).await;
    let (detail, subject): (Value, String) =
        sqlx::query_as("SELECT detail, subject FROM audit_events WHERE kind = 'ticket_issued'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(subject, "alice");
    assert_eq!(detail["ticket_id"], id.to_string(), "{detail}");
    assert_eq!(detail["client_id"], CLIENT_ID, "{detail}");
    assert_eq!(detail["scopes"], json!(["profile"]), "{detail}");
}

/// The client id and the scopes are the client's and the model's choice:
/// the audit row keeps short printable prefixes (of the first few scopes,
/// with how many there were), the ticket keeps them whole.
#[tokio::test]
async fn a_ticket_audit_row_keeps_short_prefixes_of_a_long_client_id_and_scopes() {
    let app = spawn_app().await;
    let client = format!("client-{}", "c".repeat(300));
    let asked: Vec<String> = (0..32)
        .map(|i| format!("s{i:02}{}", "x".repeat(197)))
        .collect();
    let (status, body) = app
        .mcp_as(
            &client,
            "alice",
            "tools/call",
            json!({"name": "connect", "arguments": {"provider": "demo", "scopes": asked}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");

    let detail: Value =
        sqlx::query_scalar("SELECT detail FROM audit_events WHERE kind = 'ticket_issued'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let prefix_of = |value: &Value, chars: usize| {
        let text = value.as_str().unwrap().to_owned();
        assert!(text.chars().count() <= chars + 1, "{detail}");
        assert!(text.ends_with('…'), "{detail}");
        text.trim_end_matches('…').to_owned()
    };
    let prefix = |value: &Value| prefix_of(value, 32);
    assert!(
        client.starts_with(&prefix_of(&detail["client_id"], 128)),
        "{detail}"
    );
    let scopes = detail["scopes"].as_array().unwrap();
    assert_eq!(scopes[0], "profile", "the provider's defaults come first");
    assert!(scopes.len() <= 8, "{detail}");
    for (scope, asked) in scopes[1..].iter().zip(&asked) {
        assert!(asked.starts_with(&prefix(scope)), "{detail}");
    }
    assert_eq!(detail["scope_count"], 33, "{detail}");
    assert!(detail.to_string().len() < 1024, "{detail}");

    let (client_id, kept): (String, Vec<String>) =
        sqlx::query_as("SELECT client_id, scopes FROM connect_tickets")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(client_id, client);
    assert_eq!(kept[1..], asked[..]);
}

#[tokio::test]
async fn scopes_a_tool_asks_for_come_on_top_of_the_providers_defaults() {
    let app = spawn_app().await;
    ask(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo", "scopes": ["echo"]}),
    )
    .await;
    let scopes: Vec<String> = sqlx::query_scalar("SELECT scopes FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(scopes, ["profile", "echo"], "the defaults are kept");
}

#[tokio::test]
async fn a_ticket_insert_relaxes_durability_for_its_own_transaction_only() {
    use mcp_connect::db::tickets::{NewTicket, insert};
    let app = spawn_app().await;
    let demo = ProviderName::parse("demo").unwrap();
    let ticket = |id, hash: &'static [u8]| NewTicket {
        id,
        ticket_hash: hash,
        user: UserRef::new("https://issuer.example", "alice"),
        client_id: CLIENT_ID,
        provider: &demo,
        scopes: &[],
        ttl: Duration::from_secs(600),
        connection_id: None,
        add_account: false,
    };
    let mut conn = app.db.acquire().await.unwrap();

    // Inside a transaction, the relaxed commit is in force until its end...
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    insert(&mut *tx, ticket(uuid::Uuid::new_v4(), b"first"))
        .await
        .unwrap();
    let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(setting, "off");
    tx.rollback().await.unwrap();

    // ...and on its own, it is the statement's transaction only.
    let id = uuid::Uuid::new_v4();
    insert(&mut *conn, ticket(id, b"second")).await.unwrap();
    // The same connection's next transaction commits durably again.
    let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(setting, "on");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events WHERE kind = 'ticket_issued' AND detail->>'ticket_id' = $1",
    )
    .bind(id.to_string())
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        audited, 1,
        "the ticket and its audit row are written together"
    );
}

#[tokio::test]
async fn a_refusal_of_a_token_that_was_refreshed_meanwhile_leaves_the_connection_usable() {
    use mcp_connect::connect::vault::token_rejected;
    let app = spawn_app().await;
    let status = || async {
        sqlx::query_scalar::<_, String>("SELECT status FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap()
    };

    app.connect_directly("alice", "first-token").await;
    let old = app.demo_token("alice").await;
    // Another call stores a new token (a refresh, a reconnect) ...
    app.connect_directly("alice", "second-token").await;
    // ... then the provider's 401 for the old one arrives.
    assert!(!token_rejected(&app.state.connect, &old).await.unwrap());
    assert_eq!(status().await, "active");

    // A refusal of the token in use does mark it.
    let current = app.demo_token("alice").await;
    assert!(token_rejected(&app.state.connect, &current).await.unwrap());
    assert_eq!(status().await, "needs_reauth");
}

#[tokio::test]
async fn a_user_gets_a_bounded_number_of_new_links_per_minute() {
    let app = spawn_app_with(|t| {
        let mut flow = toml::Table::new();
        flow.insert("links_per_minute".into(), 2.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await;
    let args = json!({"provider": "demo"});
    let first = ask(&app, "alice", "whoami", args.clone()).await;
    ask(&app, "alice", "whoami", args.clone()).await;
    let (status, refused) = app.call_tool("alice", "whoami", args.clone()).await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["error"]["code"], -31003, "{refused}");
    assert_eq!(refused["error"]["data"]["retryable"], true, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Too many connect links"), "{message}");
    assert_eq!(
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM connect_tickets")
            .fetch_one(&app.db)
            .await
            .unwrap(),
        2
    );
    // Another user has their own share.
    ask(&app, "bob", "whoami", args.clone()).await;
    // A retry that shows the same link again takes nothing from it.
    let (_, again) = retry(
        &app,
        "alice",
        "whoami",
        args,
        &state_of(&first),
        Value::Null,
    )
    .await;
    assert_eq!(ticket_of(&again), ticket_of(&first), "{again}");
}

/// The answer to this server's own question must be an elicitation
/// result; anything else is invalid params (mrtr.mdx: servers SHOULD
/// validate the client's `InputResponses`), not taken for "no answer
/// yet". Keys the server did not ask about are the client's business.
#[tokio::test]
async fn a_malformed_answer_to_the_connect_question_is_invalid_params() {
    let app = spawn_app().await;
    let args = json!({"provider": "demo"});
    let state = state_of(&ask(&app, "alice", "whoami", args.clone()).await);
    for answer in [
        json!("yes"),
        json!({"action": "ok"}),
        json!({"action": "accept", "content": "done"}),
    ] {
        let (_, body) = retry(
            &app,
            "alice",
            "whoami",
            args.clone(),
            &state,
            json!({"connect_demo": answer}),
        )
        .await;
        assert_eq!(body["error"]["code"], -32602, "{answer}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("inputResponses.connect_demo"), "{message}");
    }
    // The account question's key is this server's too.
    let (_, body) = retry(
        &app,
        "alice",
        "whoami",
        args.clone(),
        &state,
        json!({"account_demo": {"action": "accept", "content": {"account": {"id": 1}}}}),
    )
    .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let (_, body) = retry(
        &app,
        "alice",
        "whoami",
        args,
        &state,
        json!({"something_else": "whatever"}),
    )
    .await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
}
