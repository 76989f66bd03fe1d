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
