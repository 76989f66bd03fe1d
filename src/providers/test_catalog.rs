//! Test-only: settings and catalogs for the provider tests, pointed at a
//! fake provider's base URL (the fakes themselves are the `provider-fakes`
//! crate), and the outbound HTTP client the service uses.

use super::ProviderCatalog;
use crate::config::Settings;

pub(crate) fn http() -> reqwest::Client {
    crate::providers::outbound_http_client().unwrap()
}

/// Settings with this public URL and these `[providers.…]` tables.
pub(crate) fn settings_with(public_url: &str, providers_toml: &str) -> Settings {
    let base: toml::Table = format!(
        "public_url = \"{public_url}\"\n\
         database_url = \"postgres://localhost/unused\"\n\
         keys = [\"k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"]\n\
         [auth]\nissuer = \"https://idp.example.com\"\n\
         {providers_toml}"
    )
    .parse()
    .unwrap();
    Settings::from_sources(None, Vec::new(), base).unwrap()
}

/// A catalog of these `[providers.…]` tables, served at
/// `https://connect.example.com`.
pub(crate) fn catalog_of_tables(providers_toml: &str) -> ProviderCatalog {
    ProviderCatalog::from_settings(&settings_with(
        "https://connect.example.com",
        providers_toml,
    ))
    .unwrap()
}

/// Parameter values by name.
pub(crate) fn values(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Every preset pointed at the fake on `base` (the demo preset needs no
/// URLs: it lives under the public URL, which is the fake's).
pub(crate) fn catalog_for(base: &str) -> ProviderCatalog {
    let b = base;
    let toml = format!(
        r#"
[providers.github]
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token"
userinfo_url = "{b}/github/user"
api_base_url = "{b}/github/api/"

[providers.ghform]
preset = "github"
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token-form-only"
userinfo_url = "{b}/github/user"
api_base_url = "{b}/github/api/"

[providers.google]
client_id = "g-client"
client_secret = "g-secret"
authorize_url = "{b}/google/auth"
token_url = "{b}/google/token"
revocation_url = "{b}/google/revoke"
userinfo_url = "{b}/google/userinfo"
api_base_url = "{b}/google/api/"

[providers.slack]
client_id = "s-client"
client_secret = "s-secret"
authorize_url = "{b}/slack/oauth/v2/authorize"
token_url = "{b}/slack/api/oauth.v2.access"
userinfo_url = "{b}/slack/api/auth.test"
api_base_url = "{b}/slack/api/"

[providers.demo]
client_id = "demo-client"
client_secret = "demo-secret"

[providers.rfc]
client_id = "my client"
client_secret = "s3cr:et%"
authorize_url = "{b}/rfc/authorize"
token_url = "{b}/rfc/token"
revocation_url = "{b}/rfc/revoke"
userinfo_url = "{b}/rfc/userinfo"
api_base_url = "{b}/rfc/api/v1"
max_response_bytes = 1000
allowed_methods = ["get", "delete"]
"#
    );
    ProviderCatalog::from_settings(&settings_with(base, &toml)).unwrap()
}
