//! The limit of accounts per provider (`flow.accounts_per_provider`) on
//! the connect page of an API-key provider: a pasted credential for a new
//! account past it is refused and recorded, nothing stored and the link
//! still usable, while one for an account the person has is a reconnect.

use serde_json::{Value, json};

use super::{first_round, open_form, submit};
use provider_fakes::key_providers::{KeyFake, datadog};

use crate::{
    full_flow::elicit,
    helpers::{count, spawn_app_with},
};

/// The Datadog entry over two fakes, each accepting its own pair of keys
/// (two accounts): the site names the fake, by its address and port.
fn two_sites_entry(one: &KeyFake, two: &KeyFake) -> toml::Table {
    format!(
        "userinfo_url = \"http://{{site}}/api/v2/validate_keys\"\n\
         api_base_url = \"http://{{site}}/api/\"\n\
         [params.site]\n\
         pattern = \"127\\\\.0\\\\.0\\\\.1:({}|{})\"\n\
         default = \"127.0.0.1:{0}\"\n\
         example = \"127.0.0.1:{1}\"\n",
        one.port, two.port
    )
    .parse()
    .unwrap()
}

/// Where `fake` answers, as the site parameter names it.
fn site(fake: &KeyFake) -> String {
    format!("127.0.0.1:{}", fake.port)
}

/// The form's inputs for `fake`'s keys at `site`.
fn keys_at<'a>(site: &'a str, fake: &'a KeyFake) -> [(&'static str, &'a str); 3] {
    [
        ("param.site", site),
        ("field.api_key", &fake.first),
        ("field.application_key", &fake.second),
    ]
}

#[tokio::test]
async fn a_new_account_past_the_limit_is_refused_and_the_link_then_reconnects_one() {
    let (one, two) = (datadog::start().await, datadog::start().await);
    let entry = two_sites_entry(&one, &two);
    let app = spawn_app_with(|t| {
        one.configure(t, "datadog", entry);
        let mut flow = toml::Table::new();
        flow.insert("accounts_per_provider".into(), 1.into());
        t.insert("flow".into(), toml::Value::Table(flow));
    })
    .await;
    let (site_one, site_two) = (site(&one), site(&two));

    // The first account, as any first connect.
    let args = json!({"provider": "datadog", "path": "v1/monitor"});
    let (url, _) = first_round(&app, &args, "datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let done = submit(&browser, &form, &keys_at(&site_one, &one)).await;
    assert_eq!(done.status, 200, "{}", done.body);

    // Another account: the keys of the second site's fake.
    let another = json!({"provider": "datadog", "another_account": true});
    let (url, _) = elicit(&app, "alice", "connect", another, "connect_datadog").await;
    let (browser, form) = open_form(&app, &url, "alice").await;
    let refused = submit(&browser, &form, &keys_at(&site_two, &two)).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    for said in [
        "You have 1 Datadog account connected here",
        "was not connected",
        "Disconnect one",
    ] {
        assert!(refused.body.contains(said), "{said}: {}", refused.body);
    }
    assert!(
        !refused.body.contains("revoke"),
        "nothing was granted here to revoke: {}",
        refused.body
    );
    assert_eq!(two.requests(), 1, "the keys were checked at their site");
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    let unused = "SELECT count(*) FROM connect_tickets WHERE redeemed_at IS NULL";
    assert_eq!(count(&app, unused).await, 1, "the link still works");

    let rows: Vec<(String, String, Value)> = sqlx::query_as(
        "SELECT subject, provider, detail FROM audit_events WHERE kind = 'account_limit_reached'",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (subject, provider, detail) = &rows[0];
    assert_eq!((subject.as_str(), provider.as_str()), ("alice", "datadog"));
    assert_eq!(detail["limit"], 1, "{detail}");
    assert_eq!(detail.get("revoked"), Some(&Value::Null), "{detail}");
    assert_eq!(detail["via"], "credential", "{detail}");
    let recorded = detail.to_string();
    for secret in two.secrets(true) {
        assert!(!recorded.contains(&secret), "a key reached the audit row");
    }

    // The same link, from the page that refused: the first account's keys
    // again are a reconnect, within the limit.
    let again = submit(&browser, &refused, &keys_at(&site_one, &one)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(count(&app, "SELECT count(*) FROM connections").await, 1);
    assert_eq!(count(&app, unused).await, 0, "the link is spent now");
    let limited = "SELECT count(*) FROM audit_events WHERE kind = 'account_limit_reached'";
    assert_eq!(count(&app, limited).await, 1, "a reconnect is no refusal");
}
