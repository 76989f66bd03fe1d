//! What is refused before anything leaves the server: a parameter that
//! does not match its pattern, a self-hosted address on a host the
//! operator did not allow; and what is refused after consent: a learned
//! value that does not match its pattern (an org host elsewhere).

use provider_fakes::{Calls, microsoft, salesforce};

use super::{api_args, connect_with};
use crate::{
    helpers::{count, spawn_app_with},
    key_connect::{first_round, open_form, submit},
    provider_flows::app_with,
};

#[tokio::test]
async fn a_tenant_outside_its_pattern_is_refused_on_the_page_and_nothing_is_sent() {
    let fake = microsoft::start().await;
    let app = app_with(&fake, "microsoft").await;
    let args = api_args("microsoft", "me");
    let (url, _) = first_round(&app, &args, "microsoft").await;
    let (browser, consent) = open_form(&app, &url, "alice").await;
    let again = submit(&browser, &consent, &[("param.tenant", "evil.example/x?")]).await;
    assert_eq!(again.status, 422, "{}", again.body);
    assert_eq!(again.location, None);
    assert!(
        again.body.contains("is not in the expected form"),
        "{}",
        again.body
    );
    assert!(
        again.body.contains("aria-invalid=\"true\""),
        "{}",
        again.body
    );
    assert_eq!(
        fake.calls(),
        Calls::default(),
        "nothing reached the provider"
    );
    let spent = "SELECT count(*) FROM connect_tickets WHERE redeemed_at IS NOT NULL";
    assert_eq!(count(&app, spent).await, 0, "the ticket is still usable");
    // Corrected, the same page goes on.
    let fixed = submit(&browser, &again, &[("param.tenant", microsoft::TENANT_ID)]).await;
    assert_eq!(fixed.status, 303, "{}", fixed.body);
    let authorize = fixed.location.unwrap();
    assert!(authorize.contains(microsoft::TENANT_ID), "{authorize}");
}

#[tokio::test]
async fn a_self_hosted_instance_on_a_host_not_allowed_is_refused() {
    let app = spawn_app_with(|t| {
        let gitlab: toml::Table = "[providers.gitlab]\nclient_id = \"g\"\nclient_secret = \"s\"\n"
            .parse()
            .unwrap();
        t.extend(gitlab);
    })
    .await;
    let args = api_args("gitlab", "user");
    let (url, _) = first_round(&app, &args, "gitlab").await;
    let (browser, consent) = open_form(&app, &url, "alice").await;
    assert!(
        consent.body.contains("value=\"https://gitlab.com\""),
        "{}",
        consent.body
    );
    for host in [
        "https://gitlab.evil.example",
        "https://gitlab.com.evil.example",
        "http://gitlab.com",
    ] {
        let again = submit(&browser, &consent, &[("param.instance", host)]).await;
        assert_eq!(again.status, 422, "{host}: {}", again.body);
        assert!(
            again
                .body
                .contains("a host this server allows (gitlab.com)"),
            "{}",
            again.body
        );
    }
    let flows = "SELECT count(*) FROM oauth_flows";
    assert_eq!(count(&app, flows).await, 0);
}

#[tokio::test]
async fn an_org_host_outside_the_pattern_is_refused_and_nothing_is_stored() {
    let fake = salesforce::start().await;
    fake.set_instance_url("https://evil.example");
    let app = app_with(&fake, "salesforce").await;
    let args = api_args("salesforce", "v62.0/query");
    let (_, done, _) = connect_with(&app, &fake, &args, &[]).await;
    assert_eq!(done.status, 502, "{}", done.body);
    assert!(!done.body.contains("connected as"), "{}", done.body);
    // The page says why, without the value, and what became of the access.
    assert!(
        done.body
            .contains("Salesforce named a Salesforce org this server does not accept"),
        "{}",
        done.body
    );
    assert!(
        done.body
            .contains("The access you had just granted was revoked."),
        "{}",
        done.body
    );
    assert!(!done.body.contains("evil.example"), "{}", done.body);
    // On the record, without the value either.
    let audited = "SELECT count(*) FROM audit_events WHERE kind = 'callback_rejected' \
                   AND detail->>'reason' = 'value_not_accepted' AND detail->>'revoked' = 'true' \
                   AND detail::text NOT LIKE '%evil%'";
    assert_eq!(count(&app, audited).await, 1);
    // The grant just issued was revoked at the login host: its refresh
    // token no longer works.
    assert!(fake.calls().revoke >= 1, "{:?}", fake.calls());
    let refresh = fake
        .refresh_tokens()
        .pop()
        .expect("a refresh token was issued");
    assert_eq!(
        fake.refresh_status("/services/oauth2/token", &refresh)
            .await
            .unwrap(),
        400
    );
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 0);
    assert_eq!(
        fake.calls().userinfo,
        0,
        "nothing was sent after the token answer"
    );
    assert!(fake.api_seen().is_empty());
    crate::logs::assert_absent(&fake.secrets());
}
