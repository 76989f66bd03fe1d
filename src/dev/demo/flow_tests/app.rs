//! The app's own `demo` preset against the demo provider: what dev mode
//! will do, minus the browser session and the database.

use std::collections::HashMap;

use secrecy::ExposeSecret;

use super::start;
use crate::{
    config::Settings,
    providers::{PkcePair, ProviderCatalog, ProviderError, TokenHint},
};

#[tokio::test]
async fn the_demo_preset_connects_refreshes_and_revokes() {
    let demo = start().await;
    let mut table: toml::Table = toml::from_str(&format!(
        "public_url = \"{}\"\ndatabase_url = \"postgres://localhost/unused\"\n\
         keys = [\"k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"]\n\
         [auth]\nissuer = \"https://idp.example.com\"\n",
        demo.base
    ))
    .unwrap();
    let providers = toml::Table::from_iter([(
        "demo".to_owned(),
        toml::Value::Table(demo.dev.demo().provider_settings()),
    )]);
    table.insert("providers".into(), toml::Value::Table(providers));
    let settings = Settings::from_sources(None, Vec::new(), table).unwrap();
    let catalog = ProviderCatalog::from_settings(&settings).unwrap();
    let provider = catalog.get("demo").unwrap();
    let http = crate::providers::outbound_http_client().unwrap();

    // The browser: the authorize URL the app builds, then Allow.
    let pkce = PkcePair::generate();
    let url = provider
        .authorize_url("st-app", &pkce.challenge, &[])
        .unwrap();
    let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    let mut form = query.clone();
    form.extend([
        ("account".into(), "carol".into()),
        ("decision".into(), "allow".into()),
    ]);
    let response = demo
        .http
        .post(demo.url("/authorize"))
        .form(&form)
        .send()
        .await
        .unwrap();
    let back: HashMap<_, _> = demo.redirected_query(&response);
    assert_eq!(back["state"], "st-app");
    assert_eq!(Some(back["iss"].as_str()), provider.issuer());

    let tokens = provider
        .exchange_code(&http, &back["code"], pkce.verifier.expose_secret())
        .await
        .unwrap();
    assert_eq!(tokens.expires_in.unwrap().as_secs(), 300);
    let account = provider
        .account(&http, tokens.access_token.expose_secret())
        .await
        .unwrap();
    assert_eq!(account.label, "carol");
    assert!(account.id.starts_with("demo-"));

    let refresh_token = tokens.refresh_token.unwrap();
    let fresh = provider
        .refresh(&http, refresh_token.expose_secret(), &Default::default())
        .await
        .unwrap();
    let again = provider
        .refresh(&http, refresh_token.expose_secret(), &Default::default())
        .await;
    assert!(
        matches!(again, Err(ProviderError::InvalidGrant)),
        "{again:?}"
    );
    // That reuse ended the grant, so the rotated tokens are dead too.
    let gone = provider
        .account(&http, fresh.access_token.expose_secret())
        .await;
    assert!(matches!(gone, Err(ProviderError::Denied(_))), "{gone:?}");
    let fresh_refresh = fresh.refresh_token.unwrap();
    provider
        .revoke(
            &http,
            fresh_refresh.expose_secret(),
            TokenHint::RefreshToken,
            &Default::default(),
        )
        .await
        .unwrap();
}
