//! LinkedIn: a person who cancels comes back with `user_cancelled_authorize`
//! (or `user_cancelled_login`), not RFC 6749's `access_denied`; the catalog
//! entry names those codes, so the cancel is a decline like any other.

use serde_json::json;

use super::app_with_edit;
use crate::{
    browser::{Browser, Page},
    full_flow::{elicit, open_and_continue, retry_accepted},
    helpers::{TestApp, count},
    web_flow::param,
};

/// Alice asks for LinkedIn, says Continue, and comes back from LinkedIn
/// with `error` (as LinkedIn sends the person back): the callback's page
/// and the call's `requestState`.
async fn back_from_linkedin_with(app: &TestApp, error: &str) -> (Page, String) {
    let args = json!({"provider": "linkedin"});
    let (url, state) = elicit(app, "alice", "whoami", args, "connect_linkedin").await;
    let browser = Browser::new(app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let authorize = url::Url::parse(to_provider.location.as_deref().unwrap()).unwrap();
    let mut back = url::Url::parse(&param(&authorize, "redirect_uri").unwrap()).unwrap();
    back.query_pairs_mut()
        .append_pair("error", error)
        .append_pair("error_description", "The user cancelled the authorization")
        .append_pair("state", &param(&authorize, "state").unwrap());
    (browser.get(back.as_str()).await, state)
}

/// The app with the LinkedIn entry; any fake serves, as the person never
/// gets past LinkedIn's page.
async fn app_with_linkedin(fake: &provider_fakes::FakeProvider) -> TestApp {
    app_with_edit(fake, "linkedin", r#"preset = "linkedin""#).await
}

const DECLINED: &str = "SELECT count(*) FROM connect_tickets WHERE declined_at IS NOT NULL";

#[tokio::test]
async fn a_cancel_at_linkedin_is_a_decline_not_a_failure() {
    for code in ["user_cancelled_authorize", "user_cancelled_login"] {
        let fake = provider_fakes::google::start().await;
        let app = app_with_linkedin(&fake).await;
        let (page, state) = back_from_linkedin_with(&app, code).await;
        assert_eq!(page.status, 200, "{code}: {}", page.body);
        assert!(
            page.body.contains("You declined access at LinkedIn"),
            "{code}: {}",
            page.body
        );
        assert_eq!(count(&app, DECLINED).await, 1, "{code}");
        let args = json!({"provider": "linkedin"});
        let body = retry_accepted(&app, "alice", "whoami", args, &state, "connect_linkedin").await;
        assert_eq!(body["result"]["isError"], true, "{code}: {body}");
        assert_eq!(
            body["result"]["structuredContent"]["error"]["kind"], "declined",
            "{code}: {body}"
        );
    }
}

#[tokio::test]
async fn another_error_at_linkedin_is_still_a_failure() {
    let fake = provider_fakes::google::start().await;
    let app = app_with_linkedin(&fake).await;
    let (page, _) = back_from_linkedin_with(&app, "unauthorized_scope_error").await;
    assert_eq!(page.status, 502, "{}", page.body);
    assert_eq!(count(&app, DECLINED).await, 0);
}
