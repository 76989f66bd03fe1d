//! The connect page's checks of API-key and Basic credentials, and how each
//! field is presented to the provider.

use std::collections::BTreeMap;

use super::*;
use crate::providers::{ApiRequest, Credential, ProviderCatalog, test_catalog::settings_with};

fn catalog(toml: &str) -> ProviderCatalog {
    let settings = settings_with("https://connect.example.com", toml);
    ProviderCatalog::from_settings(&settings).unwrap()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// An operator's own API-key entry `keys`, calling beneath `api_base`,
/// whose one field is sent as `send` says.
fn keys_entry(api_base: &str, send: &str) -> String {
    format!(
        "[providers.keys]\nkind = \"api_key\"\ndisplay_name = \"Keys\"\n\
         docs_url = \"https://k.example/docs\"\nkey_url = \"https://k.example/keys\"\n\
         instructions = \"Paste it.\"\nuserinfo_url = \"https://k.example/v1/me\"\n\
         api_base_url = \"{api_base}\"\naccount_id_from = \"credential\"\n\
         [providers.keys.fields.key]\nlabel = \"Key\"\npattern = \"k_[a-z0-9]{{8,64}}\"\n\
         send = \"{send}\"\n"
    )
}

const API_KEY: &str = "0123456789abcdef0123456789abcdef";
const APP_KEY: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn api_key_entries_resolve_with_nothing_but_their_name() {
    let catalog = catalog("[providers.datadog]\n[providers.twilio]\n[providers.openai]\n");
    let dd = catalog.get("datadog").unwrap();
    assert!(!dd.is_oauth());
    assert!(dd.authorize_url("s", "c", &[]).is_none());
    assert_eq!(
        dd.api_base_url().unwrap().as_str(),
        "https://api.datadoghq.com/api/"
    );
    let twilio = catalog.get("twilio").unwrap();
    // The account SID is part of every URL: known per connection only.
    assert!(twilio.api_base_url().is_none());
    let fields: Vec<_> = twilio
        .credential_fields()
        .into_iter()
        .map(|f| (f.name, f.secret))
        .collect();
    assert_eq!(
        fields,
        [
            ("account_sid".to_owned(), false),
            ("auth_token".to_owned(), true)
        ]
    );
    assert!(twilio.key_url().unwrap().starts_with("https://"));
    assert!(twilio.instructions().is_some());
}

#[test]
fn each_value_is_checked_and_problems_name_the_field_not_the_value() {
    let catalog = catalog("[providers.datadog]\n");
    let dd = catalog.get("datadog").unwrap();
    let checked = dd
        .check_credential_form(
            &map(&[("api_key", API_KEY), ("application_key", APP_KEY)]),
            &map(&[("site", "datadoghq.eu")]),
        )
        .unwrap();
    assert_eq!(checked.params, map(&[("site", "datadoghq.eu")]));
    assert_eq!(dd.credential_hint(&checked.credential), "…cdef");
    // A blank site takes the default.
    let checked = dd
        .check_credential_form(
            &map(&[("api_key", API_KEY), ("application_key", APP_KEY)]),
            &map(&[("site", "")]),
        )
        .unwrap();
    assert_eq!(checked.params["site"], "datadoghq.com");

    let problems = dd
        .check_credential_form(
            &map(&[
                ("api_key", "not-a-key-SECRETVALUE"),
                ("application_key", ""),
            ]),
            &map(&[("site", "evil.example")]),
        )
        .unwrap_err();
    let named: Vec<_> = problems.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(named, ["site", "api_key", "application_key"]);
    assert!(problems[2].message.contains("required"), "{problems:?}");
    for p in &problems {
        assert!(!p.message.contains("SECRETVALUE"), "{p:?}");
        assert!(!p.message.contains("evil.example"), "{p:?}");
    }
}

#[test]
fn fields_are_presented_as_the_entry_says() {
    let catalog = catalog("[providers.datadog]\n[providers.twilio]\n");
    let http = reqwest::Client::new();
    let dd = catalog.get("datadog").unwrap();
    let checked = dd
        .check_credential_form(
            &map(&[("api_key", API_KEY), ("application_key", APP_KEY)]),
            &map(&[("site", "us5.datadoghq.com")]),
        )
        .unwrap();
    let endpoints = dd
        .endpoints_with(&checked.params, Some(&checked.credential))
        .unwrap();
    assert_eq!(
        endpoints.userinfo.as_str(),
        "https://api.us5.datadoghq.com/api/v2/validate_keys"
    );
    let (request, _) = dd.presented(
        &http,
        reqwest::Method::GET,
        endpoints.userinfo,
        &checked.credential,
    );
    let request = request.build().unwrap();
    assert_eq!(request.headers()["dd-api-key"], API_KEY);
    assert_eq!(request.headers()["dd-application-key"], APP_KEY);
    assert!(request.headers().get("authorization").is_none());

    let twilio = catalog.get("twilio").unwrap();
    let sid = "AC0123456789abcdef0123456789abcdef";
    let token = "fedcba9876543210fedcba9876543210";
    let checked = twilio
        .check_credential_form(
            &map(&[("account_sid", sid), ("auth_token", token)]),
            &BTreeMap::new(),
        )
        .unwrap();
    let endpoints = twilio
        .endpoints_with(&checked.params, Some(&checked.credential))
        .unwrap();
    assert_eq!(
        endpoints.api_base.as_str(),
        format!("https://api.twilio.com/2010-04-01/Accounts/{sid}/")
    );
    let (request, _) = twilio.presented(
        &http,
        reqwest::Method::GET,
        endpoints.userinfo,
        &checked.credential,
    );
    let request = request.build().unwrap();
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{sid}:{token}"),
    );
    assert_eq!(request.headers()["authorization"], format!("Basic {basic}"));
    // Echoed in any of these forms, the answer hides it.
    let secrets = twilio.credential_secrets(&checked.credential);
    assert!(secrets.contains(&token.to_owned()) && secrets.contains(&basic));
    assert!(!secrets.contains(&sid.to_owned()), "the SID is no secret");
}

#[test]
fn the_stored_form_reads_back() {
    let catalog = catalog("[providers.datadog]\n");
    let dd = catalog.get("datadog").unwrap();
    let checked = dd
        .check_credential_form(
            &map(&[("api_key", API_KEY), ("application_key", APP_KEY)]),
            &BTreeMap::new(),
        )
        .unwrap();
    let secret = checked.credential.to_secret();
    let back = FieldCredential::from_secret(secrecy::ExposeSecret::expose_secret(&secret)).unwrap();
    assert_eq!(back.get("api_key"), Some(API_KEY));
    assert!(!format!("{back:?}").contains(API_KEY));
    assert!(FieldCredential::from_secret("gho_plain_token").is_err());
}

#[test]
fn an_operators_own_key_entry_can_send_its_key_as_a_query_parameter() {
    let catalog = catalog(&keys_entry("https://k.example/v1", "query:api_key"));
    let keys = catalog.get("keys").unwrap();
    assert_eq!(
        keys.api_base_url().unwrap().as_str(),
        "https://k.example/v1/"
    );
    let checked = keys
        .check_credential_form(&map(&[("key", " k_abcdef123 ")]), &BTreeMap::new())
        .unwrap();
    let url = url::Url::parse("https://k.example/v1/items?page=2").unwrap();
    let (request, sent) = keys.presented(
        &reqwest::Client::new(),
        reqwest::Method::GET,
        url,
        &checked.credential,
    );
    assert_eq!(
        sent.as_str(),
        "https://k.example/v1/items?page=2&api_key=k_abcdef123"
    );
    let request = request.build().unwrap();
    assert!(request.headers().get("authorization").is_none());
    assert_eq!(keys.credential_hint(&checked.credential), "…f123");
}

/// A key sent as the Basic username alone (`user:`, base64) is hidden in
/// that form too, should the provider echo the header.
#[test]
fn a_key_sent_as_the_basic_username_alone_is_hidden_as_sent() {
    let catalog = catalog(&keys_entry("https://k.example/v1", "basic_user"));
    let keys = catalog.get("keys").unwrap();
    let checked = keys
        .check_credential_form(&map(&[("key", "k_abcdef123")]), &BTreeMap::new())
        .unwrap();
    let url = url::Url::parse("https://k.example/v1/items").unwrap();
    let (request, _) = keys.presented(
        &reqwest::Client::new(),
        reqwest::Method::GET,
        url,
        &checked.credential,
    );
    let request = request.build().unwrap();
    let basic = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "k_abcdef123:");
    assert_eq!(request.headers()["authorization"], format!("Basic {basic}"));
    let secrets = keys.credential_secrets(&checked.credential);
    assert!(secrets.contains(&basic), "{secrets:?}");
}

/// A caller cannot set the query parameter the credential travels in, by
/// the query or in the path, in any case: refused before anything is sent
/// (the API base here is a closed port on this machine).
#[tokio::test]
async fn the_credentials_query_parameter_cannot_be_set_by_the_caller() {
    let catalog = catalog(&keys_entry("http://127.0.0.1:9/v1", "query:api_key"));
    let keys = catalog.get("keys").unwrap();
    assert_eq!(keys.credential_query_params(true), ["api_key"]);
    let checked = keys
        .check_credential_form(&map(&[("key", "k_abcdef123")]), &BTreeMap::new())
        .unwrap();
    let secret = checked.credential.to_secret();
    let credential = Credential {
        secret: secrecy::ExposeSecret::expose_secret(&secret),
        refresh_token: None,
        params: &BTreeMap::new(),
    };
    let query = |pairs: serde_json::Value| pairs.as_object().cloned();
    for (path, query) in [
        (
            "items",
            query(serde_json::json!({"api_key": "k_attacker1"})),
        ),
        (
            "items",
            query(serde_json::json!({"API_KEY": "k_attacker1"})),
        ),
        ("items?api_key=k_attacker1", None),
    ] {
        let request = ApiRequest {
            method: "GET".into(),
            path: path.into(),
            query,
            body: None,
        };
        let refused = keys
            .api_request_as(&reqwest::Client::new(), &credential, &request)
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, ProviderError::RequestRefused(why) if why.contains("credential")),
            "{path}: {refused}"
        );
    }
    // Other parameters are the caller's to set; this one then fails only
    // at the closed port.
    let request = ApiRequest {
        method: "GET".into(),
        path: "items".into(),
        query: query(serde_json::json!({"page": 2})),
        body: None,
    };
    let failed = keys
        .api_request_as(&reqwest::Client::new(), &credential, &request)
        .await
        .unwrap_err();
    assert!(matches!(failed, ProviderError::Http(_)), "{failed}");
}
