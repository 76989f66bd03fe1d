//! The behaviours entries name, as the requests they produce (built, not
//! sent: what matters is what would leave the server).

use std::collections::HashMap;

use crate::providers::{ProviderCatalog, test_catalog::settings_with};

fn catalog(providers_toml: &str) -> ProviderCatalog {
    ProviderCatalog::from_settings(&settings_with(
        "https://connect.example.com",
        providers_toml,
    ))
    .unwrap()
}

fn params(url: &url::Url) -> HashMap<String, String> {
    url.query_pairs().into_owned().collect()
}

const SHOP: &str = "[providers.shopify]\nclient_id = \"c\"\nclient_secret = \"s\"\n\
                    [providers.shopify.params.shop]\ndefault = \"acme\"\n";

#[test]
fn a_token_in_its_own_header_is_not_a_bearer() {
    let catalog = catalog(SHOP);
    let shop = catalog.get("shopify").unwrap();
    let url = shop.api_base_url().unwrap().join("products.json").unwrap();
    let http = reqwest::Client::new();
    let (request, sent) = shop.authorized(&http, reqwest::Method::GET, url, "shpat_123");
    let request = request.build().unwrap();
    assert_eq!(
        sent.as_str(),
        "https://acme.myshopify.com/admin/api/2025-01/products.json"
    );
    assert_eq!(request.headers()["x-shopify-access-token"], "shpat_123");
    assert!(request.headers().get("authorization").is_none());
    assert_eq!(request.headers()["accept"], "application/json");
}

#[test]
fn a_query_credential_and_templated_headers() {
    let catalog = catalog(
        "[providers.twitch]\nclient_id = \"tw-client\"\nclient_secret = \"s\"\n\
         [providers.q]\npreset = \"twitch\"\nclient_id = \"c\"\nclient_secret = \"s\"\n\
         api_auth = \"query:key\"\n",
    );
    let http = reqwest::Client::new();
    let twitch = catalog.get("twitch").unwrap();
    let url = twitch.api_base_url().unwrap().join("users").unwrap();
    let request = twitch
        .authorized(&http, reqwest::Method::GET, url.clone(), "tok")
        .0
        .build()
        .unwrap();
    // Helix wants the app's client id beside the user's token.
    assert_eq!(request.headers()["client-id"], "tw-client");
    assert_eq!(request.headers()["authorization"], "Bearer tok");
    let q = catalog.get("q").unwrap();
    let (request, sent) = q.authorized(&http, reqwest::Method::GET, url, "tok");
    assert_eq!(params(&sent)["key"], "tok");
    assert!(
        request
            .build()
            .unwrap()
            .headers()
            .get("authorization")
            .is_none()
    );
}

#[test]
fn providers_without_pkce_get_no_challenge() {
    let catalog = catalog(
        "[providers.notion]\nclient_id = \"n\"\nclient_secret = \"s\"\n\
         [providers.dropbox]\nclient_id = \"d\"\nclient_secret = \"s\"\n",
    );
    let notion = catalog
        .get("notion")
        .unwrap()
        .authorize_url("st", "ch", &[])
        .unwrap();
    let p = params(&notion);
    assert!(!p.contains_key("code_challenge"), "{notion}");
    assert_eq!(p["owner"], "user");
    assert!(!p.contains_key("scope"), "{notion}");
    let dropbox = catalog
        .get("dropbox")
        .unwrap()
        .authorize_url("st", "ch", &[])
        .unwrap();
    let p = params(&dropbox);
    assert_eq!(p["code_challenge"], "ch");
    assert_eq!(p["token_access_type"], "offline");
    assert_eq!(p["scope"], "account_info.read files.metadata.read");
}

#[test]
fn json_token_requests_with_basic_client_authentication() {
    let catalog =
        catalog("[providers.notion]\nclient_id = \"n-id\"\nclient_secret = \"n-secret\"\n");
    let notion = catalog.get("notion").unwrap();
    let http = reqwest::Client::new();
    let form = vec![("grant_type", "authorization_code"), ("code", "c0de")];
    let request = notion
        .authenticated_post(&http, notion.token_url.as_ref().unwrap(), form)
        .build()
        .unwrap();
    assert_eq!(
        request.url().as_str(),
        "https://api.notion.com/v1/oauth/token"
    );
    assert_eq!(request.headers()["content-type"], "application/json");
    assert!(
        request.headers()["authorization"]
            .to_str()
            .unwrap()
            .starts_with("Basic ")
    );
    let body: serde_json::Value =
        serde_json::from_slice(request.body().unwrap().as_bytes().unwrap()).unwrap();
    assert_eq!(body["code"], "c0de");
    assert!(body.get("client_secret").is_none(), "{body}");
}

#[test]
fn tenants_and_sites_reach_their_templates() {
    let catalog = catalog(
        "[providers.microsoft]\nclient_id = \"m\"\nclient_secret = \"s\"\n\
         params.tenant.default = \"contoso.onmicrosoft.com\"\n",
    );
    let ms = catalog.get("microsoft").unwrap();
    assert_eq!(
        ms.token_url.as_ref().unwrap().as_str(),
        "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"
    );
    assert!(
        ms.authorize_url("s", "c", &[])
            .unwrap()
            .as_str()
            .starts_with(
                "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize?"
            )
    );
}

/// An entry whose refresh goes elsewhere than its code exchange.
#[actix_web::test]
async fn refresh_goes_to_the_refresh_url() {
    use secrecy::ExposeSecret;

    use provider_fakes::scripted::Fake;

    use crate::providers::test_catalog::http;
    let fake = Fake::start().await;
    let b = fake.base();
    let settings = settings_with(
        b,
        &format!(
            "[providers.split]\nclient_id = \"my client\"\nclient_secret = \"s3cr:et%\"\n\
             authorize_url = \"{b}/rfc/authorize\"\ntoken_url = \"{b}/rfc/exchange-only\"\n\
             refresh_url = \"{b}/rfc/token\"\nuserinfo_url = \"{b}/rfc/userinfo\"\n\
             api_base_url = \"{b}/rfc/api/\"\n"
        ),
    );
    let catalog = ProviderCatalog::from_settings(&settings).unwrap();
    let split = catalog.get("split").unwrap();
    let tokens = split
        .refresh(&http(), "rfc-rt", &Default::default())
        .await
        .unwrap();
    assert_eq!(tokens.refresh_token.unwrap().expose_secret(), "rfc-rt-2");
    assert_eq!(fake.seen("/rfc/token").len(), 1);
    assert!(fake.seen("/rfc/exchange-only").is_empty());
}

/// `token_params` go into the code exchange (Shopify's `expiring = "1"`,
/// which asks for an offline token that expires, with a refresh token),
/// and into nothing else.
#[actix_web::test]
async fn token_params_go_into_the_code_exchange_only() {
    use provider_fakes::scripted::Fake;

    use crate::providers::test_catalog::http;
    let fake = Fake::start().await;
    let b = fake.base();
    let settings = settings_with(
        b,
        &format!(
            "[providers.expiring]\nclient_id = \"my client\"\nclient_secret = \"s3cr:et%\"\n\
             authorize_url = \"{b}/rfc/authorize\"\ntoken_url = \"{b}/rfc/token\"\n\
             userinfo_url = \"{b}/rfc/userinfo\"\napi_base_url = \"{b}/rfc/api/\"\n\
             token_params = {{ expiring = \"1\" }}\n"
        ),
    );
    let catalog = ProviderCatalog::from_settings(&settings).unwrap();
    let expiring = catalog.get("expiring").unwrap();
    expiring
        .exchange_code(&http(), "r-code", "a-verifier")
        .await
        .unwrap();
    expiring
        .refresh(&http(), "rfc-rt", &Default::default())
        .await
        .unwrap();
    let seen = fake.seen("/rfc/token");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].form.get("expiring").map(String::as_str), Some("1"));
    assert_eq!(
        seen[0].form.get("grant_type").map(String::as_str),
        Some("authorization_code")
    );
    assert_eq!(seen[1].form.get("expiring"), None, "not in the refresh");
}

/// Dropbox revokes with the access token as the bearer credential of a
/// POST without a body; a refresh token is not revoked on its own (the
/// access token's revocation ends it).
#[actix_web::test]
async fn dropbox_revokes_the_access_token_as_bearer() {
    use crate::providers::{ProviderError, TokenHint, test_catalog::http};

    let fake = provider_fakes::dropbox::start().await;
    let catalog = catalog(&fake.settings_toml("dropbox"));
    let dropbox = catalog.get("dropbox").unwrap();
    assert!(dropbox.revokes(TokenHint::AccessToken));
    assert!(!dropbox.revokes(TokenHint::RefreshToken));
    let (access, refresh) = fake.issue_grant("account_info.read", true);
    let e = dropbox
        .revoke(
            &http(),
            &refresh.unwrap(),
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Unsupported(_)), "{e}");
    assert_eq!(fake.calls().revoke, 0);
    dropbox
        .revoke(
            &http(),
            &access,
            TokenHint::AccessToken,
            &Default::default(),
        )
        .await
        .unwrap();
    let seen = &fake.seen("/2/auth/token/revoke")[0];
    assert_eq!(seen.headers["authorization"], format!("Bearer {access}"));
    assert!(seen.body.is_empty() && !seen.headers.contains_key("content-type"));
    // The grant is over: the token is refused now.
    let e = dropbox
        .revoke(
            &http(),
            &access,
            TokenHint::AccessToken,
            &Default::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Status(401)), "{e}");
    // RFC 7009 revokes either kind.
    let others = crate::providers::test_catalog::catalog_for("http://127.0.0.1:9");
    assert!(
        others
            .get("google")
            .unwrap()
            .revokes(TokenHint::RefreshToken)
    );
}
