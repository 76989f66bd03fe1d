//! `disconnect` with several accounts at one provider: it never guesses.
//! None named: the user is asked which (the same form every tool asks),
//! then to confirm; named: only that one goes; an unknown name is asked
//! again. A client that cannot show a form is told to name the account.

use serde_json::{Value, json};

use crate::{
    accounts::{choose, form, store},
    helpers::{CLIENT_ID, TestApp, read, request, spawn_app},
};

async fn disconnect(app: &TestApp, arguments: Value, retry: Value) -> Value {
    let mut params = json!({"name": "disconnect", "arguments": arguments});
    if let Value::Object(retry) = retry {
        params.as_object_mut().unwrap().extend(retry);
    }
    let (status, body) = app.mcp_as(CLIENT_ID, "alice", "tools/call", params).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The confirmation form; its requestState.
fn confirmation<'b>(body: &'b Value, label: &str) -> &'b str {
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let params = &body["result"]["inputRequests"]["confirm_disconnect"]["params"];
    assert!(
        params["message"].as_str().unwrap().contains(label),
        "the confirmation names {label}: {body}"
    );
    body["result"]["requestState"].as_str().unwrap()
}

fn confirm(state: &str) -> Value {
    json!({"requestState": state,
        "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}}})
}

async fn accounts_left(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("SELECT account_id FROM connections ORDER BY account_id")
        .fetch_all(&app.db)
        .await
        .unwrap()
}

/// `connect` without an account: with one left it completes with it.
async fn connect_completes_with(app: &TestApp, account_id: &str) {
    let (_, body) = app
        .mcp_as(
            CLIENT_ID,
            "alice",
            "tools/call",
            json!({"name": "connect", "arguments": {"provider": "demo"}}),
        )
        .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account_id"], account_id,
        "{body}"
    );
}

#[tokio::test]
async fn without_an_account_it_asks_which_then_removes_only_the_one_chosen() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let args = json!({"provider": "demo"});

    let asked = disconnect(&app, args.clone(), json!({})).await;
    assert_eq!(
        form(&asked)["requestedSchema"]["properties"]["account"]["enum"],
        json!(["work", "personal"]),
        "{asked}"
    );
    let state = asked["result"]["requestState"].as_str().unwrap();

    // An unknown answer: the question again, nothing removed.
    let unknown = disconnect(&app, args.clone(), choose(state, "nope")).await;
    assert!(
        form(&unknown)["message"]
            .as_str()
            .unwrap()
            .contains("not one of"),
        "{unknown}"
    );
    // Declining the question keeps everything.
    let declined = disconnect(
        &app,
        args.clone(),
        json!({"requestState": state, "inputResponses": {"account_demo": {"action": "decline"}}}),
    )
    .await;
    assert_eq!(
        declined["result"]["structuredContent"]["connection"], "kept",
        "{declined}"
    );
    assert_eq!(accounts_left(&app).await, ["p-2", "w-1"]);

    let chosen = disconnect(&app, args.clone(), choose(state, "personal")).await;
    let state = confirmation(&chosen, "personal");
    let gone = disconnect(&app, args.clone(), confirm(state)).await;
    assert_eq!(gone["result"]["resultType"], "complete", "{gone}");
    let done = &gone["result"]["structuredContent"];
    assert_eq!(done["connection"], "disconnected", "{gone}");
    assert_eq!(done["account_id"], "p-2", "{gone}");
    assert_eq!(accounts_left(&app).await, ["w-1"]);

    // The other account still works, and is the only one now: no question.
    connect_completes_with(&app, "w-1").await;
}

#[tokio::test]
async fn a_named_account_is_confirmed_and_removed_alone() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;

    // The oldest is "work": naming the other must not remove the oldest.
    let args = json!({"provider": "demo", "account": "personal"});
    let asked = disconnect(&app, args.clone(), json!({})).await;
    let state = confirmation(&asked, "personal");
    let gone = disconnect(&app, args, confirm(state)).await;
    assert_eq!(
        gone["result"]["structuredContent"]["account"], "personal",
        "{gone}"
    );
    assert_eq!(accounts_left(&app).await, ["w-1"]);
    connect_completes_with(&app, "w-1").await;

    // By account id as well.
    let args = json!({"provider": "demo", "account": "w-1"});
    let asked = disconnect(&app, args.clone(), json!({})).await;
    let state = confirmation(&asked, "work");
    disconnect(&app, args, confirm(state)).await;
    assert!(accounts_left(&app).await.is_empty());
}

/// With several accounts at one provider, the audit row says which one
/// went: its connection, and the provider's id for the account.
#[tokio::test]
async fn the_audit_row_names_the_account_disconnected() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let personal: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM connections WHERE account_id = 'p-2'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let args = json!({"provider": "demo", "account": "personal"});
    let asked = disconnect(&app, args.clone(), json!({})).await;
    let state = confirmation(&asked, "personal");
    disconnect(&app, args, confirm(state)).await;
    let audited: (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT detail->>'connection_id', detail->>'account_id' FROM audit_events
         WHERE kind = 'disconnected'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        audited,
        (Some(personal.to_string()), Some("p-2".to_owned()))
    );
}

#[tokio::test]
async fn an_unknown_account_is_answered_with_the_question() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let args = json!({"provider": "demo", "account": "nope"});
    let asked = disconnect(&app, args, json!({})).await;
    let params = form(&asked);
    assert!(
        params["message"].as_str().unwrap().contains("not one of"),
        "{asked}"
    );
    assert_eq!(
        params["requestedSchema"]["properties"]["account"]["enum"],
        json!(["work", "personal"]),
        "{asked}"
    );
    assert_eq!(accounts_left(&app).await, ["p-2", "w-1"]);
}

/// A tools/call as alice from a client that declared `elicitation`.
pub(crate) async fn call_declaring(
    app: &TestApp,
    elicitation: Value,
    tool: &str,
    args: Value,
) -> (u16, Value) {
    let mut body = request("tools/call", json!({"name": tool, "arguments": args}));
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": elicitation});
    read(
        app.mcp_request(Some(&app.token("alice")), &body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn a_client_without_form_elicitation_is_told_to_name_the_account() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    let args = json!({"provider": "demo"});
    // One account: nothing to ask, nothing changes.
    let (_, one) = call_declaring(&app, json!({"url": {}}), "connect", args.clone()).await;
    assert_eq!(one["result"]["resultType"], "complete", "{one}");

    store(&app, "p-2", "personal", CLIENT_ID).await;
    for tool in ["connect", "whoami", "disconnect"] {
        let (status, body) = call_declaring(&app, json!({"url": {}}), tool, args.clone()).await;
        assert_eq!(status, 400, "{tool}: {body}");
        assert_eq!(body["error"]["code"], -32021, "{tool}: {body}");
        assert_eq!(
            body["error"]["data"]["requiredCapabilities"],
            json!({"elicitation": {"form": {}}}),
            "{tool}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("`account`"), "{tool}: {body}");
        assert!(
            message.contains("work") && message.contains("personal"),
            "{tool}: {body}"
        );
    }
    // Named, it goes on.
    let named = json!({"provider": "demo", "account": "personal"});
    let (_, body) = call_declaring(&app, json!({"url": {}}), "connect", named).await;
    assert_eq!(
        body["result"]["structuredContent"]["account_id"], "p-2",
        "{body}"
    );
    // An empty `elicitation` object declares form mode: the question.
    let (_, asked) = call_declaring(&app, json!({}), "connect", args).await;
    form(&asked);
    assert_eq!(accounts_left(&app).await, ["p-2", "w-1"]);
}

/// The answer to a confirmed disconnect was lost and the client retries:
/// the account is gone, and that is what it hears — not a question about
/// the account left.
#[tokio::test]
async fn a_retry_after_the_account_went_says_it_is_gone() {
    let app = spawn_app().await;
    store(&app, "w-1", "work", CLIENT_ID).await;
    store(&app, "p-2", "personal", CLIENT_ID).await;
    let args = json!({"provider": "demo"});
    let asked = disconnect(&app, args.clone(), json!({})).await;
    form(&asked);
    let state = asked["result"]["requestState"].as_str().unwrap();
    let chosen = disconnect(&app, args.clone(), choose(state, "work")).await;
    let state = confirmation(&chosen, "work").to_owned();
    let gone = disconnect(&app, args.clone(), confirm(&state)).await;
    assert_eq!(
        gone["result"]["structuredContent"]["connection"], "disconnected",
        "{gone}"
    );
    let again = disconnect(&app, args, confirm(&state)).await;
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    assert_eq!(
        again["result"]["structuredContent"]["connection"], "not_connected",
        "{again}"
    );
    // Of that account: the user's other one is still connected.
    let text = again["result"]["content"].to_string();
    assert!(
        text.contains("That Demo account is no longer connected"),
        "{again}"
    );
    assert!(!text.contains("No Demo account"), "{again}");
    assert_eq!(accounts_left(&app).await, ["p-2"]);
}

/// Two accounts labelled alike: naming that label never disconnects the
/// oldest of them. The user is asked which, each choice naming its
/// account by id, and the confirmation names the one chosen; a client that
/// cannot ask gets a tool error, and nothing is removed.
#[tokio::test]
async fn a_label_two_accounts_share_is_asked_about_not_taken_for_the_oldest() {
    let app = spawn_app().await;
    store(&app, "a-1", "alice", CLIENT_ID).await;
    store(&app, "a-2", "alice", CLIENT_ID).await;
    let args = json!({"provider": "demo", "account": "alice"});

    let (_, no_form) = call_declaring(&app, json!({"url": {}}), "disconnect", args.clone()).await;
    assert_eq!(no_form["result"]["isError"], true, "{no_form}");
    let refused = &no_form["result"]["structuredContent"];
    assert_eq!(refused["error"]["kind"], "refused", "{no_form}");
    assert_eq!(refused["connection"], "kept", "{no_form}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("alice (id a-2)"),
        "{no_form}"
    );

    let asked = disconnect(&app, args.clone(), json!({})).await;
    assert!(
        asked["result"]["inputRequests"]["confirm_disconnect"].is_null(),
        "no confirmation before the account is chosen: {asked}"
    );
    assert_eq!(
        form(&asked)["requestedSchema"]["properties"]["account"]["enum"],
        json!(["alice (id a-1)", "alice (id a-2)"]),
        "{asked}"
    );
    let state = asked["result"]["requestState"].as_str().unwrap();
    let chosen = disconnect(&app, args.clone(), choose(state, "alice (id a-2)")).await;
    let state = confirmation(&chosen, "alice (id a-2)");
    let gone = disconnect(&app, args, confirm(state)).await;
    let done = &gone["result"]["structuredContent"];
    assert_eq!(done["connection"], "disconnected", "{gone}");
    assert_eq!(done["account_id"], "a-2", "{gone}");
    assert_eq!(accounts_left(&app).await, ["a-1"]);
}
