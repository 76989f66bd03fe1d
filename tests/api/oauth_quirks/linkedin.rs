//! LinkedIn: a person who cancels comes back with `user_cancelled_authorize`
//! (or `user_cancelled_login`), not RFC 6749's `access_denied`; the catalog
//! entry names those codes, so the cancel is a decline like any other.

use serde_json::json;

use super::app_with_edit;
use crate::{
    browser::Browser,
    full_flow::{elicit, open_and_continue, retry_accepted},
    helpers::count,
};

#[tokio::test]
async fn a_cancel_at_linkedin_is_a_decline_not_a_failure() {
    for code in ["user_cancelled_authorize", "user_cancelled_login"] {
        // Any fake serves: the person never gets past LinkedIn's page.
        let fake = provider_fakes::google::start().await;
        let app = app_with_edit(&fake, "linkedin", r#"preset = "linkedin""#).await;
        let args = json!({"provider": "linkedin"});
        let (url, state) = elicit(&app, "alice", "whoami", args.clone(), "connect_linkedin").await;
        let browser = Browser::new(&app);
        let to_provider = open_and_continue(&browser, &url, "alice").await;
        let authorize = url::Url::parse(to_provider.location.as_deref().unwrap()).unwrap();
        let param = |name: &str| {
            authorize
                .query_pairs()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
                .unwrap()
        };
        // Where LinkedIn sends the person back, as it does on Cancel.
        let mut back = url::Url::parse(&param("redirect_uri")).unwrap();
        back.query_pairs_mut()
            .append_pair("error", code)
            .append_pair("error_description", "The user cancelled the authorization")
            .append_pair("state", &param("state"));
        let page = browser.get(back.as_str()).await;
        assert_eq!(page.status, 200, "{code}: {}", page.body);
        assert!(
            page.body.contains("You declined access at LinkedIn"),
            "{code}: {}",
            page.body
        );
        assert_eq!(
            count(
                &app,
                "SELECT count(*) FROM connect_tickets WHERE declined_at IS NOT NULL"
            )
            .await,
            1,
            "{code}"
        );
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
    let app = app_with_edit(&fake, "linkedin", r#"preset = "linkedin""#).await;
    let (url, _) = elicit(
        &app,
        "alice",
        "whoami",
        json!({"provider": "linkedin"}),
        "connect_linkedin",
    )
    .await;
    let browser = Browser::new(&app);
    let to_provider = open_and_continue(&browser, &url, "alice").await;
    let authorize = url::Url::parse(to_provider.location.as_deref().unwrap()).unwrap();
    let param = |name: &str| {
        authorize
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap()
    };
    let mut back = url::Url::parse(&param("redirect_uri")).unwrap();
    back.query_pairs_mut()
        .append_pair("error", "unauthorized_scope_error")
        .append_pair("state", &param("state"));
    let page = browser.get(back.as_str()).await;
    assert_eq!(page.status, 502, "{}", page.body);
    assert_eq!(
        count(
            &app,
            "SELECT count(*) FROM connect_tickets WHERE declined_at IS NOT NULL"
        )
        .await,
        0
    );
}
