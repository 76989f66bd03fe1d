//! Test-only: settings and catalogs for the provider tests, pointed at a
//! fake provider's base URL (the fakes themselves are the `provider-fakes`
//! crate), and the outbound HTTP client the service uses.

use provider_fakes::{FakeProvider, scripted::Fake};

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

/// Every preset pointed at paths under `base`, for tests that send nothing
/// or send to a base where nothing answers (the demo preset needs no URLs:
/// it lives under the public URL). Tests that talk to GitHub, Google or
/// Slack use [`Fakes::catalog`].
pub(crate) fn catalog_for(base: &str) -> ProviderCatalog {
    let b = base;
    let mut toml = format!(
        r#"
[providers.github]
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token"
revocation_url = "{b}/github/api/applications/{{client_id}}/token"
userinfo_url = "{b}/github/user"
api_base_url = "{b}/github/api/"

[providers.ghform]
preset = "github"
client_id = "gh-client"
client_secret = "gh-secret"
authorize_url = "{b}/github/authorize"
token_url = "{b}/github/token-form-only"
revocation_url = "{b}/github/api/applications/{{client_id}}/token"
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
revocation_url = "{b}/slack/api/auth.revoke"
userinfo_url = "{b}/slack/api/auth.test"
api_base_url = "{b}/slack/api/"

"#
    );
    toml.push_str(&scripted_toml(b));
    ProviderCatalog::from_settings(&settings_with(base, &toml)).unwrap()
}

/// The demo provider and a strict RFC 6749 one, on the scripted fake.
fn scripted_toml(b: &str) -> String {
    format!(
        r#"
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
    )
}

/// The fakes the network tests call: GitHub, Google and Slack as the
/// integration tests meet them, and the scripted server for the demo
/// provider and a strict RFC 6749 one (its base is the public URL).
pub(crate) struct Fakes {
    pub scripted: Fake,
    pub github: FakeProvider,
    pub google: FakeProvider,
    pub slack: FakeProvider,
}

impl Fakes {
    pub(crate) async fn start() -> Fakes {
        Fakes {
            scripted: Fake::start().await,
            github: provider_fakes::github::start().await,
            google: provider_fakes::google::start().await,
            slack: provider_fakes::slack::start().await,
        }
    }

    /// The public URL of the catalog, which the demo provider lives under.
    pub(crate) fn base(&self) -> &str {
        self.scripted.base()
    }

    /// Every fake's client secret: values no message may carry.
    pub(crate) fn client_secrets(&self) -> Vec<&str> {
        vec![
            self.github.client_secret(),
            self.google.client_secret(),
            self.slack.client_secret(),
            "demo-secret",
            "s3cr",
        ]
    }

    /// [`catalog_for`] the scripted base, with `github` (and `ghform`, the
    /// same entry again), `google` and `slack` pointed at their fakes.
    pub(crate) fn catalog(&self) -> ProviderCatalog {
        let base = self.base();
        let mut toml = scripted_toml(base);
        toml.push_str(&self.github.settings_toml("github"));
        toml.push_str(&self.github.settings_toml("ghform"));
        toml.push_str(&self.google.settings_toml("google"));
        toml.push_str(&self.slack.settings_toml("slack"));
        ProviderCatalog::from_settings(&settings_with(base, &toml)).unwrap()
    }
}
