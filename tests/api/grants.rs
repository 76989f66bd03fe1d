//! Per-client grants: a connection made through one MCP client is used by
//! another client of the same user only after the user allowed it on the
//! approval page; "remove access" asks it again; Deny is a decline; the
//! client that connected is never asked; `per_user` turns it off.

use serde_json::{Value, json};

use crate::{
    browser::{Browser, Page},
    full_flow::connect_demo,
    helpers::{CLIENT_ID, TestApp, count, spawn_app, spawn_app_with},
};

const OTHER: &str = "other-client";

async fn whoami_as(app: &TestApp, client: &str, extra: Value) -> Value {
    let mut params = json!({"name": "whoami", "arguments": {"provider": "demo"}});
    if let Value::Object(extra) = extra {
        params.as_object_mut().unwrap().extend(extra);
    }
    let (status, body) = app.mcp_as(client, "alice", "tools/call", params).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// The first call of `client`: `input_required` to the approval page.
/// Returns (url, requestState, the elicitation's message).
pub async fn asked(app: &TestApp, client: &str) -> (String, String, String) {
    let body = whoami_as(app, client, json!({})).await;
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let params = &body["result"]["inputRequests"]["connect_demo"]["params"];
    assert_eq!(params["mode"], "url", "{body}");
    (
        params["url"].as_str().unwrap().to_owned(),
        body["result"]["requestState"].as_str().unwrap().to_owned(),
        params["message"].as_str().unwrap().to_owned(),
    )
}

pub async fn retry(app: &TestApp, client: &str, state: &str, action: &str) -> Value {
    whoami_as(
        app,
        client,
        json!({"requestState": state, "inputResponses": {"connect_demo": {"action": action}}}),
    )
    .await
}

/// `client` is asked, alice allows it on the approval page, and its retry
/// completes as octo.
async fn approved_by_alice(app: &TestApp, client: &str) {
    let (url, state, _) = asked(app, client).await;
    let browser = Browser::new(app);
    let page = approval_page(&browser, &url).await;
    browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    completed_as_octo(&retry(app, client, &state, "accept").await);
}

fn completed_as_octo(body: &Value) {
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_ne!(body["result"]["isError"], true, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
}

/// Opens an approval link as alice (signing in on the way if need be) and
/// returns the approval page.
pub async fn approval_page(browser: &Browser, url: &str) -> Page {
    let mut page = browser.get(url).await;
    if page.status == 303
        && page
            .location
            .as_deref()
            .is_some_and(|l| !l.starts_with("/connect/consent"))
    {
        page = browser.sign_in_from(page, "alice").await;
    }
    while page.status == 303 {
        page = browser.follow(&page).await;
    }
    assert_eq!(page.status, 200, "{}", page.body);
    page
}

#[tokio::test]
async fn another_client_is_asked_once_the_connecting_client_never() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    // The client that connected is granted by that consent.
    completed_as_octo(&whoami_as(&app, CLIENT_ID, json!({})).await);

    let (url, state, message) = asked(&app, OTHER).await;
    assert!(
        url.starts_with(&format!("{}/connect?ticket=", app.base)),
        "{url}"
    );
    // It names the client, not the account: the client reading it is not
    // approved for that (the page says which it is).
    assert!(
        message.contains(OTHER) && !message.contains("octo"),
        "{message}"
    );
    // Not yet approved: the retry asks again, with the same link.
    let again = retry(&app, OTHER, &state, "accept").await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(
        again["result"]["inputRequests"]["connect_demo"]["params"]["url"], url,
        "{again}"
    );
    let state = again["result"]["requestState"].as_str().unwrap().to_owned();

    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    assert!(
        page.body
            .contains(&format!("{OTHER} wants to use your Demo account octo")),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(">Allow<") && page.body.contains(">Deny<"),
        "{}",
        page.body
    );
    let flows_before = count(&app, "SELECT count(*) FROM oauth_flows").await;
    let done = browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(done.status, 200, "no provider round trip: {}", done.body);
    assert_eq!(
        count(&app, "SELECT count(*) FROM oauth_flows").await,
        flows_before
    );
    completed_as_octo(&retry(&app, OTHER, &state, "accept").await);
    completed_as_octo(&whoami_as(&app, OTHER, json!({})).await);

    // The connections page lists both clients; remove the other one's access.
    let list = browser.get("/connections").await;
    assert!(
        list.body.contains(OTHER) && list.body.contains(CLIENT_ID),
        "{}",
        list.body
    );
    let form = remove_form(&list, OTHER);
    let removed = browser.post_form("/connections/access/remove", &form).await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    let list = browser.get("/connections").await;
    assert!(!list.body.contains(OTHER), "{}", list.body);
    asked(&app, OTHER).await;
    completed_as_octo(&whoami_as(&app, CLIENT_ID, json!({})).await);

    // Removing the last client leaves the connection.
    let form = remove_form(&list, CLIENT_ID);
    browser.post_form("/connections/access/remove", &form).await;
    assert_eq!(count(&app, "SELECT count(*) FROM client_grants").await, 0);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    let list = browser.get("/connections").await;
    assert!(list.body.contains("octo"), "{}", list.body);
}

/// The hidden fields of the "remove access" form for `client`.
pub fn remove_form(page: &Page, client: &str) -> Vec<(String, String)> {
    let marker = format!("name=\"client\" value=\"{client}\"");
    let at = page
        .body
        .find(&marker)
        .unwrap_or_else(|| panic!("{}", page.body));
    let start = page.body[..at].rfind("<form").unwrap();
    let end = at + page.body[at..].find("</form>").unwrap() + "</form>".len();
    crate::browser::form_fields(&page.body[start..end], "/connections/access/remove").unwrap()
}

#[tokio::test]
async fn deny_on_the_approval_page_tells_the_client_it_is_not_allowed() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (url, state, _) = asked(&app, OTHER).await;
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    let denied = browser
        .submit(&page, "/connect", &[("action", "cancel")])
        .await;
    assert_eq!(denied.status, 200, "{}", denied.body);
    assert!(denied.body.contains("did not allow it"), "{}", denied.body);
    let body = retry(&app, OTHER, &state, "accept").await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let error = &body["result"]["structuredContent"]["error"];
    assert_eq!(error["kind"], "client_not_approved", "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("did not allow this client"), "{body}");
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM client_grants WHERE client_id = 'other-client'"
        )
        .await,
        0
    );
    // The link is spent.
    assert_eq!(browser.get(&url).await.status, 410, "a used link");
    // Recorded as the refusal of a client, on which connection.
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'consent_cancelled' \
                   AND detail->>'at' = 'approval' AND detail->>'client_id' = 'other-client' \
                   AND detail ? 'connection_id'";
    assert_eq!(count(&app, audited).await, 1);
}

#[tokio::test]
async fn an_approval_link_opened_by_someone_else_grants_nothing() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (url, _, _) = asked(&app, OTHER).await;
    let mallory = Browser::new(&app);
    let opened = mallory.get(&url).await;
    let page = mallory.sign_in_from(opened, "mallory").await;
    let page = mallory.follow(&page).await;
    let page = if page.status == 303 {
        mallory.follow(&page).await
    } else {
        page
    };
    assert_eq!(page.status, 403, "{}", page.body);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM client_grants WHERE client_id = 'other-client'"
        )
        .await,
        0
    );
}

/// Listing the user's accounts is no use of them, but a client the user
/// never approved for an account learns only that it exists: not which
/// account (often an e-mail address), its scopes or its use.
#[tokio::test]
async fn an_unapproved_client_sees_that_an_account_exists_but_not_which() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let listed = |client: &'static str| {
        let app = &app;
        async move {
            let params = json!({"name": "connections_list", "arguments": {}});
            let (_, tool) = app.mcp_as(client, "alice", "tools/call", params).await;
            let params = json!({"uri": "connections://mine"});
            let (_, resource) = app.mcp_as(client, "alice", "resources/read", params).await;
            let text = resource["result"]["contents"][0]["text"].as_str().unwrap();
            let resource: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                resource["connections"], tool["result"]["structuredContent"]["connections"],
                "the resource says what the tool says"
            );
            tool
        }
    };

    let other = listed(OTHER).await;
    let entry = &other["result"]["structuredContent"]["connections"][0];
    assert_eq!(entry["provider"], "demo", "{other}");
    assert_eq!(entry["approved_for_this_client"], false, "{other}");
    for hidden in ["account", "account_id", "scopes", "last_used_at"] {
        assert!(entry.get(hidden).is_none(), "{hidden}: {other}");
    }
    assert!(!other.to_string().contains("octo"), "{other}");
    let providers = &other["result"]["structuredContent"]["providers"];
    assert_eq!(providers[0]["connected_accounts"], 1, "{other}");

    let own = listed(CLIENT_ID).await;
    let entry = &own["result"]["structuredContent"]["connections"][0];
    assert_eq!(entry["approved_for_this_client"], true, "{own}");
    assert_eq!(entry["account"], "octo", "{own}");

    // Once the user allowed it, the other client sees the account too.
    approved_by_alice(&app, OTHER).await;
    let other = listed(OTHER).await;
    let entry = &other["result"]["structuredContent"]["connections"][0];
    assert_eq!(entry["approved_for_this_client"], true, "{other}");
    assert_eq!(entry["account"], "octo", "{other}");
}

#[tokio::test]
async fn per_user_grants_let_every_client_of_the_user_in() {
    let app = spawn_app_with(|t| {
        t.insert("grants".into(), "per_user".into());
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    completed_as_octo(&whoami_as(&app, OTHER, json!({})).await);
    let params = json!({"name": "connections_list", "arguments": {}});
    let (_, listed) = app.mcp_as(OTHER, "alice", "tools/call", params).await;
    let entry = &listed["result"]["structuredContent"]["connections"][0];
    assert_eq!(entry["approved_for_this_client"], true, "{listed}");
    assert_eq!(entry["account"], "octo", "{listed}");
}

#[tokio::test]
async fn a_client_not_approved_for_a_connection_cannot_disconnect_it() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let disconnect = || async {
        let params = json!({"name": "disconnect", "arguments": {"provider": "demo"}});
        let (status, body) = app.mcp_as(OTHER, "alice", "tools/call", params).await;
        assert_eq!(status, 200, "{body}");
        body
    };

    // Its own yes/no form would be no approval: it would answer it itself.
    let refused = disconnect().await;
    assert_eq!(refused["result"]["resultType"], "complete", "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let outcome = &refused["result"]["structuredContent"];
    assert_eq!(outcome["error"]["kind"], "client_not_approved", "{refused}");
    assert_eq!(outcome["connection"], "kept", "{refused}");
    assert_eq!(outcome["next_step"], "ask_user", "{refused}");
    assert!(
        outcome["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("{}/connections", app.base))),
        "{refused}"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    // Nor does it learn which account it is, as connections_list promises.
    for hidden in ["account", "account_id"] {
        assert!(outcome.get(hidden).is_none(), "{hidden}: {refused}");
    }
    let params = json!({"name": "connections_list", "arguments": {}});
    let (_, own) = app.mcp_as(CLIENT_ID, "alice", "tools/call", params).await;
    let account_id = own["result"]["structuredContent"]["connections"][0]["account_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for named in ["octo", account_id.as_str()] {
        assert!(!refused.to_string().contains(named), "{named}: {refused}");
    }

    // Once the user allowed it, it is asked to confirm like any client.
    approved_by_alice(&app, OTHER).await;
    let confirm = disconnect().await;
    assert_eq!(
        confirm["result"]["resultType"], "input_required",
        "{confirm}"
    );
    assert_eq!(
        confirm["result"]["inputRequests"]["confirm_disconnect"]["params"]["mode"], "form",
        "{confirm}"
    );
}

/// A client the user never approved learns nothing and changes nothing:
/// the connection's expired token is not refreshed for it, nor is the
/// connection marked used, before the user is asked.
#[tokio::test]
async fn an_unapproved_client_causes_no_refresh_and_no_use() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 minute', last_used_at = NULL")
        .execute(&app.db)
        .await
        .unwrap();
    let before: (Vec<u8>, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT access_token, last_used_at FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let (_, _, message) = asked(&app, OTHER).await;
    assert!(message.contains("not yet allowed"), "{message}");
    let after: (Vec<u8>, Option<chrono::DateTime<chrono::Utc>>) =
        sqlx::query_as("SELECT access_token, last_used_at FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(after, before, "no refresh, no use");
    // The client that connected still gets it refreshed.
    completed_as_octo(&whoami_as(&app, CLIENT_ID, json!({})).await);
    let refreshed: Vec<u8> = sqlx::query_scalar("SELECT access_token FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_ne!(refreshed, before.0);
}

/// `whoami demo` from `client`, which declares form elicitation only: it
/// cannot open an approval link.
async fn whoami_without_links(app: &TestApp, client: &str) -> (u16, Value) {
    let mut body = crate::helpers::request(
        "tools/call",
        json!({"name": "whoami", "arguments": {"provider": "demo"}}),
    );
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {"form": {}}});
    let token = app.token_for(client, "alice");
    crate::helpers::read(app.mcp_request(Some(&token), &body).send().await.unwrap()).await
}

/// A client that cannot open links is told to have the user allow it on
/// the connections page, where its request waits (once, however often it
/// calls); Allow there lets its next call through, Deny is its answer;
/// nobody else can answer it.
#[tokio::test]
async fn a_client_that_cannot_open_links_is_allowed_on_the_connections_page() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    for _ in 0..2 {
        let (status, body) = whoami_without_links(&app, OTHER).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["code"], -32021, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("{}/connections", app.base)),
            "{message}"
        );
        assert!(message.contains("Allow it"), "{message}");
        assert!(!message.contains("octo"), "no account named: {message}");
    }
    let waiting = "SELECT count(*) FROM connect_tickets WHERE connection_id IS NOT NULL";
    assert_eq!(
        count(&app, waiting).await,
        1,
        "one request, however often asked"
    );

    // Someone else signed in cannot answer it, even with a form of their own.
    let alice = Browser::new(&app);
    alice.sign_in("alice").await;
    let page = alice.get("/connections").await;
    assert!(
        page.body.contains("asks to use this account"),
        "{}",
        page.body
    );
    assert!(page.body.contains(OTHER), "{}", page.body);
    let fields = crate::browser::form_fields(&page.body, "/connections/access/answer").unwrap();
    let request = fields
        .iter()
        .find(|(k, _)| k == "request")
        .unwrap()
        .1
        .clone();
    let mallory = Browser::new(&app);
    mallory.sign_in("mallory").await;
    let own = mallory.get("/connections").await;
    assert!(!own.body.contains("asks to use"), "{}", own.body);
    let forged = |csrf: String| {
        let (mallory, request) = (&mallory, request.clone());
        async move {
            mallory
                .post_form(
                    "/connections/access/answer",
                    &[
                        ("request".to_owned(), request),
                        ("decision".to_owned(), "allow".to_owned()),
                        ("csrf".to_owned(), csrf),
                    ],
                )
                .await
        }
    };
    assert_eq!(forged("x".repeat(43)).await.status, 403);
    // Even with a form token of her own session for that request (made
    // here from her session's secret, as the server would), the request is
    // not hers to answer.
    let secret: Vec<u8> =
        sqlx::query_scalar("SELECT csrf_secret FROM web_sessions WHERE subject = 'mallory'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    let own = mcp_connect::web::csrf::token(&secret, &format!("answer-access:{request}"));
    let refused = forged(own).await;
    assert_eq!(refused.status, 410, "{}", refused.body);
    let granted = "SELECT count(*) FROM client_grants WHERE client_id = 'other-client'";
    assert_eq!(count(&app, granted).await, 0);

    let allowed = alice
        .submit(
            &page,
            "/connections/access/answer",
            &[("decision", "allow")],
        )
        .await;
    assert_eq!(allowed.status, 303, "{}", allowed.body);
    assert_eq!(count(&app, granted).await, 1);
    let (_, body) = whoami_without_links(&app, OTHER).await;
    completed_as_octo(&body);
    let listed = alice.get("/connections").await;
    assert!(!listed.body.contains("asks to use"), "{}", listed.body);

    // Deny: the client is told so while its request would have lived.
    let third = "third-client";
    let (status, _) = whoami_without_links(&app, third).await;
    assert_eq!(status, 400);
    let page = alice.get("/connections").await;
    let denied = alice
        .submit(&page, "/connections/access/answer", &[("decision", "deny")])
        .await;
    assert_eq!(denied.status, 303, "{}", denied.body);
    let (status, body) = whoami_without_links(&app, third).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(body.to_string().contains("client_not_approved"), "{body}");
    // An answer given twice is an answer to nothing.
    let again = alice
        .submit(
            &page,
            "/connections/access/answer",
            &[("decision", "allow")],
        )
        .await;
    assert_eq!(again.status, 410, "{}", again.body);
    let third_granted = "SELECT count(*) FROM client_grants WHERE client_id = 'third-client'";
    assert_eq!(count(&app, third_granted).await, 0);
}

/// Two approval links of one client, both allowed (two tabs): one grant,
/// one `grant_created` in the audit, and both pages say it is allowed.
#[tokio::test]
async fn a_client_allowed_through_one_of_its_links_waits_no_longer() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (first, _, _) = asked(&app, OTHER).await;
    let (_second, state, _) = asked(&app, OTHER).await;
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &first).await;
    browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    // Its other link is still unused, but the client is allowed: nothing
    // asks for an answer on the connections page.
    let listed = browser.get("/connections").await;
    assert!(listed.body.contains(OTHER), "{}", listed.body);
    assert!(!listed.body.contains("asks to use"), "{}", listed.body);
    completed_as_octo(&retry(&app, OTHER, &state, "accept").await);
}

#[tokio::test]
async fn allowing_a_client_twice_records_one_grant() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (first, _, _) = asked(&app, OTHER).await;
    let (second, state, _) = asked(&app, OTHER).await;
    assert_ne!(first, second);
    let browser = Browser::new(&app);
    for url in [&first, &second] {
        let page = approval_page(&browser, url).await;
        let allowed = browser
            .submit(&page, "/connect", &[("action", "continue")])
            .await;
        assert_eq!(allowed.status, 200, "{}", allowed.body);
        assert!(allowed.body.contains("allowed"), "{}", allowed.body);
    }
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'grant_created'";
    assert_eq!(count(&app, audited).await, 1);
    completed_as_octo(&retry(&app, OTHER, &state, "accept").await);
}

/// Allowing a client on an account while the account is being
/// disconnected: one waits for the other, never each for the other (a
/// disconnect holds the connection, then deletes its approval tickets).
#[tokio::test]
async fn allowing_a_client_while_its_account_is_disconnected_waits_instead_of_deadlocking() {
    use mcp_connect::{connect::grants::Allowed, domain::UserRef};
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    asked(&app, OTHER).await;
    let (ticket_id, connection_id): (uuid::Uuid, uuid::Uuid) = sqlx::query_as(
        "SELECT id, connection_id FROM connect_tickets WHERE connection_id IS NOT NULL",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    let ticket = mcp_connect::db::tickets::find_by_id(&app.db, ticket_id)
        .await
        .unwrap()
        .unwrap();
    // A disconnect at its DELETE: the connection's row held with the lock
    // a DELETE takes (FOR UPDATE)...
    let mut disconnect = app.db.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM connections WHERE id = $1 FOR UPDATE")
        .bind(connection_id)
        .execute(&mut *disconnect)
        .await
        .unwrap();
    let service = app.state.connect.clone();
    let issuer = app.dev.issuer();
    let allowing = tokio::spawn(async move {
        service
            .allow_client(UserRef::new(&issuer, "alice"), &ticket)
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // ...then the cascade to its tickets, and the row itself.
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        sqlx::query("DELETE FROM connect_tickets WHERE id = $1")
            .bind(ticket_id)
            .execute(&mut *disconnect),
    )
    .await
    .expect("the ticket is not held by the allow")
    .expect("no deadlock");
    sqlx::query("DELETE FROM connections WHERE id = $1")
        .bind(connection_id)
        .execute(&mut *disconnect)
        .await
        .unwrap();
    disconnect.commit().await.unwrap();
    let allowed = allowing.await.unwrap().expect("no deadlock");
    assert!(
        matches!(allowed, Allowed::ConnectionGone),
        "the account is gone"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM client_grants").await, 0);
}

/// Allow clicked twice: both answers say the client is allowed (the second
/// finds the grant the first stored), not that the link was used.
#[tokio::test]
async fn a_second_allow_says_allowed() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (url, state, _) = asked(&app, OTHER).await;
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    for _ in 0..2 {
        let answer = browser
            .submit(&page, "/connect", &[("action", "continue")])
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert!(answer.body.contains("allowed"), "{}", answer.body);
    }
    assert_eq!(count(&app, "SELECT count(*) FROM client_grants").await, 2);
    completed_as_octo(&retry(&app, OTHER, &state, "accept").await);
}

/// Allow or Deny pressed twice on the connections page (a double click, a
/// resubmitted form): the second finds its answer given and goes back to
/// the list, not to "this link has expired"; one audit row each.
#[tokio::test]
async fn an_answer_given_twice_on_the_connections_page_is_no_expired_link() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let alice = Browser::new(&app);
    alice.sign_in("alice").await;
    for (client, decision) in [(OTHER, "allow"), ("third-client", "deny")] {
        let (status, _) = whoami_without_links(&app, client).await;
        assert_eq!(status, 400);
        let page = alice.get("/connections").await;
        for _ in 0..2 {
            let answered = alice
                .submit(
                    &page,
                    "/connections/access/answer",
                    &[("decision", decision)],
                )
                .await;
            assert_eq!(answered.status, 303, "{decision}: {}", answered.body);
            assert_eq!(answered.header("location"), Some("/connections"));
        }
    }
    let granted = "SELECT count(*) FROM client_grants WHERE client_id = 'other-client'";
    assert_eq!(count(&app, granted).await, 1);
    let audited =
        "SELECT count(*) FROM audit_events WHERE kind IN ('grant_created', 'consent_cancelled')";
    assert_eq!(count(&app, audited).await, 2);
    let (_, body) = whoami_without_links(&app, OTHER).await;
    completed_as_octo(&body);
    let (status, body) = whoami_without_links(&app, "third-client").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("client_not_approved"), "{body}");
}

/// A client waiting (on accept) for its approval while the user disconnects
/// the account instead: the retry asks the user to connect, not "Internal
/// error" (the approval ticket went with the connection, and a new one
/// cannot name it).
#[tokio::test]
async fn a_retry_waiting_for_an_approval_whose_account_is_disconnected_asks_to_connect() {
    let app = spawn_app_with(|t| {
        t.insert(
            "flow".into(),
            toml::Value::Table(toml::from_str("connect_wait_ms = 3000").unwrap()),
        );
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    let (_, state, _) = asked(&app, OTHER).await;
    let accepted = crate::helpers::request(
        "tools/call",
        json!({"name": "whoami", "arguments": {"provider": "demo"}, "requestState": state,
               "inputResponses": {"connect_demo": {"action": "accept"}}}),
    );
    let sent = app
        .mcp_request(Some(&app.token_for(OTHER, "alice")), &accepted)
        .send();
    let waiting = tokio::spawn(async move { crate::helpers::read(sent.await.unwrap()).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // The user disconnects it (as the pages and the tool do: the row goes,
    // its grants and approval tickets with it).
    sqlx::query("DELETE FROM connections")
        .execute(&app.db)
        .await
        .unwrap();
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let url = body["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap_or_default();
    assert!(url.contains("/connect?ticket="), "a connect link: {body}");
    let approvals = "SELECT count(*) FROM connect_tickets WHERE connection_id IS NOT NULL";
    assert_eq!(count(&app, approvals).await, 0);
    // Connected again through that link, the retry completes with the new
    // account: no question about the one that is gone.
    let browser = Browser::new(&app);
    let to_provider = crate::full_flow::open_and_continue(&browser, url, "alice").await;
    crate::full_flow::approve_at_demo(&browser, &to_provider, "octo").await;
    let state = body["result"]["requestState"].as_str().unwrap();
    completed_as_octo(&retry(&app, OTHER, state, "accept").await);
}

/// An approval ticket for a connection deleted since the call read it (the
/// user disconnected it in another tab, in between) is not made, and no
/// error is: the caller then asks the user to connect, as when the
/// connection is found gone after a wait.
#[tokio::test]
async fn no_approval_ticket_names_a_connection_deleted_since_it_was_read() {
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    let user = mcp_connect::domain::UserRef::new(&issuer, "alice");
    let provider = mcp_connect::domain::ProviderName::parse("demo").unwrap();
    let issued = mcp_connect::connect::tickets::issue_approval(
        &app.state.connect,
        user,
        "another-client",
        &provider,
        uuid::Uuid::new_v4(),
    )
    .await
    .expect("no error");
    assert!(issued.is_none());
    assert_eq!(count(&app, "SELECT count(*) FROM connect_tickets").await, 0);
}

/// A client's own choice of id is kept in every audit row by one rule
/// (a printable prefix of 128 characters: a metadata document's URL, as
/// a rule, whole), so the rows of one client match each other: the
/// ticket's, the approval's and the removal's.
#[tokio::test]
async fn every_audit_row_of_a_long_client_id_keeps_the_same_prefix() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let client = format!("long-client-{}", "c".repeat(300));
    let (url, state, _) = asked(&app, &client).await;
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    browser
        .submit(&page, "/connect", &[("action", "continue")])
        .await;
    completed_as_octo(&retry(&app, &client, &state, "accept").await);
    let list = browser.get("/connections").await;
    let form = remove_form(&list, &client);
    let removed = browser.post_form("/connections/access/remove", &form).await;
    assert_eq!(removed.status, 303, "{}", removed.body);

    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT kind, detail->>'client_id' FROM audit_events \
         WHERE kind IN ('ticket_issued', 'grant_created', 'grant_removed') \
           AND detail->>'client_id' LIKE 'long-client-%' ORDER BY at",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    let kinds: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["ticket_issued", "grant_created", "grant_removed"]);
    let kept = format!("{}…", &client[..128]);
    for (kind, id) in &rows {
        assert_eq!(id.as_deref(), Some(kept.as_str()), "{kind}");
    }
}

/// A client never approved for an account does not get it by sending the
/// person to connect "another" account and their picking that one at the
/// provider (its chooser, or whoever is signed in there): the connect
/// stores into the existing connection without granting the client, and
/// its retry asks for approval on the page that names the account; once
/// allowed, the next retry completes with it; denied, it is a decline.
#[tokio::test]
async fn connecting_an_account_connected_already_does_not_approve_the_client() {
    for (answer, ended) in [("continue", "octo"), ("cancel", "client_not_approved")] {
        let app = spawn_app().await;
        connect_demo(&app, "alice", "octo").await;
        let (browser, page, state) = another_account_that_is_octo(&app).await;
        let answered = browser
            .submit(&page, "/connect", &[("action", answer)])
            .await;
        assert!(answered.status < 400, "{answer}: {}", answered.body);
        let (_, body) = app
            .mcp_as(OTHER, "alice", "tools/call", another_account(Some(&state)))
            .await;
        let result = &body["result"];
        assert_eq!(result["resultType"], "complete", "{answer}: {body}");
        if answer == "continue" {
            assert_ne!(result["isError"], true, "{body}");
            assert_eq!(result["structuredContent"]["account"], ended, "{body}");
        } else {
            assert_eq!(result["isError"], true, "{body}");
            assert_eq!(
                result["structuredContent"]["error"]["kind"], ended,
                "{body}"
            );
        }
    }
}

/// `connect {another_account: true}` at demo, first (`None`) or as the
/// retry of round `state`, the person having said they were done.
fn another_account(state: Option<&str>) -> Value {
    let args = json!({"provider": "demo", "another_account": true});
    match state {
        None => json!({"name": "connect", "arguments": args}),
        Some(state) => json!({"name": "connect", "arguments": args, "requestState": state,
                              "inputResponses": {"connect_demo": {"action": "accept"}}}),
    }
}

/// `OTHER` asks alice to connect another demo account, and she connects
/// octo again, which she had connected through another client: the
/// approval page its retry leads to (checked to name octo by label and id,
/// with no grant made), and the `requestState` to retry with once she
/// answered it.
async fn another_account_that_is_octo(app: &TestApp) -> (Browser, Page, String) {
    use crate::full_flow::{approve_at_demo, open_and_continue};
    let (status, body) = app
        .mcp_as(OTHER, "alice", "tools/call", another_account(None))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let url = body["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let state = body["result"]["requestState"].as_str().unwrap().to_owned();
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    approve_at_demo(&browser, &to_provider, "octo").await;
    assert_eq!(count(app, "SELECT count(*) FROM connections").await, 1);
    let granted = "SELECT count(*) FROM client_grants WHERE client_id = 'other-client'";
    assert_eq!(count(app, granted).await, 0, "not approved by the connect");

    // Unused so far, as far as the row says: a retry that opened its token
    // would note the use.
    sqlx::query("UPDATE connections SET last_used_at = NULL")
        .execute(&app.db)
        .await
        .unwrap();
    let (_, retried) = app
        .mcp_as(OTHER, "alice", "tools/call", another_account(Some(&state)))
        .await;
    assert_eq!(
        retried["result"]["resultType"], "input_required",
        "asked to approve: {retried}"
    );
    let used = "SELECT count(*) FROM connections WHERE last_used_at IS NOT NULL";
    assert_eq!(
        count(app, used).await,
        0,
        "not opened for a client not approved"
    );
    let url = retried["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap_or_default();
    let browser = Browser::new(app);
    let page = approval_page(&browser, url).await;
    let account_id: String = sqlx::query_scalar("SELECT account_id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    // By its label, and by its id (labels may be alike).
    assert!(
        page.body.contains("octo"),
        "the page names it: {}",
        page.body
    );
    assert!(page.body.contains(&account_id), "{}", page.body);
    let state = retried["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    (browser, page, state)
}

/// A 2025-11-25 client's retry after the person pressed Deny on its
/// approval link is told so (its retry names no round to find the link
/// by), not handed another link.
#[tokio::test]
async fn a_legacy_clients_retry_after_a_deny_is_a_decline() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {"provider": "demo"}}});
    let legacy_call = || async {
        let response = app
            .http
            .post(app.mcp_url())
            .bearer_auth(app.token_for(OTHER, "alice"))
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-11-25")
            .json(&call)
            .send()
            .await
            .unwrap();
        crate::helpers::read(response).await.1
    };
    let asked = legacy_call().await;
    assert_eq!(asked["error"]["code"], -32042, "{asked}");
    let url = asked["error"]["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let browser = Browser::new(&app);
    let page = approval_page(&browser, &url).await;
    browser
        .submit(&page, "/connect", &[("action", "cancel")])
        .await;

    let retried = legacy_call().await;
    assert_eq!(retried["result"]["isError"], true, "{retried}");
    assert_eq!(
        retried["result"]["structuredContent"]["error"]["kind"], "client_not_approved",
        "{retried}"
    );
    let tickets = "SELECT count(*) FROM connect_tickets WHERE client_id = 'other-client'";
    assert_eq!(count(&app, tickets).await, 1, "no new link");
}

/// Allow, then Deny, whose page fails after the answer was stored (the
/// session's note of its pending link cannot be cleared): each answer is
/// recorded all the same, and the button pressed again records it no
/// second time (it finds the answer given, and recorded nothing before).
#[tokio::test]
async fn an_answer_whose_page_failed_after_it_was_stored_is_recorded_once() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let browser = Browser::new(&app);
    for (action, kind) in [
        ("continue", "grant_created"),
        ("cancel", "consent_cancelled"),
    ] {
        let client = format!("{OTHER}-{action}");
        let (url, _, _) = asked(&app, &client).await;
        let page = approval_page(&browser, &url).await;
        crate::helpers::refuse(&app.db, "web_sessions", "UPDATE OF pending_ticket_id").await;
        let failed = browser
            .submit(&page, "/connect", &[("action", action)])
            .await;
        assert!(failed.status >= 500, "{action}: {}", failed.body);
        crate::helpers::allow(&app.db, "web_sessions").await;
        let again = browser
            .submit(&page, "/connect", &[("action", action)])
            .await;
        assert_eq!(again.status, 200, "{action}: {}", again.body);
        let audited = format!("SELECT count(*) FROM audit_events WHERE kind = '{kind}'");
        assert_eq!(count(&app, &audited).await, 1, "{action}");
    }
}
