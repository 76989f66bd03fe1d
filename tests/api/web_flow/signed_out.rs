//! What a browser without a session, or a link without its ticket, is
//! answered: a page sends the browser to sign in and back; a form post is
//! refused with 403 (a 401 would owe an HTTP authentication challenge);
//! a link cut short is a request a person can fix, not an expired link.

use super::*;

#[tokio::test]
async fn a_signed_out_page_goes_to_sign_in_and_comes_back() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let consent = browser.get("/connect/consent").await;
    assert_eq!(consent.status, 303, "{}", consent.body);
    assert_eq!(
        consent.location.as_deref(),
        Some("/login?return_to=/connect/consent")
    );
    // Signed in, it comes back there (nothing pending: the link is gone).
    let landed = browser
        .sign_in_from(browser.follow(&consent).await, "alice")
        .await;
    assert_eq!(landed.location.as_deref(), Some("/connect/consent"));
}

/// A link's consent page reloaded after its sign-in ended (the session
/// expired or was signed out elsewhere): its address was tagged for that
/// session, so the page says to open the link from the client again — not
/// a sign-in that ends on "this link has expired" while the link still
/// works. Opened again, it does.
#[tokio::test]
async fn a_links_page_after_its_sign_in_ended_says_to_open_the_link_again() {
    let app = spawn_app().await;
    let (link, _) = ticket(&app, "alice", 600).await;
    let alice = signed_in(&app, "alice").await;
    let opened = alice.get(&format!("/connect?ticket={link}")).await;
    let consent_url = opened.location.clone().expect("to the consent page");
    assert!(
        consent_url.starts_with("/connect/consent?"),
        "{consent_url}"
    );
    sqlx::query("DELETE FROM web_sessions")
        .execute(&app.db)
        .await
        .unwrap();
    let reloaded = alice.get(&consent_url).await;
    assert_eq!(reloaded.status, 403, "{}", reloaded.body);
    assert!(
        reloaded
            .body
            .contains("open its link again: the one your MCP client showed"),
        "{}",
        reloaded.body
    );
    // The link itself still works: sign in from it and consent.
    let start = alice.get(&format!("/connect?ticket={link}")).await;
    let back = alice.sign_in_from(start, "alice").await;
    let consent = alice.follow(&back).await;
    assert_eq!(consent.status, 200, "{}", consent.body);
    assert!(consent.body.contains("Continue"), "{}", consent.body);
}

#[tokio::test]
async fn a_signed_out_form_post_is_forbidden_not_unauthorized() {
    let app = spawn_app().await;
    let (_, id) = ticket(&app, "alice", 600).await;
    let posted = Browser::new(&app)
        .post_form(
            "/connect",
            &[
                ("ticket".to_owned(), id.to_string()),
                ("action".to_owned(), "continue".to_owned()),
            ],
        )
        .await;
    assert_eq!(posted.status, 403, "{}", posted.body);
    assert!(
        posted.body.contains("You are signed out"),
        "{}",
        posted.body
    );
    assert!(posted.body.contains("/login?return_to=/connections"));
}

#[tokio::test]
async fn a_link_without_its_ticket_is_a_bad_request() {
    let app = spawn_app().await;
    let alice = signed_in(&app, "alice").await;
    for browser in [&alice, &Browser::new(&app)] {
        for path in ["/connect", "/connect?ticket=", "/connect?other=1"] {
            let page = browser.get(path).await;
            assert_eq!(page.status, 400, "{path}: {}", page.body);
            assert!(
                page.body.contains("missing part of its connect link"),
                "{}",
                page.body
            );
        }
    }
}
