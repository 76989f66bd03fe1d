//! The provider callback's bindings (session, provider, single use,
//! `iss`), the declined answer, and the headers every page carries.

use super::*;

#[tokio::test]
async fn a_callback_from_another_session_is_refused_without_touching_the_flow() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let first = signed_in(&app, "alice").await;
    let url = start_flow(&app, &first, &t).await;
    let state = param(&url, "state").unwrap();
    let callback = format!(
        "/oauth/callback/demo?code=abc&state={state}&iss={}/dev/demo",
        app.base
    );
    // Someone holding the victim's `state`: the same person in another
    // browser, someone else, someone signed out.
    let second = signed_in(&app, "alice").await;
    let mallory = signed_in(&app, "mallory").await;
    for browser in [&second, &mallory, &Browser::new(&app), &mallory, &mallory] {
        let refused = browser.get(&callback).await;
        assert_eq!(refused.status, 400, "{}", refused.body);
        assert!(!refused.body.contains(&state) && !refused.body.contains("abc"));
        // Said as it is: the connect waits in the browser it started in.
        assert!(
            refused.body.contains("started in another browser"),
            "{}",
            refused.body
        );
    }
    assert!(flow_exists(&app, &state).await, "the flow must stay");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected' AND detail->>'reason' = 'other_session'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    // Once for the flow, however many times it is called back.
    assert_eq!(audited, 1);
    // The victim's own connect still completes.
    let provider_page = first.get(url.as_str()).await;
    let back = first
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", "octo"), ("decision", "allow")],
        )
        .await;
    let done = first.follow(&back).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
}

#[tokio::test]
async fn a_callback_for_another_provider_or_an_unknown_state_is_rejected() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    for path in [
        "/oauth/callback/demo?code=abc&state=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
            .to_owned(),
        "/oauth/callback/demo?code=abc".to_owned(),
        "/oauth/callback/demo?state=%FF%FE&code=%FF".to_owned(),
        format!("/oauth/callback/demo?state={state}&state={state}"),
    ] {
        assert_eq!(alice.get(&path).await.status, 400, "{path}");
    }
    assert!(
        flow_exists(&app, &state).await,
        "unrelated junk must not burn the flow"
    );
    let other = alice
        .get(&format!("/oauth/callback/github?code=abc&state={state}"))
        .await;
    assert_eq!(other.status, 400);
    assert!(!flow_exists(&app, &state).await);
}

#[tokio::test]
async fn an_iss_that_is_not_the_providers_is_rejected_before_any_exchange() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    let page = alice
        .get(&format!(
            "/oauth/callback/demo?code=abc&state={state}&iss=https%3A%2F%2Fevil.example"
        ))
        .await;
    // 400 (refused), not 502 (an exchange attempted against the provider).
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(!flow_exists(&app, &state).await);
    let reason: String = sqlx::query_scalar(
        "SELECT detail->>'reason' FROM audit_events WHERE kind = 'callback_rejected'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(reason, "iss_mismatch");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn a_callback_without_iss_from_a_provider_that_always_sends_one_is_rejected() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    // The demo provider always sends `iss` (its metadata says so).
    let page = alice
        .get(&format!("/oauth/callback/demo?code=abc&state={state}"))
        .await;
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(!flow_exists(&app, &state).await);
    let reason: String = sqlx::query_scalar(
        "SELECT detail->>'reason' FROM audit_events WHERE kind = 'callback_rejected'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(reason, "iss_missing");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn access_denied_says_declined_marks_the_ticket_and_cannot_be_replayed() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    let callback = format!(
        "/oauth/callback/demo?error=access_denied&state={state}&iss={}/dev/demo",
        app.base
    );
    let page = alice.get(&callback).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("You declined access at Demo"),
        "{}",
        page.body
    );
    let declined: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT declined_at FROM connect_tickets WHERE id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(declined.is_some());
    let cancelled = "SELECT count(*) FROM audit_events WHERE kind = 'consent_cancelled'";
    assert_eq!(count(&app, cancelled).await, 1);
    // The same answer again (a reload): the same page, and nothing done.
    let replay = alice.get(&callback).await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    assert!(
        replay.body.contains("You declined access at Demo"),
        "{}",
        replay.body
    );
    assert_eq!(count(&app, cancelled).await, 1);
    // From another browser it is no answer at all.
    let bob = signed_in(&app, "bob").await;
    assert_eq!(bob.get(&callback).await.status, 400);
    // The flow is used up: a code for it is refused.
    let replay = alice
        .get(&format!("/oauth/callback/demo?code=abc&state={state}"))
        .await;
    assert_eq!(replay.status, 400, "{}", replay.body);
}

/// A callback with neither a code nor a decline — the provider's own error
/// (`server_error`, `invalid_scope`) or nothing at all — ends the flow
/// there: refused, audited once with its reason, and a reload is refused as
/// an unknown flow, not told the connect is still under way.
#[tokio::test]
async fn a_callback_without_a_code_ends_the_flow_and_a_reload_is_not_told_to_wait() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let iss = format!("{}/dev/demo", app.base);
    for (query, reason) in [
        ("error=server_error", "provider_error"),
        ("error_description=nothing", "no_code"),
    ] {
        let (t, _) = ticket(&app, "alice", 600).await;
        let url = start_flow(&app, &alice, &t).await;
        let state = param(&url, "state").unwrap();
        let callback = format!("/oauth/callback/demo?{query}&state={state}&iss={iss}");
        let page = alice.get(&callback).await;
        assert!(matches!(page.status, 400 | 502), "{query}: {}", page.status);
        assert!(!flow_exists(&app, &state).await, "{query}");
        let audited = format!(
            "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected' \
             AND detail->>'reason' = '{reason}'"
        );
        assert_eq!(count(&app, &audited).await, 1, "{query}");
        let reload = alice.get(&callback).await;
        assert_eq!(reload.status, 400, "{query}: {}", reload.body);
        assert!(!reload.body.contains("Still connecting"), "{}", reload.body);
        assert_eq!(count(&app, &audited).await, 1, "{query}: audited once");
    }
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

/// A flow past its expiry by the database's clock is refused as expired
/// and deleted — whatever the app's clock says, the database decides — and
/// a reload is not told the connect is still under way.
#[tokio::test]
async fn a_callback_for_an_expired_flow_is_refused_and_a_reload_is_not_told_to_wait() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    sqlx::query("UPDATE oauth_flows SET expires_at = now() - interval '1 millisecond'")
        .execute(&app.db)
        .await
        .unwrap();
    let callback = format!(
        "/oauth/callback/demo?code=abc&state={state}&iss={}/dev/demo",
        app.base
    );
    let page = alice.get(&callback).await;
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(!page.body.contains("Still connecting"), "{}", page.body);
    assert!(!flow_exists(&app, &state).await);
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected' \
                   AND detail->>'reason' = 'expired'";
    assert_eq!(count(&app, audited).await, 1);
    let reload = alice.get(&callback).await;
    assert_eq!(reload.status, 400, "{}", reload.body);
    assert!(!reload.body.contains("Still connecting"), "{}", reload.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

#[tokio::test]
async fn every_page_carries_the_security_headers() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let anonymous = Browser::new(&app);
    let consent_page = consent(&alice, &t).await;
    let pages = vec![
        ("login", anonymous.get("/login").await, true),
        (
            "expired link",
            anonymous.get("/connect?ticket=x").await,
            true,
        ),
        (
            "link to sign in",
            anonymous.get(&format!("/connect?ticket={t}")).await,
            true,
        ),
        (
            "consent signed out",
            anonymous.get("/connect/consent").await,
            true,
        ),
        (
            "connections signed out",
            anonymous.get("/connections").await,
            true,
        ),
        ("connections", alice.get("/connections").await, true),
        ("consent", consent_page, true),
        (
            "callback",
            alice.get("/oauth/callback/demo?state=x").await,
            true,
        ),
        (
            "auth callback",
            anonymous.get("/auth/callback?state=x").await,
            true,
        ),
        ("logout", anonymous.post_form("/logout", &[]).await, true),
        (
            "stylesheet",
            anonymous.get("/static/style.css").await,
            false,
        ),
    ];
    for (name, page, flow) in pages {
        assert_eq!(
            page.header("content-security-policy"),
            Some("default-src 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"),
            "{name}"
        );
        assert_eq!(page.header("x-frame-options"), Some("DENY"), "{name}");
        assert_eq!(
            page.header("referrer-policy"),
            Some("no-referrer"),
            "{name}"
        );
        assert_eq!(
            page.header("x-content-type-options"),
            Some("nosniff"),
            "{name}"
        );
        if flow {
            assert_eq!(page.header("cache-control"), Some("no-store"), "{name}");
        }
        assert!(
            !page.body.contains("<script") && !page.body.contains("style="),
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_full_connect_stores_the_connection_once_and_shows_the_account() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    // The demo provider's own consent page, then its answer.
    let provider_page = alice.get(url.as_str()).await;
    assert_eq!(provider_page.status, 200, "{}", provider_page.body);
    let back = alice
        .submit(
            &provider_page,
            "/dev/demo/authorize",
            &[("account", "octo"), ("decision", "allow")],
        )
        .await;
    assert_eq!(back.status, 303, "{}", back.body);
    let callback = back.location.clone().unwrap();
    assert!(callback.starts_with(&format!("{}/oauth/callback/demo?", app.base)));
    let done = alice.follow(&back).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("Demo connected as"), "{}", done.body);
    assert!(done.body.contains("you can return to your MCP client"));
    let code = param(&url::Url::parse(&callback).unwrap(), "code").unwrap();
    assert!(!done.body.contains(&code));
    let (subject, provider): (String, String) =
        sqlx::query_as("SELECT subject, provider FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((subject.as_str(), provider.as_str()), ("alice", "demo"));
    let redeemed: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT redeemed_at FROM connect_tickets WHERE id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(redeemed.is_some());
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'connected'"
        )
        .await,
        1
    );
    // The same callback again in her browser (a reload): the connection
    // as it is, nothing exchanged twice; from any other browser: refused.
    let replay = alice.get(&callback).await;
    assert_eq!(replay.status, 200, "{}", replay.body);
    assert!(replay.body.contains("Demo connected as"), "{}", replay.body);
    let elsewhere = Browser::new(&app).get(&callback).await;
    assert_eq!(elsewhere.status, 400, "{}", elsewhere.body);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM audit_events WHERE kind = 'connected'"
        )
        .await,
        1
    );
}

/// The demo provider sends the person back, from the redirect to it that
/// Continue gave (`to_provider`), with `error` instead of a code, as a
/// provider refusing the authorization does: the callback's page.
async fn back_from_demo_with(
    app: &crate::helpers::TestApp,
    browser: &Browser,
    to_provider: &Page,
    error: &str,
) -> Page {
    let authorize = url::Url::parse(to_provider.location.as_deref().unwrap()).unwrap();
    let mut back = url::Url::parse(&param(&authorize, "redirect_uri").unwrap()).unwrap();
    back.query_pairs_mut()
        .append_pair("error", error)
        .append_pair("state", &param(&authorize, "state").unwrap())
        .append_pair("iss", &format!("{}/dev/demo", app.base));
    browser.get(back.as_str()).await
}

/// The provider refusing the authorization with an error of its own (not
/// the person's decline): the page says what it means and names the code,
/// and the MCP client's retry is told so, once, in an error result naming
/// the code and what would help, instead of a new link that would fail
/// the same way; the call after that starts afresh.
#[tokio::test]
async fn a_providers_refusal_is_explained_on_the_page_and_to_the_clients_retry() {
    use crate::full_flow::{elicit, open_and_continue, retry_accepted};
    use serde_json::json;
    let app = spawn_app().await;
    let schemas = crate::tool_results::Schemas::of(&app).await;
    // `whoami` asks for the operator's scopes only: an `invalid_scope` is
    // theirs to mend; `connect` with a scope of its own may ask for others.
    let plain = json!({"provider": "demo"});
    let own_scope = json!({"provider": "demo", "scopes": ["echo"]});
    let needs_fixing = "needs fixing";
    for (tool, args, code, next_step, sentence) in [
        (
            "connect",
            &own_scope,
            "invalid_scope",
            "change_request",
            "refused the permissions",
        ),
        // The page cannot tell whose scopes they were; the retry can.
        (
            "whoami",
            &plain,
            "invalid_scope",
            "ask_user",
            "refused the permissions",
        ),
        (
            "whoami",
            &plain,
            "unauthorized_client",
            "ask_user",
            needs_fixing,
        ),
        (
            "whoami",
            &plain,
            "temporarily_unavailable",
            "retry_later",
            "just now",
        ),
    ] {
        let (link, request_state) = elicit(&app, "alice", tool, args.clone(), "connect_demo").await;
        let browser = Browser::new(&app);
        let to_provider = open_and_continue(&browser, &link, "alice").await;
        let page = back_from_demo_with(&app, &browser, &to_provider, code).await;
        assert_eq!(page.status, 502, "{code}: {}", page.body);
        assert!(page.body.contains(sentence), "{tool} {code}: {}", page.body);
        let named = format!("error code {code}");
        assert!(page.body.contains(&named), "{}", page.body);
        let marked: Option<String> = sqlx::query_scalar(
            "SELECT refused_with FROM connect_tickets ORDER BY created_at DESC LIMIT 1",
        )
        .fetch_one(&app.db)
        .await
        .unwrap();
        assert_eq!(marked.as_deref(), Some(code), "this link's ticket");
        let tickets_before = count(&app, "SELECT count(*) FROM connect_tickets").await;

        let body = retry_accepted(
            &app,
            "alice",
            tool,
            args.clone(),
            &request_state,
            "connect_demo",
        )
        .await;
        assert_eq!(body["result"]["isError"], true, "{code}: {body}");
        let result = schemas.check(tool, &body);
        assert_eq!(result["error"]["kind"], "authorization_refused", "{body}");
        assert_eq!(result["next_step"], next_step, "{tool} {code}: {body}");
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&named), "{body}");
        let tickets = "SELECT count(*) FROM connect_tickets";
        assert_eq!(count(&app, tickets).await, tickets_before, "no new link");
        // Said once: the next call starts afresh, with a new link.
        let (_, again) = app.call_tool("alice", tool, args.clone()).await;
        assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    }
}

/// A resource read whose link's authorization the provider refused is
/// answered `-31005`, naming the code.
#[tokio::test]
async fn a_providers_refusal_answers_a_resource_read_with_its_own_error() {
    use crate::full_flow::open_and_continue;
    use serde_json::json;
    let app = spawn_app().await;
    let read = json!({"uri": "connection://demo/profile"});
    let (_, asked) = app.mcp("alice", "resources/read", read.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let link = asked["result"]["inputRequests"]["connect_demo"]["params"]["url"]
        .as_str()
        .unwrap();
    let request_state = asked["result"]["requestState"].as_str().unwrap();
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, link, "alice").await;
    let refused = back_from_demo_with(&app, &browser, &to_provider, "unauthorized_client").await;
    assert_eq!(refused.status, 502);

    let mut retry = read;
    retry["requestState"] = json!(request_state);
    retry["inputResponses"] = json!({"connect_demo": {"action": "accept"}});
    let (_, answer) = app.mcp("alice", "resources/read", retry).await;
    assert_eq!(answer["error"]["code"], -31005, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("error code unauthorized_client"),
        "{answer}"
    );
}

/// A provider entry may spell its issuer with or without the trailing
/// slash of a root issuer: a callback naming it the other way is its own,
/// not refused as another issuer's.
#[tokio::test]
async fn a_callbacks_iss_may_differ_from_the_entry_by_a_trailing_slash() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    let state = param(&url, "state").unwrap();
    let page = alice
        .get(&format!(
            "/oauth/callback/demo?code=made-up&state={state}&iss={}/dev/demo/",
            app.base
        ))
        .await;
    // The made-up code is refused by the provider (502), after the
    // exchange was tried: the `iss` passed.
    assert_eq!(page.status, 502, "{}", page.body);
    let mismatch = "SELECT count(*) FROM audit_events WHERE detail->>'reason' = 'iss_mismatch'";
    assert_eq!(count(&app, mismatch).await, 0);
}

/// A connect begun on the connections page (Reconnect) that cannot go on
/// sends the person back there, not to an MCP client they never used: a
/// provider's refusal, a flow past its expiry, a code the provider does
/// not exchange, and the way back reaching another browser.
#[tokio::test]
async fn a_connect_begun_on_the_connections_page_is_started_again_there() {
    let app = spawn_app().await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let elsewhere = Browser::new(&app);
    elsewhere.sign_in("alice").await;
    let iss = format!("{}/dev/demo", app.base);
    for (query, expected) in [
        (
            "error=server_error",
            "start again from your connections page",
        ),
        ("code=expired", "Start again from your connections page"),
        ("code=made-up", "Start again from your connections page"),
        (
            "code=elsewhere",
            "or start again from your connections page",
        ),
    ] {
        let page = browser.get("/connections").await;
        let consent = browser
            .submit(&page, "/connections/demo/reconnect", &[])
            .await;
        let consent = browser.follow(&consent).await;
        let to_provider = browser
            .submit(&consent, "/connect", &[("action", "continue")])
            .await;
        let authorize = url::Url::parse(to_provider.location.as_deref().unwrap()).unwrap();
        let state = param(&authorize, "state").unwrap();
        if query == "code=expired" {
            sqlx::query("UPDATE oauth_flows SET expires_at = now() - interval '1 millisecond'")
                .execute(&app.db)
                .await
                .unwrap();
        }
        let back_in = match query {
            "code=elsewhere" => &elsewhere,
            _ => &browser,
        };
        let back = back_in
            .get(&format!(
                "/oauth/callback/demo?{query}&state={state}&iss={iss}"
            ))
            .await;
        assert!(back.body.contains(expected), "{query}: {}", back.body);
        assert!(!back.body.contains("MCP client"), "{query}: {}", back.body);
    }
}
