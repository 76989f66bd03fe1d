//! "An operator enables any catalog provider with its credentials only":
//! every shipped entry, enabled by its name with nothing but a client id
//! and secret (OAuth) or nothing at all (API key, Basic), resolves to a
//! whole provider.

use super::*;
use crate::providers::{entry::CredentialKind, shipped, test_catalog::settings_with};

fn entry_of(name: &str) -> entry::Entry {
    entry::parse(shipped::table(name).unwrap()).unwrap()
}

fn kind_of(name: &str) -> CredentialKind {
    entry_of(name).kind.unwrap()
}

#[test]
fn every_shipped_entry_is_enabled_with_its_credentials_only() {
    let mut enabled = 0;
    for name in shipped::names() {
        let kind = kind_of(name);
        let table = match kind {
            CredentialKind::Oauth2 => format!(
                "[providers.{name}]\nclient_id = \"id-{name}\"\nclient_secret = \"secret-{name}\"\n"
            ),
            CredentialKind::ApiKey | CredentialKind::Basic => format!("[providers.{name}]\n"),
        };
        let settings = settings_with("https://connect.example.com", &table);
        let catalog = ProviderCatalog::from_settings(&settings)
            .unwrap_or_else(|e| panic!("{name} cannot be enabled with its credentials only: {e}"));
        let p = catalog.get(name).unwrap();
        assert_eq!(p.credential_kind(), kind.as_str(), "{name}");
        assert!(!p.display_name().is_empty(), "{name}");
        assert!(p.docs_url().is_some(), "{name}");
        // An entry with per-connection values (a tenant, a subdomain, a
        // learned instance) resolves its URLs per connection; their
        // templates are checked with the examples by
        // `every_shipped_entry_is_valid`.
        let per_connection = entry_of(name).params.is_some_and(|p| !p.is_empty());
        if kind == CredentialKind::Oauth2 && !per_connection {
            assert!(p.authorize_url.is_some(), "{name}: no authorize URL");
            assert!(p.token_url.is_some(), "{name}: no token URL");
            assert!(p.api_base_url().is_some(), "{name}: no API base");
        }
        if kind == CredentialKind::Oauth2 {
            assert_eq!(
                p.redirect_uri(),
                format!("https://connect.example.com/oauth/callback/{name}")
            );
        }
        enabled += 1;
    }
    assert!(enabled >= 30, "{enabled}");
}
