//! Removing a person (`users remove`), as an operator offboards someone:
//! their connections revoked at the provider and deleted, their sign-ins
//! ended, their connect links gone, one audit row saying so — and nobody
//! else's data touched.

use mcp_connect::{connect::users, domain::UserRef};
use secrecy::ExposeSecret;
use serde_json::Value;

use crate::{
    browser::Browser,
    full_flow::connect_demo,
    helpers::{count, spawn_app},
};

#[tokio::test]
async fn removing_a_person_revokes_and_deletes_their_connections_and_ends_their_sign_ins() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    connect_demo(&app, "bob", "robert").await;
    let token = app.demo_token("alice").await;
    // Alice is signed in in a browser, and has a connect link not yet used.
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    assert_eq!(browser.get("/connections").await.status, 200);
    let (_, _) = crate::full_flow::elicit(
        &app,
        "alice",
        "connect",
        serde_json::json!({"provider": "demo", "another_account": true}),
        "connect_demo",
    )
    .await;
    let issuer = app.dev.issuer();
    let alice = UserRef::new(&issuer, "alice");

    let before = users::record(&app.state.connect, alice).await.unwrap();
    assert_eq!(before.connections.len(), 1, "{before:?}");
    assert_eq!(before.grants.len(), 1, "the client that connected it");
    assert!(before.sessions >= 1, "{before:?}");
    assert_eq!(before.live_tickets, 1, "{before:?}");
    let shown = before.to_string();
    assert!(
        shown.contains("demo octo") && shown.contains("active") && shown.contains("clients: "),
        "{shown}"
    );
    assert!(
        !shown.contains(token.access_token.expose_secret()),
        "{shown}"
    );

    let removed = users::remove(&app.state.connect, alice).await.unwrap();
    assert_eq!(removed.connections, 1, "{removed:?}");
    assert_eq!(removed.revoked, 1, "the demo provider offers revocation");
    assert_eq!(removed.not_revoked, 0);
    assert!(removed.sessions >= 1 && removed.tickets >= 1, "{removed:?}");

    // Revoked at the provider: its API refuses the token now.
    let api = app
        .http
        .get(format!("{}/dev/demo/api/me", app.addr))
        .bearer_auth(token.access_token.expose_secret())
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 401);
    // Nothing of hers is left here; her browser is signed out.
    let after = users::record(&app.state.connect, alice).await.unwrap();
    assert!(after.is_empty(), "{after:?}");
    let theirs = |table: &str| {
        format!("SELECT count(*) FROM {table} WHERE issuer = $1 AND subject = 'alice'")
    };
    for table in ["connections", "web_sessions", "connect_tickets"] {
        let left: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(theirs(table)))
            .bind(&issuer)
            .fetch_one(&app.db)
            .await
            .unwrap();
        assert_eq!(left, 0, "{table}");
    }
    assert_eq!(browser.get("/connections").await.status, 303);
    // Bob's connection is untouched and still works.
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    let bob = app.demo_token("bob").await;
    assert_eq!(bob.account_label, "robert");

    // On the record: the disconnect, and the removal with what it did.
    let detail: Value = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE kind = 'user_removed' AND subject = 'alice'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(detail["connections"], 1, "{detail}");
    assert_eq!(detail["revoked_upstream"], 1, "{detail}");
    let disconnected: Value = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE kind = 'disconnected' AND subject = 'alice'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(disconnected["revocation"], "pending", "{disconnected}");
    let revoked =
        "SELECT count(*) FROM audit_events WHERE kind = 'revoked_upstream' AND subject = 'alice'";
    assert_eq!(count(&app, revoked).await, 1);

    // Again: nothing more to do, and no error.
    let again = users::remove(&app.state.connect, alice).await.unwrap();
    assert_eq!(again, users::Removed::default());
}

/// A connect whose callback is under way when the person is removed: its
/// browser sign-in (and with it the flow) goes first, so the callback
/// stores nothing, and nothing of theirs is left behind. The store is held
/// at its first write to `connections` until the removal is done.
#[tokio::test]
async fn a_connect_finishing_while_its_person_is_removed_stores_nothing() {
    let app = spawn_app().await;
    let (url, _) = crate::full_flow::elicit(
        &app,
        "alice",
        "connect",
        serde_json::json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = crate::full_flow::open_and_continue(&browser, &url, "alice").await;
    let back = crate::full_flow::allow_at_demo(&browser, &to_provider, "octo").await;

    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("LOCK TABLE connections IN SHARE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let issuer = app.dev.issuer();
    let alice = UserRef::new(&issuer, "alice");
    let removal = async {
        // The callback has exchanged the code and waits to store.
        while count(
            &app,
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
             WHERE c.relname = 'connections' AND NOT l.granted",
        )
        .await
            == 0
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let removed = users::remove(&app.state.connect, alice).await.unwrap();
        holder.commit().await.unwrap();
        removed
    };
    let (callback, removed) = tokio::join!(browser.follow(&back), removal);
    assert_eq!(removed.connections, 0, "{removed:?}");
    assert_eq!(removed.sessions, 1, "{removed:?}");
    // Told as anyone signed out is: sign in, open the link again.
    assert_eq!(callback.status, 403, "{}", callback.body);
    assert!(
        callback.body.contains("You are signed out"),
        "{}",
        callback.body
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
}

/// `users list`: the people of one issuer with connections, by subject,
/// a page at a time, optionally only those at one provider.
#[tokio::test]
async fn people_with_connections_are_listed_by_subject_a_page_at_a_time() {
    let app = spawn_app().await;
    let issuer = app.dev.issuer();
    for (subject, provider) in [
        ("carol", "demo"),
        ("alice", "demo"),
        ("bob", "demo"),
        ("alice", "fake-github"),
    ] {
        crate::helpers::store_connection_at(
            &app.state.connect,
            UserRef::new(&issuer, subject),
            provider,
            "profile",
            "t-1",
            None,
        )
        .await;
    }
    // Someone else's issuer is not listed.
    crate::helpers::store_demo_connection(
        &app.state.connect,
        "https://other.example",
        "dave",
        "t",
        None,
    )
    .await;
    let page = |provider: Option<&str>, after: &str, limit: i64| {
        let provider = provider.map(|p| mcp_connect::domain::ProviderName::parse(p).unwrap());
        let (connect, issuer, after) = (&app.state.connect, issuer.clone(), after.to_owned());
        async move {
            users::list(connect, &issuer, provider.as_ref(), &after, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|p| (p.subject, p.connections, p.providers.join(",")))
                .collect::<Vec<_>>()
        }
    };
    let everyone = page(None, "", 100).await;
    assert_eq!(
        everyone,
        [
            ("alice".to_owned(), 2, "demo,fake-github".to_owned()),
            ("bob".to_owned(), 1, "demo".to_owned()),
            ("carol".to_owned(), 1, "demo".to_owned()),
        ]
    );
    assert_eq!(page(None, "", 2).await, everyone[..2]);
    assert_eq!(page(None, "bob", 2).await, everyone[2..]);
    let at_github = page(Some("fake-github"), "", 100).await;
    assert_eq!(at_github, everyone[..1], "with all of their providers");
}

/// What `show` reports as kept is what `remove` deletes: a sign-in gone
/// idle and a link already used are kept a while, and a person with only
/// those is not "nothing is kept about this person".
#[tokio::test]
async fn rows_kept_a_while_are_shown_before_they_are_removed() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    sqlx::query("UPDATE web_sessions SET last_seen_at = now() - interval '2 hours'")
        .execute(&app.db)
        .await
        .unwrap();
    crate::full_flow::elicit(
        &app,
        "alice",
        "connect",
        serde_json::json!({"provider": "demo"}),
        "connect_demo",
    )
    .await;
    sqlx::query("UPDATE connect_tickets SET redeemed_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    let issuer = app.dev.issuer();
    let alice = UserRef::new(&issuer, "alice");
    let before = users::record(&app.state.connect, alice).await.unwrap();
    assert_eq!((before.sessions, before.live_tickets), (0, 0), "{before:?}");
    assert_eq!(before.spent, 2, "{before:?}");
    assert!(!before.is_empty(), "{before:?}");
    assert!(
        before
            .to_string()
            .contains("2 ended sign-in(s) and used or expired link(s)")
    );
    users::remove(&app.state.connect, alice).await.unwrap();
    let after = users::record(&app.state.connect, alice).await.unwrap();
    assert!(after.is_empty(), "{after:?}");
}

/// A removal that stops part-way (a connection's row held by another
/// transaction past the lock timeout) is on the record all the same: its
/// `user_removed` row says what went and that it did not complete.
#[tokio::test]
async fn a_removal_that_stops_part_way_is_recorded_as_incomplete() {
    let app = spawn_app().await;
    connect_demo(&app, "alice", "octo").await;
    let browser = Browser::new(&app);
    browser.sign_in("alice").await;
    let mut holder = app.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM connections FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let issuer = app.dev.issuer();
    let alice = UserRef::new(&issuer, "alice");
    let failed = users::remove(&app.state.connect, alice).await;
    assert!(failed.is_err(), "{failed:?}");
    holder.rollback().await.unwrap();
    let detail: Value = sqlx::query_scalar(
        "SELECT detail FROM audit_events WHERE kind = 'user_removed' AND subject = 'alice'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(detail["complete"], false, "{detail}");
    assert!(
        detail["sessions"].as_u64() >= Some(1),
        "what went is counted: {detail}"
    );
    assert_eq!(detail["connections"], 0, "{detail}");
    // Run again, it completes.
    let removed = users::remove(&app.state.connect, alice).await.unwrap();
    assert_eq!(removed.connections, 1, "{removed:?}");
}
