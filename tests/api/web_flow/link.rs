//! The ticket link: unusable links, the sign-in round trip, the identity
//! check, and the connections page that mints links of its own.

use super::*;
use mcp_connect::domain::{ProviderName, UserRef};

#[tokio::test]
async fn unusable_links_show_the_expired_page() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    let (expired, _) = ticket(&app, "alice", -5).await;
    let (used, used_id) = ticket(&app, "alice", 600).await;
    let (declined, declined_id) = ticket(&app, "alice", 600).await;
    sqlx::query("UPDATE connect_tickets SET redeemed_at = now() WHERE id = $1")
        .bind(used_id)
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE connect_tickets SET declined_at = now() WHERE id = $1")
        .bind(declined_id)
        .execute(&app.db)
        .await
        .unwrap();
    let huge = "x".repeat(5000);
    let cases = [
        format!("/connect?ticket={expired}"),
        format!("/connect?ticket={used}"),
        format!("/connect?ticket={declined}"),
        "/connect?ticket=nosuchticket".to_owned(),
        "/connect?ticket=%FF%FE%00".to_owned(),
        format!("/connect?ticket={huge}"),
    ];
    for (i, path) in cases.iter().enumerate() {
        let browser = if i % 2 == 0 {
            &alice
        } else {
            &Browser::new(&app)
        };
        let page = browser.get(path).await;
        assert_eq!(page.status, 410, "{path}: {}", page.body);
        assert!(
            page.body.contains("This link has expired or was already used. Go back to your MCP client and try again."),
            "{}",
            page.body
        );
        assert!(page.location.is_none());
    }
}

#[tokio::test]
async fn without_a_session_the_link_goes_through_sign_in_and_back_to_consent() {
    let app = spawn_app().await;
    let (t, _) = ticket(&app, "alice", 600).await;
    let browser = Browser::new(&app);
    let start = browser.get(&format!("/connect?ticket={t}")).await;
    assert_eq!(start.status, 303);
    assert!(
        !start.location.as_deref().unwrap().contains(&t),
        "ticket leaked to the IdP"
    );
    let landed = browser.sign_in_from(start, "alice").await;
    assert_sent_to_consent(&landed);
    let page = browser.follow(&landed).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Connect your Demo account?"),
        "{}",
        page.body
    );
    assert!(page.body.contains("test-client"));
    assert!(page.body.contains(&format!("127.0.0.1:{}", app.port)));
    assert!(!page.body.contains(&t));
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM oauth_flows WHERE return_to LIKE '%' || $1 || '%'",
    )
    .bind(&t)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(stored, 0);
}

#[tokio::test]
async fn a_link_opened_by_another_account_is_refused_and_left_for_its_owner() {
    let app = spawn_app().await;
    let (t, id) = ticket(&app, "alice", 600).await;
    let bob = signed_in(&app, "bob").await;
    let page = bob.get(&format!("/connect?ticket={t}")).await;
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(page.location.is_none());
    assert!(page.body.contains("This link was made for another account"));
    assert!(
        page.body
            .contains("If someone sent it to you, do not continue.")
    );
    assert!(!page.body.contains("/dev/demo"));
    // The ticket-less consent URL refuses bob as well.
    let again = bob.get("/connect/consent").await;
    assert_eq!(again.status, 403, "{}", again.body);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM oauth_flows WHERE kind = 'connect'"
        )
        .await,
        0
    );
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_events WHERE kind = 'identity_mismatch' AND subject = 'alice'
           AND detail->>'session_subject' = 'bob'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(audited, 1, "once, though the consent page refused too");
    let redeemed: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT redeemed_at FROM connect_tickets WHERE id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(redeemed.is_none());

    // "Sign out and use another account" signs in again and comes back to
    // the same link — carried server-side.
    let out = bob.submit(&page, "/logout", &[]).await;
    assert_eq!(out.status, 303, "{}", out.body);
    let to_idp = out.location.clone().unwrap();
    assert!(to_idp.contains("prompt=login"), "{to_idp}");
    assert!(!to_idp.contains(&t));
    let landed = bob.sign_in_from(out, "alice").await;
    assert_sent_to_consent(&landed);
    let consent_page = bob.follow(&landed).await;
    assert_eq!(consent_page.status, 200, "{}", consent_page.body);

    // And alice's own browser can still use the ticket.
    let alice = signed_in(&app, "alice").await;
    let url = start_flow(&app, &alice, &t).await;
    assert!(param(&url, "state").is_some());
}

#[tokio::test]
async fn the_connections_page_lists_disconnects_and_reconnects() {
    use mcp_connect::{
        connect::vault::{NewConnection, store_connection},
        providers::{Account, TokenSet},
    };
    let app = spawn_app().await;
    let tokens = TokenSet {
        access_token: secrecy::SecretString::from("at-very-secret".to_owned()),
        received: std::time::Instant::now(),
        refresh_token: Some(secrecy::SecretString::from("rt-very-secret".to_owned())),
        expires_in: Some(std::time::Duration::from_secs(3600)),
        scopes: Some(vec!["profile".to_owned()]),
        token_type: "Bearer".to_owned(),
    };
    let account = Account {
        id: "42".into(),
        label: "alice-at-demo".into(),
    };
    store_connection(
        &app.state.connect,
        NewConnection {
            user: UserRef::new(&app.dev.issuer(), "alice"),
            provider: &ProviderName::parse("demo").unwrap(),
            account: &account,
            tokens: &tokens,
            requested_scopes: &[],
            client_id: Some("test-client"),
        },
    )
    .await
    .unwrap();
    let alice = signed_in(&app, "alice").await;
    let page = alice.get("/connections").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("alice-at-demo"), "{}", page.body);
    assert!(!page.body.contains("very-secret"));
    // Someone else sees nothing of it.
    let bob = signed_in(&app, "bob").await;
    assert!(!bob.get("/connections").await.body.contains("alice-at-demo"));

    let again = alice
        .submit(&page, "/connections/demo/reconnect", &[])
        .await;
    assert_sent_to_consent(&again);
    let consent_page = alice.follow(&again).await;
    assert_eq!(consent_page.status, 200, "{}", consent_page.body);
    assert!(
        consent_page
            .body
            .contains("You, from your connections page")
    );
    let to_provider = alice
        .submit(&consent_page, "/connect", &[("action", "continue")])
        .await;
    assert_eq!(to_provider.status, 303, "{}", to_provider.body);

    // Without the form's token, nothing happens; with it, the row goes.
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let forged = alice
        .post_form(
            "/connections/demo/disconnect",
            &[("connection".to_owned(), id.to_string())],
        )
        .await;
    assert_eq!(forged.status, 403);
    // Nor without naming the account.
    let unnamed = alice.post_form("/connections/demo/disconnect", &[]).await;
    assert_eq!(unnamed.status, 400, "{}", unnamed.body);
    assert_eq!(
        alice
            .post_form("/connections/NOPE!/disconnect", &[])
            .await
            .status,
        400
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    // Disconnect asks first, on a page of its own.
    let confirm = alice.get("/connections/demo/disconnect").await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    assert!(confirm.body.contains("alice-at-demo"), "{}", confirm.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    let gone = alice
        .submit(&confirm, "/connections/demo/disconnect", &[])
        .await;
    assert!(
        gone.location.as_deref().is_some_and(
            |l| l.starts_with("/connections?done=disconnected&provider=demo&connection=")
        ),
        "{:?} {}",
        gone.location,
        gone.body
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    let after = alice.follow(&gone).await;
    assert!(!after.body.contains("alice-at-demo"));
    assert!(after.body.contains("Demo disconnected."), "{}", after.body);
    assert!(after.body.contains("Connect Demo"), "{}", after.body);
}

/// The notice after a disconnect is shown only from this session's own
/// redirect: a crafted link shows nothing, whatever it names — not even
/// something true — and never text of its own.
#[tokio::test]
async fn a_crafted_disconnect_link_shows_no_notice() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    for query in [
        "provider=nope",
        "provider=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "provider=",
        "provider=demo",
        "provider=demo&connection=6f1c2d3e-0000-4000-8000-000000000000",
        "provider=demo&revocation=failed&csrf=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        let page = alice
            .get(&format!("/connections?done=disconnected&{query}"))
            .await;
        assert_eq!(page.status, 200, "{query}");
        assert!(
            !page.body.contains("disconnected."),
            "{query}: {}",
            page.body
        );
        assert!(!page.body.contains("<script>alert"), "{query}");
    }
}

/// With two accounts at a provider, disconnecting one says so, though
/// the provider is still connected through the other.
#[tokio::test]
async fn disconnecting_one_of_two_accounts_says_so() {
    let app = spawn_app().await;
    crate::accounts::store(&app, "u-1", "work", crate::helpers::CLIENT_ID).await;
    crate::accounts::store(&app, "u-2", "home", crate::helpers::CLIENT_ID).await;
    let alice = signed_in(&app, "alice").await;
    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections WHERE account_id = 'u-2'")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let confirm = alice
        .get(&format!("/connections/demo/disconnect?connection={id}"))
        .await;
    assert!(confirm.body.contains("home"), "{}", confirm.body);
    let gone = alice
        .submit(&confirm, "/connections/demo/disconnect", &[])
        .await;
    let after = alice.follow(&gone).await;
    assert!(
        after
            .body
            .contains("One of your Demo accounts was disconnected."),
        "{}",
        after.body
    );
    assert!(after.body.contains("work"), "{}", after.body);
    // A link naming an account that is still there claims nothing.
    let work: uuid::Uuid = sqlx::query_scalar("SELECT id FROM connections")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let page = alice
        .get(&format!(
            "/connections?done=disconnected&provider=demo&connection={work}"
        ))
        .await;
    assert!(!page.body.contains("disconnected."), "{}", page.body);
}

/// A disconnect that waits for a refresh claimed elsewhere may outlast
/// the page's time limit: the page says it is under way instead of
/// failing, the disconnect ends once the claim does, and the same notice
/// then says it is done.
#[tokio::test]
async fn a_disconnect_that_outlasts_its_page_says_it_goes_on() {
    let app = crate::helpers::spawn_app_with(|t| {
        let mut web = toml::Table::new();
        web.insert("page_timeout_secs".into(), 4.into());
        t.insert("web".into(), toml::Value::Table(web));
    })
    .await;
    crate::accounts::store(&app, "u-1", "work", crate::helpers::CLIENT_ID).await;
    let alice = signed_in(&app, "alice").await;
    let confirm = alice.get("/connections/demo/disconnect").await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    // Another instance is refreshing the connection.
    sqlx::query(
        "INSERT INTO refresh_claims (connection_id, claim_id, claimed_until)
         SELECT id, gen_random_uuid(), now() + interval '1 minute' FROM connections",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let under_way = alice
        .submit(&confirm, "/connections/demo/disconnect", &[])
        .await;
    assert_eq!(under_way.status, 303, "{}", under_way.body);
    let page = alice.follow(&under_way).await;
    assert!(
        page.body
            .contains("Disconnecting Demo is taking longer than usual"),
        "{}",
        page.body
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);

    // The refresh ends; the disconnect goes on to its end.
    sqlx::query("DELETE FROM refresh_claims")
        .execute(&app.db)
        .await
        .unwrap();
    for _ in 0..250 {
        if count(&app, "SELECT count(*) FROM connections").await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    let reloaded = alice.follow(&under_way).await;
    assert!(
        reloaded.body.contains("Demo disconnected."),
        "{}",
        reloaded.body
    );
}

#[tokio::test]
async fn the_reconnect_button_takes_the_same_link_limit_as_tools() {
    let app = crate::helpers::spawn_app_with(|t| {
        let mut flow = toml::Table::new();
        flow.insert("links_per_minute".into(), 2.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await;
    let alice = signed_in(&app, "alice").await;
    let page = alice.get("/connections").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for _ in 0..2 {
        let sent = alice
            .submit(&page, "/connections/demo/reconnect", &[])
            .await;
        assert_sent_to_consent(&sent);
    }
    let refused = alice
        .submit(&page, "/connections/demo/reconnect", &[])
        .await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.headers.get("retry-after").is_some());
    assert!(
        refused.body.contains("Too many connect links"),
        "{}",
        refused.body
    );
    let issued: i64 = sqlx::query_scalar("SELECT count(*) FROM connect_tickets")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(issued, 2);
}

#[tokio::test]
async fn error_pages_show_who_is_signed_in_and_lead_back_to_the_connections() {
    let app = spawn_app().await;
    let browser = signed_in(&app, "alice").await;
    let page = browser.get("/connect?ticket=tnot-a-real-ticket").await;
    assert!(page.status >= 400, "{}", page.body);
    assert!(
        page.body.contains("Signed in as <strong>alice"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("Not signed in"), "{}", page.body);
    assert!(
        page.body.contains(r#"href="/connections""#),
        "{}",
        page.body
    );
    // Signed out, the page says so and still leads somewhere.
    let page = Browser::new(&app).get("/oauth/callback/demo?state=x").await;
    assert_eq!(page.status, 400, "{}", page.body);
    assert!(page.body.contains("Not signed in"), "{}", page.body);
    assert!(
        page.body
            .contains(r#"class="button primary" href="/connections""#),
        "{}",
        page.body
    );
}

/// The consent page of a Reconnect on the connections page.
async fn reconnect_consent(alice: &Browser) -> Page {
    let list = alice.get("/connections").await;
    let again = alice
        .submit(&list, "/connections/demo/reconnect", &[])
        .await;
    assert_sent_to_consent(&again);
    alice.follow(&again).await
}

/// A page that ends a connect begun on the connections page: it offers the
/// way back there (every page's header links it too, so the button is
/// what tells) and sends the person to no MCP client, in any case.
fn ends_on_connections_page(page: &Page, what: &str) {
    assert_eq!(page.status, 200, "{what}: {}", page.body);
    let lower = page.body.to_lowercase();
    for client in ["your mcp client ", "your mcp client."] {
        assert!(!lower.contains(client), "{what}: {}", page.body);
    }
    assert!(
        page.body.contains("See your connections"),
        "{what}: {}",
        page.body
    );
}

/// A connect the person asked for on their connections page ends on pages
/// that send them back there, never to an MCP client that did not ask:
/// Cancel (twice: a double click says it again), a decline at the
/// provider and a success. A client's link still says "MCP client".
#[tokio::test]
async fn a_connect_begun_on_the_connections_page_ends_without_naming_a_client() {
    let app = spawn_app().await;
    crate::full_flow::connect_demo(&app, "alice", "octo").await;
    let alice = signed_in(&app, "alice").await;

    let consent = reconnect_consent(&alice).await;
    for _ in 0..2 {
        let cancelled = alice
            .submit(&consent, "/connect", &[("action", "cancel")])
            .await;
        ends_on_connections_page(&cancelled, "cancel");
        assert!(
            cancelled.body.contains("Nothing was connected"),
            "{}",
            cancelled.body
        );
    }
    let cancels = "SELECT count(*) FROM audit_events WHERE kind = 'consent_cancelled'";
    assert_eq!(count(&app, cancels).await, 1, "one Cancel recorded");

    let consent = reconnect_consent(&alice).await;
    let to_provider = alice
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    let back = crate::full_flow::deny_at_demo(&alice, &to_provider, "octo").await;
    let declined = alice.follow(&back).await;
    ends_on_connections_page(&declined, "declined at the provider");
    assert!(
        declined.body.contains("You declined access"),
        "{}",
        declined.body
    );

    let consent = reconnect_consent(&alice).await;
    let to_provider = alice
        .submit(&consent, "/connect", &[("action", "continue")])
        .await;
    let done = crate::full_flow::approve_at_demo(&alice, &to_provider, "octo").await;
    ends_on_connections_page(&done, "connected");
    assert!(
        done.body.contains("Demo connected as octo"),
        "{}",
        done.body
    );

    // A client's link: the page names the client the person returns to.
    let (link, _) = ticket(&app, "alice", 600).await;
    let opened = alice.get(&format!("/connect?ticket={link}")).await;
    let consent = alice.follow(&opened).await;
    let cancelled = alice
        .submit(&consent, "/connect", &[("action", "cancel")])
        .await;
    assert!(
        cancelled.body.contains("your MCP client will be told"),
        "{}",
        cancelled.body
    );
}
