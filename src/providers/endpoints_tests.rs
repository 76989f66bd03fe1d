//! One OAuth connection's endpoints and the consent page's checks.

use std::collections::BTreeMap;

use super::Endpoint;
use crate::providers::{
    ProviderError,
    test_catalog::{catalog_of_tables, values},
};

#[test]
fn a_tenant_goes_into_the_authorize_and_token_paths() {
    let catalog =
        catalog_of_tables("[providers.microsoft]\nclient_id = \"m\"\nclient_secret = \"s\"\n");
    let ms = catalog.get("microsoft").unwrap();
    let tenant = values(&[("tenant", "contoso.onmicrosoft.com")]);
    let url = |which| ms.url_for(which, &tenant).unwrap().unwrap().to_string();
    assert_eq!(
        url(Endpoint::Token),
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    );
    assert_eq!(url(Endpoint::Refresh), url(Endpoint::Token));
    let authorize = ms
        .authorize_url_for("s", "c", &[], false, &tenant)
        .unwrap()
        .unwrap();
    assert!(
        authorize.as_str().starts_with(
            "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize?"
        ),
        "{authorize}"
    );
    // Without parameters: the operator's default tenant.
    let common = ms.url_for(Endpoint::Token, &BTreeMap::new()).unwrap();
    assert!(common.unwrap().as_str().contains("/common/"));
    assert_eq!(ms.url_for(Endpoint::Revocation, &tenant).unwrap(), None);
    // A value outside the pattern never reaches a URL.
    for bad in ["evil.example/x", "a b", "../../x", ""] {
        let err = ms
            .url_for(Endpoint::Token, &values(&[("tenant", bad)]))
            .unwrap_err();
        assert!(matches!(err, ProviderError::SettingsRefused(_)), "{bad}");
        let problems = ms
            .check_connect_params(&values(&[("tenant", bad)]))
            .map(|_| ());
        if bad.is_empty() {
            // An empty answer takes the default.
            assert!(problems.is_ok());
        } else {
            assert_eq!(problems.unwrap_err()[0].name, "tenant", "{bad}");
        }
    }
}

#[test]
fn entries_with_values_only_a_connection_has_can_be_enabled() {
    let catalog = catalog_of_tables(
        "[providers.zendesk]\nclient_id = \"z\"\nclient_secret = \"s\"\n\
         [providers.salesforce]\nclient_id = \"c\"\nclient_secret = \"s\"\n\
         [providers.atlassian]\nclient_id = \"a\"\nclient_secret = \"s\"\n",
    );
    let zd = catalog.get("zendesk").unwrap();
    assert_eq!(zd.api_base_url(), None, "per connection only");
    assert_eq!(zd.authorize_url("s", "c", &[]), None);
    let problems = zd.check_connect_params(&BTreeMap::new()).unwrap_err();
    assert_eq!(problems[0].name, "subdomain");
    assert_eq!(problems[0].message, "is required.");
    let acme = zd
        .check_connect_params(&values(&[("subdomain", " acme ")]))
        .unwrap();
    assert_eq!(
        zd.url_for(Endpoint::ApiBase, &acme)
            .unwrap()
            .unwrap()
            .as_str(),
        "https://acme.zendesk.com/api/v2/"
    );
    // Salesforce's API base waits for the token answer; the rest is fixed.
    let sf = catalog.get("salesforce").unwrap();
    assert!(
        sf.check_connect_params(&BTreeMap::new())
            .unwrap()
            .is_empty()
    );
    assert!(sf.url_for(Endpoint::ApiBase, &BTreeMap::new()).is_err());
    let org = values(&[("instance_url", "https://acme.my.salesforce.com")]);
    assert_eq!(
        sf.url_for(Endpoint::ApiBase, &org)
            .unwrap()
            .unwrap()
            .as_str(),
        "https://acme.my.salesforce.com/services/data/"
    );
    let evil = values(&[("instance_url", "https://evil.example")]);
    assert!(sf.url_for(Endpoint::ApiBase, &evil).is_err());
    let atl = catalog.get("atlassian").unwrap();
    assert!(atl.authorize_url("s", "c", &[]).is_some());
}

#[test]
fn a_self_hosted_instance_must_be_an_allowed_host() {
    let catalog =
        catalog_of_tables("[providers.gitlab]\nclient_id = \"g\"\nclient_secret = \"s\"\n");
    let gl = catalog.get("gitlab").unwrap();
    let problems = gl
        .check_connect_params(&values(&[("instance", "https://gitlab.evil.example")]))
        .unwrap_err();
    assert_eq!(problems[0].name, "instance");
    let ok = gl
        .check_connect_params(&values(&[("instance", "https://gitlab.com/")]))
        .unwrap();
    assert_eq!(ok["instance"], "https://gitlab.com");
}

#[test]
fn entra_never_lists_offline_access_so_it_is_not_missing() {
    let catalog =
        catalog_of_tables("[providers.microsoft]\nclient_id = \"m\"\nclient_secret = \"s\"\n");
    let ms = catalog.get("microsoft").unwrap();
    // As Entra answers a grant of the entry's default scopes.
    let granted: Vec<String> = ["openid", "User.Read", "profile", "email"]
        .map(str::to_owned)
        .to_vec();
    for wanted in ms.default_scopes() {
        assert!(ms.scope_granted(&granted, wanted), "{wanted}");
    }
    assert!(!ms.scope_granted(&granted, "Mail.Read"));
}
