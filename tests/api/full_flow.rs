//! The whole connect flow as a user meets it: an MCP call, the URL
//! elicitation, a browser that signs in, consents and approves at the
//! provider, and the client's retry completing — then refresh, across
//! instances, and what happens when the provider stops honouring the grant.

use mcp_connect::domain::{ProviderName, UserRef};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    browser::{Browser, Page},
    helpers::{TestApp, count, spawn_app},
};

/// First round of a tool call: returns (url, requestState).
pub async fn elicit(
    app: &TestApp,
    subject: &str,
    tool: &str,
    args: Value,
    key: &str,
) -> (String, String) {
    let (status, body) = app.call_tool(subject, tool, args).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    let url = body["result"]["inputRequests"][key]["params"]["url"]
        .as_str()
        .expect("url")
        .to_owned();
    let state = body["result"]["requestState"]
        .as_str()
        .expect("state")
        .to_owned();
    (url, state)
}

/// The retry after the user said they were done.
pub async fn retry_accepted(
    app: &TestApp,
    subject: &str,
    tool: &str,
    args: Value,
    state: &str,
    key: &str,
) -> Value {
    let (status, body) = app
        .mcp(
            subject,
            "tools/call",
            json!({"name": tool, "arguments": args, "requestState": state,
            "inputResponses": {key: {"action": "accept"}}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Opens the elicitation URL in a fresh browser, signs in as `user` on the
/// way, and presses Continue. Returns the redirect to the provider.
pub async fn open_and_continue(browser: &Browser, url: &str, user: &str) -> Page {
    let opened = browser.get(url).await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    let mut page = browser.sign_in_from(opened, user).await;
    // Back to the link, then on to the consent page.
    while page.status == 303
        && !page
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with("/connect/consent"))
    {
        page = browser.follow(&page).await;
    }
    let consent = if page.status == 303 {
        browser.follow(&page).await
    } else {
        page
    };
    assert_eq!(consent.status, 200, "{}", consent.body);
    assert!(consent.body.contains("Continue"), "{}", consent.body);
    let to_provider = browser
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(to_provider.status, 303, "{}", to_provider.body);
    to_provider
}

/// Allows at the demo provider's page `to_provider` leads to, as
/// `account`: the redirect back to the callback, not yet followed.
pub async fn allow_at_demo(browser: &Browser, to_provider: &Page, account: &str) -> Page {
    let provider_page = browser.follow(to_provider).await;
    assert_eq!(provider_page.status, 200, "{}", provider_page.body);
    let back = browser
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", account), ("decision", "allow")],
        )
        .await;
    assert_eq!(back.status, 303, "{}", back.body);
    back
}

/// Denies at the demo provider's page `to_provider` leads to, as
/// `account`: the redirect back to the callback.
pub async fn deny_at_demo(browser: &Browser, to_provider: &Page, account: &str) -> Page {
    let provider_page = browser.follow(to_provider).await;
    browser
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", account), ("decision", "deny")],
        )
        .await
}

/// At the demo provider: Allow as `account`; returns the success page.
pub async fn approve_at_demo(browser: &Browser, to_provider: &Page, account: &str) -> Page {
    let back = allow_at_demo(browser, to_provider, account).await;
    let done = browser.follow(&back).await;
    assert_eq!(done.status, 200, "{}", done.body);
    done
}

/// Connects `subject`'s demo account through the real flow.
pub async fn connect_demo(app: &TestApp, subject: &str, account: &str) {
    let (url, state) = elicit(
        app,
        subject,
        "connect",
        json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, subject).await;
    approve_at_demo(&browser, &to_provider, account).await;
    let body = retry_accepted(
        app,
        subject,
        "connect",
        json!({"provider": "demo"}),
        &state,
        "connect_demo",
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
}

/// The code is spent once the callback completes its flow. A callback
/// page that runs past `web.page_timeout_secs` (its store held here at the
/// first write to `connections`) answers 503, but the exchange goes on to
/// its end: the connection is stored and on the record, and the client's
/// retry completes — not tokens issued at the provider and stored nowhere.
#[tokio::test]
async fn a_callback_past_its_page_time_limit_still_stores_the_connection() {
    let app = crate::helpers::spawn_app_with(|t| {
        let mut web = toml::Table::new();
        web.insert("page_timeout_secs".into(), 2.into());
        t.insert("web".into(), web.into());
    })
    .await;
    let (url, state) = elicit(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let back = allow_at_demo(&browser, &to_provider, "octo").await;

    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("LOCK TABLE connections IN SHARE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let callback = browser.follow(&back).await;
    assert_eq!(callback.status, 503, "{}", callback.body);
    // The page is gone; its store still waits for the table.
    tokio::time::sleep(Duration::from_millis(300)).await;
    holder.commit().await.unwrap();

    let stored =
        "SELECT count(*) FROM connections WHERE account_label = 'octo' AND status = 'active'";
    // The audit row is written after the commit: waited for too.
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'connected'";
    for _ in 0..100 {
        if count(&app, stored).await == 1 && count(&app, audited).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count(&app, stored).await, 1, "the connection was stored");
    assert_eq!(count(&app, audited).await, 1, "and is on the record");
    let body = retry_accepted(
        &app,
        "alice",
        "connect",
        json!({"provider": "demo"}),
        &state,
        "connect_demo",
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
}

#[tokio::test]
async fn whoami_completes_after_the_user_connects_in_the_browser() {
    let app = spawn_app().await;
    let (url, state) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let done = approve_at_demo(&browser, &to_provider, "octo").await;
    assert!(done.body.contains("Demo connected as"), "{}", done.body);

    let body = retry_accepted(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state,
        "connect_demo",
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_ne!(body["result"]["isError"], true, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "the provider's own answer: {body}"
    );

    // Later calls complete at once, with no new ticket.
    let (_, again) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        again["result"]["structuredContent"]["account"], "octo",
        "{again}"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connect_tickets").await, 1);
    // Bob is not alice: he is asked to connect his own.
    let (_, bob) = app
        .call_tool("bob", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(bob["result"]["resultType"], "input_required", "{bob}");
}

#[tokio::test]
async fn api_request_calls_the_provider_as_the_user() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "method": "POST", "path": "echo",
            "query": {"q": "x", "n": 2}, "body": {"hello": "world"}}),
        )
        .await;
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(result["body"]["method"], "POST", "{body}");
    assert_eq!(result["body"]["body"]["hello"], "world", "{body}");
}

#[tokio::test]
async fn the_phishing_link_does_nothing_for_bob_and_still_works_for_alice() {
    let app = spawn_app().await;
    let (url, state) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    // Bob, signed in, opens alice's link.
    let bob = Browser::new(&app);
    bob.sign_in("bob").await;
    let refused = bob.get(&url).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("another account"), "{}", refused.body);
    assert!(refused.location.is_none());
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'connect'"
        )
        .await,
        0
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    // Alice's own browser still completes with the same link.
    let alice = Browser::new(&app);
    let to_provider = open_and_continue(&alice, &url, "alice").await;
    approve_at_demo(&alice, &to_provider, "octo").await;
    let body = retry_accepted(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state,
        "connect_demo",
    )
    .await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
    let owners: Vec<String> = sqlx::query_scalar("SELECT subject FROM connections")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(owners, vec!["alice".to_owned()]);
}

#[tokio::test]
async fn reloading_a_decline_shows_the_decline_not_an_earlier_account() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    // Another account, declined at the provider.
    let args = json!({"provider": "demo", "another_account": true});
    let (url, _) = elicit(&app, "alice", "connect", args, "connect_demo").await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let back = deny_at_demo(&browser, &to_provider, "hubot").await;
    for attempt in ["first", "reload"] {
        let page = browser.follow(&back).await;
        assert_eq!(page.status, 200, "{attempt}: {}", page.body);
        assert!(
            page.body.contains("You declined access at Demo"),
            "{attempt}: {}",
            page.body
        );
        assert!(
            !page.body.contains("connected as"),
            "{attempt}: {}",
            page.body
        );
    }
}

#[tokio::test]
async fn deny_at_the_provider_makes_the_retry_say_declined() {
    let app = spawn_app().await;
    let (url, state) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let back = deny_at_demo(&browser, &to_provider, "octo").await;
    let page = browser.follow(&back).await;
    assert!(
        page.body.to_lowercase().contains("declined"),
        "{}",
        page.body
    );
    let body = retry_accepted(
        &app,
        "alice",
        "whoami",
        json!({"provider": "demo"}),
        &state,
        "connect_demo",
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

/// Makes the first `lost` commits that write new tokens to `connections`
/// end their connection, as Postgres restarting while the provider
/// answered would; `lose_commits`'s `last_value` counts the tries.
async fn lose_commits_of_new_tokens(app: &TestApp, lost: i64) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE SEQUENCE lose_commits;
         CREATE FUNCTION lose_commits() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF nextval('lose_commits') <= {lost} THEN
             PERFORM pg_terminate_backend(pg_backend_pid());
             PERFORM pg_sleep(1);
           END IF;
           RETURN NULL;
         END $$;
         CREATE CONSTRAINT TRIGGER lose_commits AFTER UPDATE ON connections
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
           WHEN (OLD.access_token IS DISTINCT FROM NEW.access_token)
           EXECUTE FUNCTION lose_commits();"
    )))
    .execute(&app.db)
    .await
    .unwrap();
}

async fn expire_access_token(app: &TestApp) {
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
}

/// The refresh margin (a minute, or half a short-lived token's lifetime)
/// is measured from when the tokens were stored, not from the row's last
/// change: an hour-long token renamed with half a minute left is still
/// refreshed before use, not sent to the provider with seconds to live.
#[tokio::test]
async fn a_rename_shortly_before_expiry_leaves_the_refresh_margin_as_it_was() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    sqlx::query(
        "UPDATE connections SET tokens_stored_at = now() - interval '1 hour',
             access_token_expires_at = now() + interval '30 seconds'",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let renamed = mcp_connect::db::connections::set_label(
        &app.db,
        UserRef::new(&app.dev.issuer(), "alice"),
        id,
        "work",
    )
    .await
    .unwrap();
    assert_eq!(renamed, mcp_connect::db::connections::Renamed::Renamed);

    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'"
        )
        .await,
        1,
        "refreshed before use"
    );
    let fresh: bool = sqlx::query_scalar(
        "SELECT access_token_expires_at > now() + interval '2 minutes' FROM connections",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(fresh, "the demo provider's tokens live five minutes");
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once_by_concurrent_calls_on_two_instances() {
    let app = spawn_app().await;
    let other = app.second_instance().await;
    connect_demo(&app, "alice", "octo").await;
    expire_access_token(&app).await;
    let calls = (0..12).map(|i| {
        let target = if i % 2 == 0 { &app } else { &other };
        // Tokens name the instance's own issuer; alice is alice on both.
        let token = app.token("alice");
        let body = crate::helpers::request(
            "tools/call",
            json!({"name": "whoami", "arguments": {"provider": "demo"}}),
        );
        let request = target.mcp_request(Some(&token), &body);
        async move { crate::helpers::read(request.send().await.unwrap()).await }
    });
    let answers = futures::future::join_all(calls).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["account"], "octo",
            "no failed call: {body}"
        );
    }
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'"
        )
        .await,
        1,
        "one refresh"
    );
    let fresh: bool = sqlx::query_scalar("SELECT access_token_expires_at > now() FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(fresh);
}

#[tokio::test]
async fn a_refresh_waits_for_another_instances_refresh_longer_than_one_statement_may_take() {
    // Statements may take a second; a refresh elsewhere holds the row for
    // longer. Postgres counts a lock wait as statement time, so the wait
    // must be allowed its own, longer limit. (The lock a refresh takes,
    // without a claim: as a release from before refresh claims holds it.)
    let app = crate::helpers::spawn_app_with(|t| {
        let mut database = toml::Table::new();
        database.insert("statement_timeout_ms".into(), 1_000.into());
        t.insert("database".into(), toml::Value::Table(database));
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    expire_access_token(&app).await;
    let mut refreshing = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR NO KEY UPDATE")
        .fetch_one(&mut *refreshing)
        .await
        .unwrap();
    let calling = tokio::spawn({
        let request = app.mcp_request(
            Some(&app.token("alice")),
            &crate::helpers::request(
                "tools/call",
                json!({"name": "whoami", "arguments": {"provider": "demo"}}),
            ),
        );
        async move { crate::helpers::read(request.send().await.unwrap()).await }
    });
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!calling.is_finished(), "the call waits for the row");
    refreshing.commit().await.unwrap();
    let (status, body) = calling.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "no failed call: {body}"
    );
}

#[tokio::test]
async fn a_refresh_whose_transaction_is_lost_keeps_the_tokens_the_provider_rotated() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let old_refresh: Vec<u8> = sqlx::query_scalar("SELECT refresh_token FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    // The first commit of new tokens ends its connection, as Postgres
    // restarting while the provider answered would.
    lose_commits_of_new_tokens(&app, 1).await;
    expire_access_token(&app).await;
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
    let lost: i64 = sqlx::query_scalar("SELECT last_value FROM lose_commits")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(lost >= 2, "the first write was lost, another made");
    let (status, new_refresh): (String, Vec<u8>) =
        sqlx::query_as("SELECT status, refresh_token FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(status, "active");
    assert_ne!(
        new_refresh, old_refresh,
        "the rotated refresh token is kept"
    );
    // The provider honours what was kept: the next refresh works.
    expire_access_token(&app).await;
    let (_, again) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        again["result"]["structuredContent"]["account"], "octo",
        "{again}"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'"
        )
        .await,
        2
    );
}

/// The same lost transaction with a second instance: while the first is
/// still trying to write the tokens the provider rotated (its first four
/// writes lost here, so its tries span almost four seconds), a call on the
/// other instance finds the old tokens under no row lock. It waits for the
/// first instance's tokens rather than spending the old refresh token,
/// which the provider would take as stolen and answer by revoking the
/// grant: both calls are served, and the connection stays active.
#[tokio::test]
async fn a_refresh_whose_transaction_is_lost_is_not_repeated_by_another_instance() {
    let app = spawn_app().await;
    let other = app.second_instance().await;
    connect_demo(&app, "alice", "octo").await;
    lose_commits_of_new_tokens(&app, 4).await;
    expire_access_token(&app).await;
    let first = app.call_tool("alice", "whoami", json!({"provider": "demo"}));
    let second = async {
        // The first instance's transaction is lost; it is trying again.
        while count(&app, "SELECT last_value FROM lose_commits").await < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        other
            .call_tool("alice", "whoami", json!({"provider": "demo"}))
            .await
    };
    let ((status, body), (other_status, other_body)) = tokio::join!(first, second);
    for (status, body) in [(status, body), (other_status, other_body)] {
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["account"], "octo",
            "{body}"
        );
    }
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active");
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'"
        )
        .await,
        1,
        "only the first instance refreshed; the other waited for its tokens"
    );
    assert_eq!(
        count(&app, "SELECT count(*) FROM refresh_claims").await,
        0,
        "claims are released"
    );
}

/// The smallest pool there is (`database_max_connections = 2`: one pooled
/// connection) still refreshes: a refresh holds one pooled connection at
/// a time, its claim taken before the row's transaction begins.
#[tokio::test]
async fn a_refresh_needs_one_pooled_connection_at_a_time() {
    let app = crate::helpers::spawn_app_with(|t| {
        t.insert("database_max_connections".into(), 2.into());
    })
    .await;
    connect_demo(&app, "alice", "octo").await;
    expire_access_token(&app).await;
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octo",
        "{body}"
    );
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refreshed'"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn a_refused_refresh_marks_needs_reauth_and_the_next_call_asks_again() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    // Keep the current sealed refresh token, let the app rotate it once,
    // then put the old one back: the provider sees a reused refresh token.
    let (old_refresh, key_id): (Vec<u8>, String) =
        sqlx::query_as("SELECT refresh_token, key_id FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    expire_access_token(&app).await;
    let (_, first) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        first["result"]["structuredContent"]["account"], "octo",
        "{first}"
    );
    sqlx::query("UPDATE connections SET refresh_token = $1, key_id = $2, access_token_expires_at = now() - interval '1 second'")
        .bind(old_refresh)
        .bind(key_id)
        .execute(&app.db)
        .await
        .unwrap();
    // The access token was re-sealed with the same key, so only the grant is stale.
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(
        body["result"]["resultType"], "input_required",
        "invalid_grant → connect again: {body}"
    );
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "needs_reauth");
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'refresh_failed'"
        )
        .await,
        1
    );
    // Connecting again makes it active.
    tokio::time::sleep(Duration::from_millis(10)).await;
    connect_demo(&app, "alice", "octo").await;
    let status: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active");
}

#[tokio::test]
async fn disconnect_confirms_with_a_form_then_revokes_and_forgets() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (_, asked) = app
        .call_tool("alice", "disconnect", json!({"provider": "demo"}))
        .await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let form = &asked["result"]["inputRequests"]["confirm_disconnect"]["params"];
    assert_eq!(form["mode"], "form", "{asked}");
    crate::schema::assert_matches(
        "ElicitRequest",
        &asked["result"]["inputRequests"]["confirm_disconnect"],
    );
    let state = asked["result"]["requestState"].as_str().unwrap();
    // "No" keeps it.
    let (_, kept) = app
        .mcp("alice", "tools/call", json!({"name": "disconnect", "arguments": {"provider": "demo"}, "requestState": state,
            "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": false}}}}))
        .await;
    assert_eq!(kept["result"]["resultType"], "complete", "{kept}");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    // "Yes" revokes at the provider and deletes.
    let (_, gone) = app
        .mcp("alice", "tools/call", json!({"name": "disconnect", "arguments": {"provider": "demo"}, "requestState": state,
            "inputResponses": {"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}}}))
        .await;
    assert!(
        gone["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("disconnected"),
        "{gone}"
    );
    assert_eq!(
        gone["result"]["structuredContent"]["revocation"], "revoked",
        "{gone}"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    assert_eq!(revocation_audited(&app).await, "revoked_upstream");
}

/// A retry that brings the requestState but no answer to the confirmation
/// (or an accept without the field) is missing input: the same question
/// again, nothing changed, never "kept". Only the user's own no, decline
/// or cancel keeps the account.
#[tokio::test]
async fn a_disconnect_retry_without_the_answer_asks_to_confirm_again() {
    let app = spawn_app().await;
    app.connect_directly("alice", "confirm-token").await;
    let args = json!({"provider": "demo"});
    let (_, first) = app.call_tool("alice", "disconnect", args.clone()).await;
    let question = |body: &Value| {
        assert_eq!(body["result"]["resultType"], "input_required", "{body}");
        let request = &body["result"]["inputRequests"]["confirm_disconnect"];
        assert_eq!(request["params"]["mode"], "form", "{body}");
        assert!(
            request["params"]["requestedSchema"]["properties"]["confirm"].is_object(),
            "{body}"
        );
        body["result"]["requestState"].as_str().unwrap().to_owned()
    };
    let mut state = question(&first);
    let retry = |state: &str, responses: Option<Value>| {
        let mut params = json!({"name": "disconnect", "arguments": args, "requestState": state});
        if let Some(responses) = responses {
            params["inputResponses"] = responses;
        }
        let app = &app;
        async move { app.mcp("alice", "tools/call", params).await.1 }
    };
    for missing in [
        None,
        Some(json!({})),
        Some(json!({"account_demo": {"action": "accept", "content": {"account": "x"}}})),
        Some(json!({"confirm_disconnect": {"action": "accept"}})),
        Some(json!({"confirm_disconnect": {"action": "accept", "content": {}}})),
    ] {
        let asked = retry(&state, missing.clone()).await;
        state = question(&asked);
        assert_eq!(
            count(&app, "SELECT count(*) FROM connections").await,
            1,
            "{missing:?}"
        );
    }
    for action in ["decline", "cancel"] {
        let kept = retry(
            &state,
            Some(json!({"confirm_disconnect": {"action": action}})),
        )
        .await;
        assert_eq!(kept["result"]["resultType"], "complete", "{kept}");
        assert_eq!(
            kept["result"]["structuredContent"]["connection"], "kept",
            "{kept}"
        );
    }
    let gone = retry(
        &state,
        Some(json!({"confirm_disconnect": {"action": "accept", "content": {"confirm": true}}})),
    )
    .await;
    assert_eq!(
        gone["result"]["structuredContent"]["connection"], "disconnected",
        "{gone}"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

/// The detail of the one `disconnected` audit event.
pub async fn disconnected_detail(app: &TestApp) -> Value {
    sqlx::query_scalar("SELECT detail FROM audit_events WHERE kind = 'disconnected'")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

/// What the audit says became of the one disconnect's revocation, which
/// its `disconnected` row says was owed: `revoked_upstream`,
/// `revocation_failed` (tried again later) or `revocation_abandoned`.
pub async fn revocation_audited(app: &TestApp) -> String {
    let disconnected = disconnected_detail(app).await;
    assert_eq!(disconnected["revocation"], "pending", "{disconnected}");
    let id = disconnected["connection_id"].as_str().unwrap().to_owned();
    sqlx::query_scalar(
        "SELECT kind FROM audit_events WHERE detail->>'connection_id' = $1
           AND kind IN ('revoked_upstream', 'revocation_failed', 'revocation_abandoned')",
    )
    .bind(id)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// The demo provider forgets `subject`'s access token, as when the user
/// revokes the app at the provider.
async fn revoke_at_demo(app: &TestApp, subject: &str) {
    let token = app.demo_token(subject).await;
    let settings = app.dev.demo().provider_settings();
    let revoked = app
        .http
        .post(format!("{}/dev/demo/revoke", app.addr))
        .basic_auth(
            settings["client_id"].as_str().unwrap(),
            settings["client_secret"].as_str(),
        )
        .form(&[(
            "token",
            secrecy::ExposeSecret::expose_secret(&token.access_token),
        )])
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 200);
}

#[tokio::test]
async fn a_token_the_provider_refuses_makes_the_next_call_ask_to_connect_again() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    revoke_at_demo(&app, "alice").await;

    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "method": "GET", "path": "me"}),
        )
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["http_status"], 401,
        "{body}"
    );
    let (_, again) = app
        .call_tool("alice", "whoami", json!({"provider": "demo"}))
        .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
}

/// The profile resource reads with the stored token as whoami does, and a
/// refusal marks it the same way: the read after asks to connect again
/// instead of failing for good.
#[tokio::test]
async fn a_profile_read_the_provider_refuses_makes_the_next_read_ask_to_connect_again() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    revoke_at_demo(&app, "alice").await;
    let read = || {
        app.mcp(
            "alice",
            "resources/read",
            json!({"uri": "connection://demo/profile"}),
        )
    };

    let (_, refused) = read().await;
    assert!(refused["error"]["code"].is_i64(), "{refused}");
    let (_, again) = read().await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
}

#[tokio::test]
async fn a_disconnect_waits_for_a_refresh_under_way_and_revokes_what_it_stored() {
    use mcp_connect::connect::vault::disconnect;
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let issuer = app.dev.issuer();
    let token = app.demo_token("alice").await;
    let token = secrecy::ExposeSecret::expose_secret(&token.access_token).to_owned();
    let api_status = |token: String| {
        let (http, url) = (app.http.clone(), format!("{}/dev/demo/api/me", app.addr));
        async move {
            http.get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(api_status(token.clone()).await, 200);

    // A refresh elsewhere holds the row.
    let mut refreshing = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR UPDATE")
        .fetch_one(&mut *refreshing)
        .await
        .unwrap();
    let disconnecting = tokio::spawn({
        let state = app.state.clone();
        let issuer = issuer.clone();
        async move {
            disconnect(
                &state.connect,
                UserRef::new(&issuer, "alice"),
                &ProviderName::parse("demo").unwrap(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!disconnecting.is_finished(), "it waits for the refresh");
    // Nothing was revoked before the refresh's tokens could be known.
    assert_eq!(api_status(token.clone()).await, 200);

    refreshing.commit().await.unwrap();
    assert!(disconnecting.await.unwrap().unwrap());
    assert_eq!(api_status(token).await, 401, "revoked after the refresh");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn api_request_without_a_method_is_a_get() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let (_, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "demo", "path": "echo"}),
        )
        .await;
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["http_status"], 200, "{body}");
    assert_eq!(result["body"]["method"], "GET", "{body}");
}
