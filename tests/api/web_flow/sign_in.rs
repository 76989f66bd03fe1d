//! Signing in and out: the session cookie, the sign-in bound to its browser,
//! sign-out, forged cookies, a missing web client id.

use super::*;

#[tokio::test]
async fn login_sets_a_session_cookie_with_the_right_attributes() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let start = browser.get("/login?return_to=/connections").await;
    let [pre] = start.set_login_cookies()[..] else {
        panic!("one pre-login cookie: {:?}", start.set_cookies)
    };
    let pre = pre.to_owned();
    let landed = browser.sign_in_from(start, "alice").await;
    let cookie = landed
        .set_cookie("mcp_connect_session")
        .expect("session cookie")
        .to_owned();
    for header in [pre.as_str(), cookie.as_str()] {
        let attrs: Vec<&str> = header.split("; ").collect();
        assert!(attrs.contains(&"HttpOnly"), "{header}");
        assert!(attrs.contains(&"SameSite=Lax"), "{header}");
        assert!(attrs.contains(&"Path=/"), "{header}");
        // Plain-http dev mode: no Secure, hence no __Host- prefix.
        assert!(
            !attrs.iter().any(|a| a.eq_ignore_ascii_case("Secure")),
            "{header}"
        );
        assert!(!attrs.iter().any(|a| a.starts_with("Domain")), "{header}");
    }
    let pre_name = pre.split('=').next().unwrap();
    let cleared = landed
        .set_cookie(pre_name)
        .expect("pre-login cookie cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_eq!(landed.location.as_deref(), Some("/connections"));

    let value = browser.cookie("mcp_connect_session").expect("stored");
    let page = browser.get("/connections").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Signed in as <strong>alice</strong>"),
        "{}",
        page.body
    );
    assert!(!page.body.contains(&value));
    // Only the hash is stored.
    let hashed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM web_sessions WHERE id_hash = $1 AND subject = 'alice'",
    )
    .bind(Sha256::digest(value.as_bytes()).to_vec())
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(hashed, 1);
}

/// The sign-in asks the identity provider for the scopes README.md says
/// to register the web client with, and no others.
#[tokio::test]
async fn the_sign_in_asks_for_openid_and_profile() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let start = browser.get("/login?return_to=/connections").await;
    let location = start
        .location
        .as_deref()
        .expect("sent to the identity provider");
    let url = url::Url::parse(location).unwrap();
    let scope = url
        .query_pairs()
        .find(|(k, _)| k == "scope")
        .map(|(_, v)| v.into_owned());
    assert_eq!(scope.as_deref(), Some("openid profile"), "{location}");
}

#[tokio::test]
async fn a_sign_in_finishes_only_in_the_browser_that_started_it() {
    let app = spawn_app().await;
    let victim = Browser::new(&app);
    let attacker = Browser::new(&app);
    let start = attacker.get("/login").await;
    let idp = attacker.follow(&start).await;
    let back = attacker
        .submit(
            &idp,
            "/dev/idp/authorize",
            &[("username", "mallory"), ("action", "sign-in")],
        )
        .await;
    // The attacker's callback URL, opened by someone else's browser.
    let planted = victim.follow(&back).await;
    assert_eq!(planted.status, 400, "{}", planted.body);
    assert!(planted.set_cookie("mcp_connect_session").is_none());
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 0);
}

#[tokio::test]
async fn logout_ends_the_session_and_forged_cookies_are_signed_out() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let value = alice.cookie("mcp_connect_session").unwrap();
    let page = alice.get("/connections").await;
    let out = alice.submit(&page, "/logout", &[]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(out.body.contains("You are signed out"));
    let removal = out.set_cookie("mcp_connect_session").unwrap();
    assert!(removal.contains("Max-Age=0"), "{removal}");
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 0);
    let after = alice.get("/connections").await;
    assert_eq!(after.status, 303);
    assert_eq!(
        after.location.as_deref(),
        Some("/login?return_to=/connections")
    );

    let base = url::Url::parse(&app.base).unwrap();
    for forged in [
        value.clone(), // the old, ended session
        "A".repeat(43),
        "not-a-session".to_owned(),
        "%FF%00".to_owned(),
        "x".repeat(4000),
    ] {
        let browser = Browser::new(&app);
        browser
            .jar
            .add_cookie_str(&format!("mcp_connect_session={forged}; Path=/"), &base);
        let page = browser.get("/connections").await;
        assert_eq!(page.status, 303, "{forged}: {}", page.body);
        let consent = browser.get("/connect/consent").await;
        assert_eq!(consent.status, 303, "{}", consent.body);
    }
}

#[tokio::test]
async fn starting_a_sign_in_reuses_the_identity_providers_metadata() {
    // The identity provider is another application's, so it can be stopped.
    let idp = spawn_app().await;
    let issuer = idp.dev.issuer();
    let app = crate::helpers::spawn_app_with(|table| {
        if let Some(toml::Value::Table(auth)) = table.get_mut("auth") {
            auth.insert("issuer".into(), toml::Value::String(issuer.clone()));
        }
    })
    .await;
    let first = Browser::new(&app).get("/login").await;
    assert_eq!(first.status, 303, "{}", first.body);
    let authorize = first.location.clone().expect("redirect to the provider");
    assert!(authorize.starts_with(&issuer), "{authorize}");

    let idp_base = idp.addr.clone();
    drop(idp);
    let probe = reqwest::Client::new();
    for _ in 0..100 {
        if probe
            .get(format!("{idp_base}/healthz"))
            .send()
            .await
            .is_err()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        probe
            .get(format!("{idp_base}/healthz"))
            .send()
            .await
            .is_err(),
        "the identity provider is down"
    );

    // Another visitor starts a sign-in: no discovery is needed for that.
    let second = Browser::new(&app).get("/login").await;
    assert_eq!(second.status, 303, "{}", second.body);
    assert!(
        second
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(&issuer)),
        "{:?}",
        second.location
    );
}

/// An identity provider at a host's root whose metadata spells its issuer
/// with the trailing slash, as Auth0 does: the issuer, and the server
/// (stopped when dropped).
async fn root_issuer_with_slash() -> (String, provider_fakes::server::Server) {
    use actix_web::{HttpResponse, web};
    let bound = provider_fakes::server::bind();
    let base = bound.base.clone();
    let metadata = serde_json::json!({
        "issuer": format!("{base}/"),
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "jwks_uri": format!("{base}/.well-known/jwks.json"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    });
    let server = bound.serve(move |cfg| {
        let metadata = metadata.clone();
        cfg.route(
            "/.well-known/openid-configuration",
            web::get().to(move || {
                let metadata = metadata.clone();
                async move { HttpResponse::Ok().json(metadata) }
            }),
        )
        .route(
            "/.well-known/jwks.json",
            web::get().to(|| async { HttpResponse::Ok().json(serde_json::json!({"keys": []})) }),
        );
    });
    (format!("{base}/"), server)
}

#[tokio::test]
async fn an_issuer_spelled_with_a_trailing_slash_at_the_root_signs_in() {
    let (issuer, _idp) = root_issuer_with_slash().await;
    let app = crate::helpers::spawn_app_with(|table| {
        if let Some(toml::Value::Table(auth)) = table.get_mut("auth") {
            auth.insert("issuer".into(), toml::Value::String(issuer.clone()));
        }
    })
    .await;
    let start = Browser::new(&app).get("/login").await;
    assert_eq!(start.status, 303, "{}", start.body);
    assert!(
        start
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(&format!("{issuer}authorize?"))),
        "{:?}",
        start.location
    );

    // Its callback names it (RFC 9207) with the slash, as its metadata
    // does: that is our issuer, so the code is exchanged (and fails here,
    // as this provider has no token endpoint), not refused as another's.
    let browser = Browser::new(&app);
    let state = started_sign_in_state(&browser).await;
    let other = browser
        .get(&callback_with_iss(&state, "https://other.example/"))
        .await;
    assert!(
        other.body.contains("unexpected identity provider"),
        "another issuer is refused: {} {}",
        other.status,
        other.body
    );
    // The refusal ends that sign-in; a new one with the right issuer goes on.
    assert_eq!(
        other.set_login_cookies().len(),
        1,
        "{:?}",
        other.set_cookies
    );
    let state = started_sign_in_state(&browser).await;
    let ours = browser.get(&callback_with_iss(&state, &issuer)).await;
    assert!(
        !ours.body.contains("unexpected identity provider"),
        "{} {}",
        ours.status,
        ours.body
    );
    assert_eq!(
        ours.status, 502,
        "the code exchange was tried: {}",
        ours.body
    );

    // Its metadata does not promise `iss` (RFC 9207): a callback without
    // it is its own too.
    let state = started_sign_in_state(&browser).await;
    let unnamed = browser
        .get(&format!("/auth/callback?code=abc&state={state}"))
        .await;
    assert_eq!(
        unnamed.status, 502,
        "the code exchange was tried: {}",
        unnamed.body
    );
}

/// The dev issuer's metadata promises `iss` in every authorization
/// response (RFC 9207), so a callback without it did not come from there
/// (section 2.4: a mix-up) and is refused before any code is exchanged;
/// the issuer's own responses, which name it, sign in.
#[tokio::test]
async fn a_callback_without_iss_is_refused_when_the_issuer_promises_it() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let state = started_sign_in_state(&browser).await;
    let unnamed = browser
        .get(&format!("/auth/callback?code=abc&state={state}"))
        .await;
    assert!(
        unnamed.body.contains("unexpected identity provider"),
        "{} {}",
        unnamed.status,
        unnamed.body
    );
    assert_eq!(
        count(&app, "SELECT count(*) FROM web_sessions").await,
        0,
        "nobody signed in"
    );

    let browser = Browser::new(&app);
    let start = browser.get("/login?return_to=/connections").await;
    let landed = browser.sign_in_from(start, "alice").await;
    assert_eq!(landed.location.as_deref(), Some("/connections"));
    assert!(browser.cookie("mcp_connect_session").is_some());
}

/// The `state` of a sign-in `browser` starts now (from its redirect to
/// the identity provider).
async fn started_sign_in_state(browser: &Browser) -> String {
    let start = browser.get("/login").await;
    let authorize = url::Url::parse(start.location.as_deref().unwrap()).unwrap();
    param(&authorize, "state").unwrap()
}

/// A sign-in callback with a made-up code, naming its issuer.
fn callback_with_iss(state: &str, iss: &str) -> String {
    format!(
        "/auth/callback?{}",
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("code", "abc")
            .append_pair("state", state)
            .append_pair("iss", iss)
            .finish()
    )
}

#[tokio::test]
async fn anonymous_sign_in_starts_write_no_row_and_still_sign_in() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let before = count(&app, "SELECT count(*) FROM oauth_flows").await;
    let mut last = None;
    for i in 0..60 {
        let browser = Browser::new(&app);
        let path = if i % 2 == 0 {
            "/login?return_to=/connections".to_owned()
        } else {
            format!("/connect?ticket={t}")
        };
        let page = browser.get(&path).await;
        assert_eq!(page.status, 303, "{path}: {}", page.body);
        last = Some((browser, page));
    }
    assert_eq!(
        count(&app, "SELECT count(*) FROM oauth_flows").await,
        before
    );
    assert_eq!(
        count(&app, "SELECT count(*) FROM web_sessions").await,
        0,
        "no row of any kind for a visitor"
    );
    // The last visitor (a connect link) still signs in and lands on consent.
    let (browser, start) = last.unwrap();
    let landed = browser.sign_in_from(start, "alice").await;
    assert_sent_to_consent(&landed);
    assert_eq!(browser.follow(&landed).await.status, 200);
}

#[tokio::test]
async fn a_pre_login_cookie_does_not_finish_another_browsers_sign_in() {
    let app = spawn_app().await;
    // Two sign-ins in progress; each browser's callback URL opened with the
    // other's cookie fails.
    let a = Browser::new(&app);
    let b = Browser::new(&app);
    let start_a = a.get("/login").await;
    let start_b = b.get("/login").await;
    let idp_a = a.follow(&start_a).await;
    let back_a = a
        .submit(
            &idp_a,
            "/dev/idp/authorize",
            &[("username", "alice"), ("action", "sign-in")],
        )
        .await;
    drop(start_b);
    let crossed = b.follow(&back_a).await;
    assert_eq!(crossed.status, 400, "{}", crossed.body);
    assert!(crossed.set_cookie("mcp_connect_session").is_none());
    // Its own browser still finishes.
    let own = a.follow(&back_a).await;
    assert_eq!(own.status, 303, "{}", own.body);
    assert!(own.set_cookie("mcp_connect_session").is_some());
}

#[tokio::test]
async fn two_tabs_signing_in_at_once_both_finish_in_one_session() {
    let app = spawn_app().await;
    let (link_a, _) = ticket(&app, "alice", 600).await;
    let (link_b, id_b) = ticket(&app, "alice", 600).await;
    // Two connect links opened signed out, in two tabs of one browser.
    let browser = Browser::new(&app);
    let start_a = browser.get(&format!("/connect?ticket={link_a}")).await;
    let start_b = browser.get(&format!("/connect?ticket={link_b}")).await;
    let landed_a = browser.sign_in_from(start_a, "alice").await;
    assert_sent_to_consent(&landed_a);
    let consent_a = browser.follow(&landed_a).await;
    assert_eq!(consent_a.status, 200, "{}", consent_a.body);
    let landed_b = browser.sign_in_from(start_b, "alice").await;
    assert_sent_to_consent(&landed_b);
    assert!(
        landed_b.set_cookie("mcp_connect_session").is_none(),
        "the session of the first tab goes on"
    );
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 1);
    // The second tab shows its own link; the first tab's form still works.
    let consent_b = browser.follow(&landed_b).await;
    assert!(
        consent_b.body.contains(&id_b.to_string()),
        "{}",
        consent_b.body
    );
    let answer = browser
        .submit(&consent_a, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert!(
        answer
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(&format!("{}/dev/demo/authorize?", app.base))),
        "{:?}",
        answer.location
    );
}

#[tokio::test]
async fn a_sign_in_as_someone_else_ends_the_session_it_finds() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let start_bob = browser.get("/login").await;
    browser.sign_in("alice").await;
    let landed = browser.sign_in_from(start_bob, "bob").await;
    assert!(landed.set_cookie("mcp_connect_session").is_some());
    let subjects: Vec<String> = sqlx::query_scalar("SELECT subject FROM web_sessions")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(subjects, vec!["bob".to_owned()]);
}

#[tokio::test]
async fn starting_more_sign_ins_than_a_browser_may_hold_ends_the_earlier_ones() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let mut starts = Vec::new();
    for _ in 0..mcp_connect::web::cookies::MAX_LOGINS_IN_PROGRESS {
        let start = browser.get("/login").await;
        assert!(
            start.set_cookies.iter().all(|c| !c.contains("Max-Age=0")),
            "{:?}",
            start.set_cookies
        );
        starts.push(start);
    }
    let last = browser.get("/login").await;
    let removed = last
        .set_login_cookies()
        .iter()
        .filter(|c| c.contains("Max-Age=0"))
        .count();
    assert_eq!(removed, starts.len(), "{:?}", last.set_cookies);
    // The earlier ones can no longer finish; the last one does.
    let idp = browser.follow(&starts[0]).await;
    let back = browser
        .submit(
            &idp,
            "/dev/idp/authorize",
            &[("username", "alice"), ("action", "sign-in")],
        )
        .await;
    assert_eq!(browser.follow(&back).await.status, 400);
    let landed = browser.sign_in_from(last, "alice").await;
    assert!(landed.set_cookie("mcp_connect_session").is_some());
}

#[tokio::test]
async fn expired_login_flows_are_swept_without_grace() {
    let app = spawn_app().await;
    sqlx::query(
        "INSERT INTO oauth_flows (id, state_hash, kind, pkce_verifier, key_id, expires_at)
         VALUES (gen_random_uuid(), '\\x01', 'login', '\\x00', 'dev1', now() - interval '1 minute')",
    )
    .execute(&app.db)
    .await
    .unwrap();
    mcp_connect::sweeper::sweep_once(&app.db, app.state.settings.audit.retention())
        .await
        .unwrap();
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'login'"
        )
        .await,
        0
    );
}

/// A link whose ticket is deleted while its person signs in (a disconnect
/// in another tab deletes an approval ticket with its connection): the
/// sign-in still ends with a session, and the link's page says it has
/// ended, not "Something went wrong".
#[tokio::test]
async fn a_link_deleted_while_its_person_signs_in_ends_on_its_page_not_in_an_error() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let (link, id) = ticket(&app, "alice", 600).await;
    let start = browser.get(&format!("/connect?ticket={link}")).await;
    assert_eq!(start.status, 303, "{}", start.body);
    let idp_page = browser.follow(&start).await;
    let back = browser
        .submit(
            &idp_page,
            "/dev/idp/authorize",
            &[("username", "alice"), ("action", "sign-in")],
        )
        .await;
    sqlx::query("DELETE FROM connect_tickets WHERE id = $1")
        .bind(id)
        .execute(&app.db)
        .await
        .unwrap();
    let callback = browser.follow(&back).await;
    assert_eq!(callback.status, 303, "{}", callback.body);
    let page = browser.follow(&callback).await;
    assert_eq!(page.status, 410, "{}", page.body);
    assert!(
        page.body.contains("expired or was already used"),
        "{}",
        page.body
    );
    assert_eq!(browser.get("/connections").await.status, 200);
}

/// The dev sign-in's log line names the client, whose id is the requester's
/// to choose (up to 512 characters): only its start is logged.
#[tokio::test]
async fn the_dev_sign_in_logs_only_the_start_of_a_long_client_id() {
    let app = spawn_app().await;
    let user = format!("u{}", &Uuid::new_v4().simple().to_string()[..12]);
    let client_id = "Z".repeat(512);
    let challenge = "A".repeat(43);
    let form = [
        ("response_type", "code"),
        ("client_id", client_id.as_str()),
        ("redirect_uri", "http://127.0.0.1:9/callback"),
        ("code_challenge", challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("scope", "openid"),
        ("username", user.as_str()),
        ("action", "sign-in"),
    ];
    let response = app
        .http
        .post(format!("{}/dev/idp/authorize", app.addr))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303, "{}", response.text().await.unwrap());
    let logs = crate::logs::captured();
    let line = logs
        .lines()
        .find(|l| l.contains("signed in") && l.contains(&user))
        .expect("the sign-in is logged");
    let start: String = line.chars().take(300).collect();
    assert!(line.contains(&"Z".repeat(32)), "{start}");
    assert!(!line.contains(&"Z".repeat(33)), "{start}…");
}

/// The sign-in callback loaded again once the sign-in is over (a reload,
/// Back): the person is signed in, so it shows the connections rather than
/// "this sign-in has expired"; in a browser that is not signed in, the same
/// URL is still refused.
#[tokio::test]
async fn the_sign_in_callback_again_after_signing_in_shows_the_connections() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let start = browser.get("/login?return_to=/connections").await;
    let back = browser.back_from_idp(start, "alice").await;
    let callback_url = back.location.clone().expect("back to the callback");
    let landed = browser.get(&callback_url).await;
    assert_eq!(landed.status, 303, "{}", landed.body);

    let again = browser.get(&callback_url).await;
    assert_eq!(again.status, 303, "{}", again.body);
    assert_eq!(again.location.as_deref(), Some("/connections"));
    let stranger = Browser::new(&app).get(&callback_url).await;
    assert_eq!(stranger.status, 400, "{}", stranger.body);
}
