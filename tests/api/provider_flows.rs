//! The full flow against fakes of GitHub, Google and Slack that behave like
//! the real services (GitHub's form-encoded token answers, Google's refresh
//! token only with offline access and consent, Slack's user token nested
//! under `authed_user`): each preset connects, completes the retry, and
//! calls the API as the user.

use serde_json::json;

use provider_fakes::{self as fakes, FakeProvider};

use crate::{
    browser::Browser,
    full_flow::{elicit, open_and_continue, retry_accepted},
    helpers::{TestApp, allow, refuse, spawn_app_with},
};

/// Connects alice's `name` account through the browser and the fake; returns
/// the completed `whoami` retry.
pub(crate) async fn connect(app: &TestApp, fake: &FakeProvider, name: &str) -> serde_json::Value {
    connect_as(app, fake, name, "alice").await
}

/// [`connect`] for `subject`.
pub(crate) async fn connect_as(
    app: &TestApp,
    fake: &FakeProvider,
    name: &str,
    subject: &str,
) -> serde_json::Value {
    let key = format!("connect_{name}");
    let (url, state) = elicit(app, subject, "whoami", json!({"provider": name}), &key).await;
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, subject).await;
    let authorize = to_provider.location.clone().expect("to the provider");
    assert!(authorize.starts_with(&fake.base), "{authorize}");
    let callback = fake.visit(&authorize).await;
    let done = browser.get(callback.as_str()).await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(done.body.contains("connected as"), "{}", done.body);
    for secret in fake.secrets() {
        assert!(
            !done.body.contains(&secret),
            "a provider secret reached the page"
        );
    }
    let body = retry_accepted(
        app,
        subject,
        "whoami",
        json!({"provider": name}),
        &state,
        &key,
    )
    .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    for secret in fake.secrets() {
        assert!(
            !body.to_string().contains(&secret),
            "a provider secret reached the MCP result"
        );
    }
    body
}

pub(crate) async fn app_with(fake: &FakeProvider, name: &str) -> TestApp {
    spawn_app_with(|t| fake.configure(t, name)).await
}

#[tokio::test]
async fn github_connects_despite_form_encoded_answers() {
    let fake = fakes::github::start().await;
    let app = app_with(&fake, "github").await;
    let body = connect(&app, &fake, "github").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "octocat",
        "{body}"
    );
    let (_, repos) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "github", "method": "GET", "path": "user/repos"}),
        )
        .await;
    assert_eq!(
        repos["result"]["structuredContent"]["http_status"], 200,
        "{repos}"
    );
    assert_eq!(
        repos["result"]["structuredContent"]["body"][0]["name"], "Hello-World",
        "{repos}"
    );
    // GitHub tokens of OAuth apps do not expire: nothing to refresh.
    let expiry: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT access_token_expires_at FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(expiry.is_none());
}

#[tokio::test]
async fn no_token_code_ticket_or_cookie_reaches_a_log_line() {
    let fake = fakes::github::start().await;
    let app = app_with(&fake, "github").await;
    let (url, state) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "github"}),
        "connect_github",
    )
    .await;
    let ticket = url.split_once("ticket=").unwrap().1.to_owned();
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let authorize = to_provider.location.clone().unwrap();
    let oauth_state = url::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    let callback = fake.visit(&authorize).await;
    browser.get(callback.as_str()).await;
    retry_accepted(
        &app,
        "alice",
        "whoami",
        json!({"provider": "github"}),
        &state,
        "connect_github",
    )
    .await;
    app.call_tool(
        "alice",
        "api_request",
        json!({"provider": "github", "method": "GET", "path": "user/repos"}),
    )
    .await;

    let mut secrets = fake.secrets();
    secrets.extend([ticket, oauth_state, app.token("alice")]);
    secrets.extend(browser.cookie("mcp_connect_session"));
    secrets.extend(browser.cookie("__Host-mcp_connect_session"));
    assert!(
        secrets.len() >= 5,
        "the test saw the secrets it checks for: {}",
        secrets.len()
    );
    crate::logs::assert_absent(&secrets);
}

#[tokio::test]
async fn google_asks_for_offline_consent_and_keeps_its_refresh_token_across_refreshes() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let body = connect(&app, &fake, "google").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice@example.com",
        "{body}"
    );
    let authorize = fake.last_authorize().expect("authorize request");
    assert_eq!(
        authorize.get("access_type").map(String::as_str),
        Some("offline")
    );
    assert_eq!(authorize.get("prompt").map(String::as_str), Some("consent"));
    let has_refresh: bool = sqlx::query_scalar("SELECT refresh_token IS NOT NULL FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(has_refresh, "offline + consent yields a refresh token");

    // Google refreshes without sending a new refresh token: keep the old one.
    fake.expire_access_tokens();
    sqlx::query("UPDATE connections SET access_token_expires_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    for _ in 0..2 {
        let (_, again) = app
            .call_tool("alice", "whoami", json!({"provider": "google"}))
            .await;
        assert_eq!(
            again["result"]["structuredContent"]["account"], "alice@example.com",
            "{again}"
        );
        sqlx::query("UPDATE connections SET access_token_expires_at = now()")
            .execute(&app.db)
            .await
            .unwrap();
    }
    assert_eq!(
        fake.calls().refresh,
        2,
        "refreshed each time with the kept refresh token"
    );
}

/// The refresh token's revocation failing (Google answers 503 to it and
/// to both tries again) is a failed revocation, though the access token's
/// went through: revoking an access token only may end its refresh token
/// (RFC 7009 §2.1), so "its tokens were revoked" would claim what nobody
/// knows.
#[tokio::test]
async fn a_refresh_token_left_unrevoked_is_no_revocation() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let revokes = fake.calls().revoke;
    fake.fail_next(3, 503);
    let gone = crate::key_connect::disconnect(&app, "google").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["connection"], "disconnected", "{gone}");
    assert_eq!(result["revocation"], "failed", "{gone}");
    assert_eq!(
        fake.calls().revoke,
        revokes + 1,
        "the access token's revocation reached the routes; the refresh token's was answered 503 three times"
    );
    let audited = crate::full_flow::revocation_audited(&app).await;
    assert_eq!(audited, "revocation_failed");
}

/// A revocation the provider fails once in passing (503) is tried again:
/// the row is deleted here already, and a blip must not leave the grant
/// live at the provider.
#[tokio::test]
async fn a_revocation_failed_once_in_passing_is_tried_again() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let refresh_token = fake.refresh_tokens().pop().expect("a refresh token");
    fake.fail_next(1, 503);
    let gone = crate::key_connect::disconnect(&app, "google").await;
    let result = &gone["result"]["structuredContent"];
    assert_eq!(result["connection"], "disconnected", "{gone}");
    assert_eq!(result["revocation"], "revoked", "{gone}");
    assert_eq!(
        fake.refresh_status("/token", &refresh_token).await.unwrap(),
        400,
        "the grant has ended at Google"
    );
}

/// Disconnect says what the provider did. Where it could not be told (it
/// answers 503 here), the connection is gone here and the result says the
/// access may still be live there and where to remove it — a tool error
/// for the user to act on, never a claim that the tokens were revoked.
#[tokio::test]
async fn a_revocation_the_provider_fails_is_said_plainly_and_never_claimed() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let schemas = crate::tool_results::Schemas::of(&app).await;
    connect(&app, &fake, "google").await;
    fake.fail_with(Some(503));
    let failed = crate::key_connect::disconnect(&app, "google").await;
    let result = schemas.check("disconnect", &failed);
    assert_eq!(result["connection"], "disconnected", "{failed}");
    assert_eq!(result["revocation"], "failed", "{failed}");
    assert_eq!(result["error"]["kind"], "revocation_failed", "{failed}");
    assert_eq!(result["next_step"], "ask_user", "{failed}");
    assert_eq!(result["account"], "alice@example.com", "{failed}");
    let sentence = failed["result"]["content"][1]["text"].as_str().unwrap();
    for said in [sentence, result["error"]["message"].as_str().unwrap()] {
        assert!(!said.contains("were revoked"), "{said}");
        assert!(
            said.contains("may still be live") && said.contains("settings at Google"),
            "{said}"
        );
        assert!(said.contains("tries again for up to 72 hours"), "{said}");
    }
    for secret in fake.secrets() {
        assert!(!failed.to_string().contains(&secret), "a secret: {failed}");
    }
    let audited = crate::full_flow::revocation_audited(&app).await;
    assert_eq!(audited, "revocation_failed");

    // Served again: the revocation goes through, and the result says so.
    fake.fail_with(None);
    connect(&app, &fake, "google").await;
    let revoked = crate::key_connect::disconnect(&app, "google").await;
    let result = schemas.check("disconnect", &revoked);
    assert_eq!(result["revocation"], "revoked", "{revoked}");
    assert_eq!(result["next_step"], "none", "{revoked}");
    assert_eq!(revoked["result"]["isError"], false, "{revoked}");
}

/// A provider may stop honouring an access token before the expiry it
/// gave (revoked and re-issued, a shorter life than it said): the refusal
/// costs one refresh, and the call goes on with the new token instead of
/// sending the user to connect again. Tokens stored within the last
/// minute are not refreshed for a refusal (it is about the request).
#[tokio::test]
async fn a_token_refused_before_its_time_is_refreshed_and_the_call_made_again() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let stored_a_while_ago = || async {
        sqlx::query("UPDATE connections SET tokens_stored_at = now() - interval '5 minutes'")
            .execute(&app.db)
            .await
            .unwrap();
    };
    let active = || async {
        sqlx::query_scalar::<_, String>("SELECT status FROM connections")
            .fetch_one(&app.db)
            .await
            .unwrap()
            == "active"
    };

    stored_a_while_ago().await;
    fake.expire_access_tokens();
    let (_, whoami) = app
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(
        whoami["result"]["structuredContent"]["account"], "alice@example.com",
        "{whoami}"
    );
    assert_eq!(fake.calls().refresh, 1);
    assert!(active().await);

    // The same on another instance, for an API call.
    let other = app
        .second_instance_with(|t| fake.configure(t, "google"))
        .await;
    stored_a_while_ago().await;
    fake.expire_access_tokens();
    let list = json!({"provider": "google", "method": "GET",
        "path": "calendar/v3/users/me/calendarList"});
    let (_, api) = other.call_tool("alice", "api_request", list.clone()).await;
    assert_ne!(api["result"]["isError"], true, "{api}");
    assert_eq!(
        api["result"]["structuredContent"]["http_status"], 200,
        "{api}"
    );
    assert_eq!(fake.calls().refresh, 2);
    assert!(active().await);

    // Just refreshed: a refusal now is not the token's age.
    let third = app
        .second_instance_with(|t| fake.configure(t, "google"))
        .await;
    fake.expire_access_tokens();
    let (_, refused) = third.call_tool("alice", "api_request", list).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(fake.calls().refresh, 2, "no refresh for a fresh token");
}

/// A refresh the provider refuses for a reason of the server's own (its
/// client secret rotated at Google and not here: `invalid_client`) is no
/// dead grant. While the access token lives it still serves; once it has
/// expired the user is told that the server's operator has to act — a
/// tool error, not "Internal error", and not "connect again", which would
/// not help. The connection stays active, and serves again once the
/// secret is right.
#[tokio::test]
async fn a_refresh_refused_for_the_servers_own_client_tells_the_user_to_ask_the_operator() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let rotated = app
        .second_instance_with(|t| {
            fake.configure(t, "google");
            t["providers"]["google"]["client_secret"] = "rotated-at-google".into();
        })
        .await;
    let expire_in = |seconds: i64| {
        let db = app.db.clone();
        async move {
            sqlx::query("UPDATE connections SET access_token_expires_at = now() + make_interval(secs => $1), tokens_stored_at = now() - interval '1 hour'")
                .bind(seconds as f64)
                .execute(&db)
                .await
                .unwrap();
        }
    };

    // Due for a refresh, not yet expired: the token serves.
    expire_in(30).await;
    let tokens_before = fake.calls().token;
    let (_, early) = rotated
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(
        early["result"]["structuredContent"]["account"], "alice@example.com",
        "{early}"
    );
    assert_eq!(
        fake.calls().token,
        tokens_before + 1,
        "a refresh was asked for, and refused"
    );

    // Expired: the user is told what happened and who can mend it.
    expire_in(-1).await;
    let (status, refused) = rotated
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let result = &refused["result"]["structuredContent"];
    assert_eq!(result["error"]["kind"], "provider_error", "{refused}");
    assert_eq!(result["next_step"], "ask_user", "{refused}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("invalid_client") && message.contains("operator"),
        "{message}"
    );
    assert!(
        !refused.to_string().contains("rotated-at-google"),
        "{refused}"
    );
    for secret in fake.secrets() {
        assert!(
            !refused.to_string().contains(&secret),
            "a secret: {refused}"
        );
    }
    let status: String = sqlx::query_scalar("SELECT status::text FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(status, "active", "the grant is not dead");

    // The profile resource says the same, as a JSON-RPC error; the refusal
    // stands a minute on that instance, so Google is not asked again.
    let asked = fake.calls().token;
    let (_, read) = rotated
        .mcp(
            "alice",
            "resources/read",
            json!({"uri": "connection://google/profile"}),
        )
        .await;
    assert_eq!(read["error"]["code"], -31004, "{read}");
    let said = read["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("operator"), "{read}");
    assert_eq!(fake.calls().token, asked, "asked again within the minute");

    // With the right secret, the next call refreshes and serves.
    let (_, mended) = app
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(
        mended["result"]["structuredContent"]["account"], "alice@example.com",
        "{mended}"
    );
    assert_eq!(fake.calls().refresh, 1);
}

/// A provider that keeps refusing costs an instance one refresh a minute
/// for each connection, not one per call.
#[tokio::test]
async fn refusals_cost_at_most_one_refresh_a_minute() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    for _ in 0..3 {
        sqlx::query("UPDATE connections SET tokens_stored_at = now() - interval '5 minutes'")
            .execute(&app.db)
            .await
            .unwrap();
        fake.expire_access_tokens();
        app.call_tool("alice", "whoami", json!({"provider": "google"}))
            .await;
    }
    assert_eq!(fake.calls().refresh, 1);
}

/// A provider's rate limit is "try again later", with the wait it names —
/// also when it comes as GitHub's 403, which otherwise means a permission
/// the token lacks (`approve` would send the user to grant scopes that do
/// not help).
#[tokio::test]
async fn a_rate_limit_says_when_to_try_again() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    let call = |query: serde_json::Value| {
        let app = &app;
        async move {
            let (_, body) = app
                .call_tool(
                    "alice",
                    "api_request",
                    json!({"provider": "google", "method": "GET",
                        "path": "hostile/limited", "query": query}),
                )
                .await;
            assert_eq!(body["result"]["isError"], true, "{body}");
            body["result"]["structuredContent"].clone()
        }
    };
    let limited = call(json!({})).await;
    assert_eq!(limited["http_status"], 429, "{limited}");
    assert_eq!(limited["next_step"], "retry_later", "{limited}");
    assert_eq!(limited["retry_after_secs"], 30, "{limited}");

    let github = call(json!({"as": "github"})).await;
    assert_eq!(github["http_status"], 403, "{github}");
    assert_eq!(github["next_step"], "retry_later", "{github}");
    let wait = github["retry_after_secs"].as_u64().unwrap();
    assert!((590..=600).contains(&wait), "{github}");
}

/// Strava's consent page lets the person untick scopes, and only the
/// redirect back says which were accepted (its token answer has no
/// `scope`): the connection records those, so a tool asking for one left
/// unticked is sent to connect again instead of being told it has it.
#[tokio::test]
async fn strava_records_only_the_scopes_the_person_left_ticked() {
    let fake = fakes::strava::start().await;
    fake.tick_only("read");
    let app = app_with(&fake, "strava").await;
    let body = connect(&app, &fake, "strava").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice_runs",
        "{body}"
    );
    let scopes: Vec<String> = sqlx::query_scalar("SELECT scopes FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(scopes, ["read"]);
    let (_, again) = app
        .call_tool(
            "alice",
            "connect",
            json!({"provider": "strava", "scopes": ["activity:read"]}),
        )
        .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
}

/// A refresh token Strava no longer knows (another client of the grant
/// rotated it) is refused with Strava's own 400, not `invalid_grant`: the
/// connection is marked to be connected again and the call asks the user,
/// instead of answering "Internal error" on every call after.
#[tokio::test]
async fn a_dead_refresh_token_in_stravas_words_asks_the_user_to_connect_again() {
    let fake = fakes::strava::start().await;
    let app = app_with(&fake, "strava").await;
    connect(&app, &fake, "strava").await;
    let stored = fake.refresh_tokens()[0].clone();
    assert_eq!(
        fake.refresh_status("/oauth/token", &stored).await.unwrap(),
        200
    );
    sqlx::query("UPDATE connections SET access_token_expires_at = now() - interval '1 minute'")
        .execute(&app.db)
        .await
        .unwrap();
    fake.expire_access_tokens();
    let refreshes = fake.calls().refresh;
    let (status, body) = app
        .call_tool("alice", "whoami", json!({"provider": "strava"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "input_required", "{body}");
    assert_eq!(fake.calls().refresh, refreshes + 1, "one refresh, refused");
    let state: String = sqlx::query_scalar("SELECT status FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(state, "needs_reauth");
    // Asked again, nothing is tried at Strava: the user must connect.
    let (_, again) = app
        .call_tool("alice", "whoami", json!({"provider": "strava"}))
        .await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    assert_eq!(fake.calls().refresh, refreshes + 1);
}

#[tokio::test]
async fn reloading_after_a_failed_code_exchange_names_no_account() {
    let fake = fakes::github::start().await;
    let app = app_with(&fake, "github").await;
    connect(&app, &fake, "github").await;
    // Another account; GitHub refuses the code this time.
    let args = json!({"provider": "github", "another_account": true});
    let (url, _) = elicit(&app, "alice", "connect", args, "connect_github").await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let mut callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let pairs: Vec<(String, String)> = callback
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "code" { "spent".into() } else { v };
            (k.into_owned(), v.into_owned())
        })
        .collect();
    callback.query_pairs_mut().clear().extend_pairs(pairs);
    let failed = browser.get(callback.as_str()).await;
    assert_eq!(failed.status, 502, "{}", failed.body);
    // The reload must not claim the account connected before.
    let again = browser.get(callback.as_str()).await;
    assert_eq!(again.status, 400, "{}", again.body);
    assert!(!again.body.contains("connected as"), "{}", again.body);
    assert_eq!(fake.calls().token, 2, "the failed code is not sent again");
}

#[tokio::test]
async fn slack_user_token_comes_from_authed_user() {
    let fake = fakes::slack::start().await;
    let app = app_with(&fake, "slack").await;
    let body = connect(&app, &fake, "slack").await;
    assert_eq!(
        body["result"]["structuredContent"]["account"], "alice",
        "{body}"
    );
    let authorize = fake.last_authorize().expect("authorize request");
    assert!(
        authorize.contains_key("user_scope"),
        "user scopes go in user_scope: {authorize:?}"
    );
}

/// Slack reports a failed call with HTTP 200 and `{"ok": false}`: the
/// result is an error all the same, and a scope the token lacks says to
/// approve it (the default `users:read` does not list channels).
#[tokio::test]
async fn slack_ok_false_is_an_error_that_says_what_to_do() {
    let fake = fakes::slack::start().await;
    let app = app_with(&fake, "slack").await;
    connect(&app, &fake, "slack").await;
    let (status, body) = app
        .call_tool(
            "alice",
            "api_request",
            json!({"provider": "slack", "method": "GET", "path": "conversations.list"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let result = &body["result"];
    assert_eq!(result["isError"], true, "{body}");
    let outcome = &result["structuredContent"];
    assert_eq!(outcome["http_status"], 200, "{body}");
    assert_eq!(outcome["next_step"], "approve", "{body}");
    assert_eq!(outcome["error"]["kind"], "http_error", "{body}");
    assert!(
        outcome["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing_scope"),
        "{body}"
    );
    // The body is still there for the model to read (`needed`).
    assert_eq!(outcome["body"]["needed"], "channels:read", "{body}");
}

#[tokio::test]
async fn deny_at_a_real_style_provider_is_a_declined_page_and_answer() {
    let fake = fakes::github::start().await;
    let app = app_with(&fake, "github").await;
    let (url, state) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "github"}),
        "connect_github",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    fake.deny_next();
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let page = browser.get(callback.as_str()).await;
    assert!(
        page.body.to_lowercase().contains("declined"),
        "{}",
        page.body
    );
    let body = retry_accepted(
        &app,
        "alice",
        "whoami",
        json!({"provider": "github"}),
        &state,
        "connect_github",
    )
    .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert_eq!(fake.calls().token, 0, "no code was exchanged");
}

#[tokio::test]
async fn reloading_the_success_page_shows_the_connection_again() {
    let fake = fakes::github::start().await;
    let app = app_with(&fake, "github").await;
    let (url, _) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "github"}),
        "connect_github",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let done = browser.get(callback.as_str()).await;
    assert_eq!(done.status, 200, "{}", done.body);
    let again = browser.get(callback.as_str()).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(
        again.body.contains("connected as octocat"),
        "{}",
        again.body
    );
    assert_eq!(fake.calls().token, 1, "the spent code is not sent again");
    // Another browser replaying the same URL still learns nothing.
    let other = Browser::new(&app).get(callback.as_str()).await;
    assert_eq!(other.status, 400, "{}", other.body);
}

/// Tokens the provider issued that the service then fails to store (the
/// database refuses the row) are revoked at the provider: no live grant is
/// left behind that nobody here knows of. The person sees the error page;
/// nothing is stored.
#[tokio::test]
async fn tokens_that_cannot_be_stored_are_revoked_at_the_provider() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    // The database refuses every new connection, as a full disk or a
    // broken constraint would.
    refuse(&app.db, "connections", "INSERT").await;
    let (url, _) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "google"}),
        "connect_google",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let done = browser.get(callback.as_str()).await;
    assert_eq!(done.status, 500, "{}", done.body);
    assert!(
        !done.body.contains("no room"),
        "no internals: {}",
        done.body
    );
    assert_eq!(
        fake.calls().revoke,
        2,
        "the refresh token, then the access token"
    );
    assert_eq!(
        crate::helpers::count(&app, "SELECT count(*) FROM connections").await,
        0
    );
    // What was issued no longer works at the provider.
    for token in fake.secrets() {
        let answer = fakes::no_redirects()
            .get(format!("{}/v1/userinfo", fake.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_ne!(answer.status(), 200, "a token still works");
    }
}

/// The same failure on a reconnect of an account already connected
/// revokes nothing: at Google the new tokens are of the stored grant, and
/// revoking them would end the connection that works.
#[tokio::test]
async fn a_reconnect_that_cannot_be_stored_leaves_the_stored_grant_alone() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    refuse(&app.db, "connections", "INSERT OR UPDATE").await;
    let args =
        json!({"provider": "google", "scopes": ["https://www.googleapis.com/auth/drive.readonly"]});
    let (url, _) = elicit(&app, "alice", "connect", args, "connect_google").await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let callback = fake.visit(to_provider.location.as_deref().unwrap()).await;
    let done = browser.get(callback.as_str()).await;
    assert_eq!(done.status, 500, "{}", done.body);
    assert_eq!(fake.calls().revoke, 0, "{:?}", fake.calls());
    allow(&app.db, "connections").await;
    let (_, body) = app
        .call_tool("alice", "whoami", json!({"provider": "google"}))
        .await;
    assert_eq!(body["result"]["resultType"], "complete", "{body}");
    assert_ne!(
        body["result"]["isError"], true,
        "the stored connection works: {body}"
    );
}

/// The connections page says so too when the provider could not revoke.
#[tokio::test]
async fn the_page_says_when_the_provider_could_not_revoke() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    connect(&app, &fake, "google").await;
    fake.fail_with(Some(503));
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let confirm = browser.get("/connections/google/disconnect").await;
    let gone = browser
        .submit(&confirm, "/connections/google/disconnect", &[])
        .await;
    let after = browser.follow(&gone).await;
    assert!(
        after.body.contains("Google disconnected."),
        "{}",
        after.body
    );
    assert!(
        after.body.contains("may still be live there"),
        "{}",
        after.body
    );
}

/// A connect link for a provider the operator removed since: the person
/// is told this server no longer connects it (410), not "something went
/// wrong".
#[tokio::test]
async fn a_link_for_a_provider_removed_since_says_so() {
    let fake = fakes::google::start().await;
    let app = app_with(&fake, "google").await;
    let (url, _) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "google"}),
        "connect_google",
    )
    .await;
    let ticket = url.split_once("?ticket=").unwrap().1;
    // An instance whose configuration no longer has Google.
    // (Signed in through the first: the cookie is the same host's.)
    let without = app.second_instance().await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let opened = browser
        .get(&format!("{}/connect?ticket={ticket}", without.addr))
        .await;
    let consent = opened.location.as_deref().unwrap_or_default();
    assert!(consent.starts_with("/connect/consent?t="), "{consent}");
    let page = browser.get(&format!("{}{consent}", without.addr)).await;
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(
        page.body.contains("no longer connects this service"),
        "{}",
        page.body
    );
}
