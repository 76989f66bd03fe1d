//! Signing out from a browser that is not signed in: a post from another
//! site comes without the session cookie (SameSite=Lax) and must not end
//! the session the browser does hold; a cookie that names no session is
//! still cleared.

use super::*;

#[tokio::test]
async fn a_sign_out_without_the_session_cookie_removes_no_cookie() {
    let app = spawn_app().await;
    // What a cross-site form post looks like here: no cookie, no token.
    let out = Browser::new(&app).post_form("/logout", &[]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(out.body.contains("You are signed out"));
    assert!(
        out.set_cookie("mcp_connect_session").is_none(),
        "{:?}",
        out.set_cookies
    );
}

#[tokio::test]
async fn a_sign_out_with_a_stale_session_cookie_clears_it() {
    let app = spawn_app().await;
    let base = url::Url::parse(&app.base).unwrap();
    for stale in ["A".repeat(43), "not-a-session".to_owned()] {
        let browser = Browser::new(&app);
        browser
            .jar
            .add_cookie_str(&format!("mcp_connect_session={stale}; Path=/"), &base);
        let out = browser.post_form("/logout", &[]).await;
        assert_eq!(out.status, 200, "{}", out.body);
        let removal = out
            .set_cookie("mcp_connect_session")
            .unwrap_or_else(|| panic!("{stale}: {:?}", out.set_cookies));
        assert!(removal.contains("Max-Age=0"), "{removal}");
    }
}

/// "Sign out everywhere" on the connections page ends every sign-in of the
/// person, in any browser, and no one else's; it needs the page's CSRF
/// token like any sign-out.
#[tokio::test]
async fn signing_out_everywhere_ends_every_sign_in_of_the_person_and_no_one_elses() {
    let app = spawn_app().await;
    let here = signed_in(&app, "alice").await;
    let elsewhere = signed_in(&app, "alice").await;
    let bob = signed_in(&app, "bob").await;
    let page = here.get("/connections").await;
    // The button the person presses sends what the test sends below.
    assert!(
        page.body.contains(
            r#"<button type="submit" name="everywhere" value="1">Sign out everywhere</button>"#
        ),
        "{}",
        page.body
    );

    // Without the page's token: refused, nothing ended.
    let forged = here
        .post_form("/logout", &[("everywhere".to_owned(), "1".to_owned())])
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert_eq!(count(&app, "SELECT count(*) FROM web_sessions").await, 3);

    let out = here.submit(&page, "/logout", &[("everywhere", "1")]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.body.contains("This browser and 1 other are signed out"),
        "{}",
        out.body
    );
    let cleared = out
        .set_cookie("mcp_connect_session")
        .expect("cookie removed");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    for browser in [&here, &elsewhere] {
        assert_eq!(browser.get("/connections").await.status, 303);
    }
    assert_eq!(bob.get("/connections").await.status, 200);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM web_sessions WHERE subject = 'alice'"
        )
        .await,
        0
    );
}

/// "Sign out everywhere" from a page whose sign-in has ended since: the
/// person is told that the other browsers are still signed in.
#[tokio::test]
async fn signing_out_everywhere_after_the_sign_in_ended_says_nothing_else_was_signed_out() {
    let app = spawn_app().await;
    let here = signed_in(&app, "alice").await;
    let elsewhere = signed_in(&app, "alice").await;
    let page = here.get("/connections").await;
    sqlx::query("UPDATE web_sessions SET last_seen_at = now() - interval '2 hours'")
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE web_sessions SET last_seen_at = now() WHERE id = (SELECT id FROM web_sessions ORDER BY created_at DESC LIMIT 1)")
        .execute(&app.db)
        .await
        .unwrap();
    let out = here.submit(&page, "/logout", &[("everywhere", "1")]).await;
    assert_eq!(out.status, 200, "{}", out.body);
    assert!(
        out.body.contains("Other browsers are still signed in"),
        "{}",
        out.body
    );
    assert_eq!(elsewhere.get("/connections").await.status, 200);
}
