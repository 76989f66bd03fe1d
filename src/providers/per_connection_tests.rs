//! Per-connection values are checked before any URL is built from them.

use serde_json::json;

use crate::{
    metrics::Call,
    providers::{
        ProviderError,
        test_catalog::{catalog_of_tables, values},
    },
};

#[test]
fn a_subdomain_reaches_every_endpoint_and_nothing_else_does() {
    let catalog = catalog_of_tables(
        "[providers.zendesk]\nclient_id = \"z\"\nclient_secret = \"s\"\n\
         params.subdomain.default = \"acme\"\n",
    );
    let zd = catalog.get("zendesk").unwrap();
    assert_eq!(
        zd.asked_params(),
        [(
            "subdomain",
            "Zendesk subdomain (the acme of acme.zendesk.com)",
            Some("acme")
        )]
    );
    let e = zd
        .endpoints_for(&values(&[("subdomain", "globex")]))
        .unwrap();
    assert_eq!(e.api_base.as_str(), "https://globex.zendesk.com/api/v2/");
    assert_eq!(
        e.token.unwrap().as_str(),
        "https://globex.zendesk.com/oauth/tokens"
    );
    assert_eq!(
        e.userinfo.as_str(),
        "https://globex.zendesk.com/api/v2/users/me.json"
    );
    for bad in [
        "evil.example/x",
        "globex.evil.example#",
        "a@evil.example",
        "x/../../y",
    ] {
        let err = zd
            .endpoints_for(&values(&[("subdomain", bad)]))
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::SettingsRefused(_)),
            "{bad}: {err}"
        );
        assert!(!err.to_string().contains("evil"), "{err}");
    }
    let err = zd.endpoints_for(&values(&[("host", "x")])).unwrap_err();
    assert!(matches!(err, ProviderError::SettingsRefused(_)), "{err}");
}

#[test]
fn a_self_hosted_base_only_on_allowed_hosts() {
    let catalog = catalog_of_tables(
        "[providers.gitlab]\nclient_id = \"g\"\nclient_secret = \"s\"\n\
         params.instance.allowed_hosts = [\"git.example.org\"]\n\
         params.instance.default = \"https://git.example.org\"\n",
    );
    let gl = catalog.get("gitlab").unwrap();
    let e = gl
        .endpoints_for(&values(&[("instance", "https://git.example.org")]))
        .unwrap();
    assert_eq!(e.api_base.as_str(), "https://git.example.org/api/v4/");
    assert_eq!(
        e.revocation.unwrap().as_str(),
        "https://git.example.org/oauth/revoke"
    );
    for bad in [
        "https://gitlab.com",
        "https://169.254.169.254",
        "https://git.example.org.evil.example",
        "http://git.example.org",
        "https://localhost",
        "https://git.example.org:8443",
    ] {
        assert!(
            gl.endpoints_for(&values(&[("instance", bad)])).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn values_learned_from_a_token_answer_are_checked() {
    // An operator's own entry learning Salesforce's instance_url.
    let catalog = catalog_of_tables(
        "[providers.sf]\nclient_id = \"c\"\nclient_secret = \"s\"\n\
         authorize_url = \"https://login.salesforce.com/services/oauth2/authorize\"\n\
         token_url = \"https://login.salesforce.com/services/oauth2/token\"\n\
         userinfo_url = \"https://login.salesforce.com/services/oauth2/userinfo\"\n\
         api_base_url = \"https://login.salesforce.com/services/data/\"\n\
         [providers.sf.params.instance_url]\nsource = \"token_response\"\n\
         pointer = \"/instance_url\"\npattern = \"https://[a-z0-9-]+\\\\.my\\\\.salesforce\\\\.com\"\n",
    );
    let sf = catalog.get("sf").unwrap();
    assert!(sf.asked_params().is_empty());
    let learned = sf
        .learned_from_token_answer(&json!({
            "access_token": "00D…",
            "instance_url": "https://acme.my.salesforce.com"
        }))
        .unwrap();
    assert_eq!(
        learned,
        values(&[("instance_url", "https://acme.my.salesforce.com")])
    );
    for answer in [
        json!({"instance_url": "https://evil.example"}),
        json!({"instance_url": "https://acme.my.salesforce.com.evil.example"}),
        json!({}),
    ] {
        let err = sf.learned_from_token_answer(&answer).unwrap_err();
        assert!(matches!(err, ProviderError::Unaccepted { .. }), "{err}");
    }
}

#[actix_web::test]
async fn a_cloud_id_is_looked_up_after_consent() {
    use provider_fakes::scripted::{ATLASSIAN_CLOUD_ID, ATLASSIAN_TOKEN, Fake};

    use crate::providers::test_catalog::http;
    let fake = Fake::start().await;
    let b = fake.base();
    let catalog = catalog_of_tables(&format!(
        "[providers.atl]\nclient_id = \"c\"\nclient_secret = \"s\"\n\
         authorize_url = \"{b}/atlassian/authorize\"\ntoken_url = \"{b}/atlassian/token\"\n\
         userinfo_url = \"{b}/atlassian/me\"\napi_base_url = \"{b}/atlassian/ex/\"\n\
         [providers.atl.params.cloud_id]\nsource = \"lookup\"\npointer = \"/0/id\"\n\
         lookup_url = \"{b}/atlassian/oauth/token/accessible-resources\"\n\
         pattern = \"[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}\"\n"
    ));
    let atl = catalog.get("atl").unwrap();
    let learned = atl.lookup_params(&http(), ATLASSIAN_TOKEN).await.unwrap();
    assert_eq!(learned, values(&[("cloud_id", ATLASSIAN_CLOUD_ID)]));
    let seen = &fake.seen("/atlassian/oauth/token/accessible-resources")[0];
    assert_eq!(
        seen.headers["authorization"],
        format!("Bearer {ATLASSIAN_TOKEN}")
    );
    let err = atl.lookup_params(&http(), "stale").await.unwrap_err();
    assert!(matches!(err, ProviderError::Denied(_)), "{err}");
    assert_eq!(atl.calls.count(Call::Lookup, "ok"), 1);
    assert_eq!(atl.calls.count(Call::Lookup, "http_error"), 1);
}

/// An account id is unique only where the identity URL points: the stored
/// id carries the values that place it (user 42 of gitlab.com is not user
/// 42 of git.example.org; one Atlassian account is on every Jira site).
/// (A public client, without a secret, may serve several instances.)
#[test]
fn account_ids_carry_the_place_the_identity_url_names() {
    let catalog = catalog_of_tables(
        "[providers.gitlab]\nclient_id = \"g\"\ntoken_auth_method = \"none\"\n\
         params.instance.allowed_hosts = [\"gitlab.com\", \"git.example.org\"]\n\
         [providers.zendesk]\nclient_id = \"z\"\nclient_secret = \"s\"\n\
         [providers.github]\nclient_id = \"h\"\nclient_secret = \"s\"\n\
         [providers.microsoft]\nclient_id = \"m\"\nclient_secret = \"s\"\n",
    );
    let scope = |name: &str| catalog.get(name).unwrap().account_scope();
    assert_eq!(scope("gitlab"), ["instance"]);
    assert_eq!(scope("zendesk"), ["subdomain"]);
    assert!(scope("github").is_empty());
    // The tenant picks where people sign in, not whose ids they are.
    assert!(scope("microsoft").is_empty());

    let gitlab = catalog.get("gitlab").unwrap();
    let at = |instance: &str| {
        let account = crate::providers::Account {
            id: "42".into(),
            label: "alice".into(),
        };
        gitlab
            .scoped(account, &values(&[("instance", instance)]))
            .id
    };
    assert_eq!(at("https://gitlab.com"), "42@https://gitlab.com");
    assert_ne!(at("https://gitlab.com"), at("https://git.example.org"));
    assert_eq!(
        catalog
            .get("github")
            .unwrap()
            .account_id_suffix(&values(&[])),
        None
    );
}

/// `api_request` refuses the endpoints that manage the grant, the refresh
/// endpoint among them, when the connection's parameters make them too.
#[tokio::test]
async fn api_requests_never_reach_a_templated_refresh_endpoint() {
    let catalog = catalog_of_tables(
        "[providers.acme]\nclient_id = \"c\"\nclient_secret = \"s\"\n\
         authorize_url = \"https://127.0.0.1:9/{org}/oauth/authorize\"\n\
         token_url = \"https://127.0.0.1:9/{org}/oauth/token\"\n\
         refresh_url = \"https://127.0.0.1:9/{org}/api/oauth/refresh\"\n\
         userinfo_url = \"https://127.0.0.1:9/{org}/api/me\"\n\
         api_base_url = \"https://127.0.0.1:9/{org}/api/\"\n\
         [providers.acme.params.org]\nlabel = \"Org\"\npattern = \"[a-z]+\"\nexample = \"globex\"\n",
    );
    let acme = catalog.get("acme").unwrap();
    let params = values(&[("org", "globex")]);
    let credential = crate::providers::Credential {
        secret: "t",
        refresh_token: None,
        params: &params,
    };
    let request = crate::providers::ApiRequest {
        method: "GET".into(),
        path: "oauth/refresh".into(),
        query: None,
        body: None,
    };
    let refused = acme
        .api_request_as(&reqwest::Client::new(), &credential, &request)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ProviderError::PathRefused(why) if why.contains("endpoint")),
        "{refused}"
    );
}
