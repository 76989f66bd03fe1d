//! "An operator enables any catalog provider with its credentials only":
//! every shipped entry, enabled by its name with nothing but a client id
//! and secret (OAuth) or nothing at all (API key, Basic), resolves to a
//! whole provider.

use super::*;
use crate::providers::{entry::CredentialKind, shipped, test_catalog::settings_with};

/// OAuth entries whose URLs need a value each connection brings or learns
/// (a subdomain, a shop, Salesforce's instance, Atlassian's cloud id):
/// until those are taken per connection, enabling one needs that value too. Each must still fail
/// for exactly that reason; when one starts to pass, it leaves this list.
const NEED_A_CONNECTION_PARAMETER: &[&str] = &["atlassian", "salesforce", "shopify", "zendesk"];

fn kind_of(name: &str) -> CredentialKind {
    let table = shipped::table(name).unwrap();
    entry::parse(table).unwrap().kind.unwrap()
}

#[test]
fn every_shipped_entry_is_enabled_with_its_credentials_only() {
    let mut enabled = 0;
    let mut waiting = Vec::new();
    for name in shipped::names() {
        let kind = kind_of(name);
        let table = match kind {
            CredentialKind::Oauth2 => format!(
                "[providers.{name}]\nclient_id = \"id-{name}\"\nclient_secret = \"secret-{name}\"\n"
            ),
            CredentialKind::ApiKey | CredentialKind::Basic => format!("[providers.{name}]\n"),
        };
        let settings = settings_with("https://connect.example.com", &table);
        match ProviderCatalog::from_settings(&settings) {
            Ok(catalog) => {
                let p = catalog.get(name).unwrap();
                assert_eq!(p.credential_kind(), kind.as_str(), "{name}");
                assert!(!p.display_name().is_empty(), "{name}");
                assert!(p.docs_url().is_some(), "{name}");
                if kind == CredentialKind::Oauth2 {
                    assert!(p.authorize_url.is_some(), "{name}: no authorize URL");
                    assert!(p.token_url.is_some(), "{name}: no token URL");
                    assert!(p.api_base_url().is_some(), "{name}: no API base");
                    assert_eq!(
                        p.redirect_uri(),
                        format!("https://connect.example.com/oauth/callback/{name}")
                    );
                }
                enabled += 1;
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    NEED_A_CONNECTION_PARAMETER.contains(&name),
                    "{name} cannot be enabled with its credentials only: {e}"
                );
                assert!(e.contains("needs the parameter"), "{name}: {e}");
                waiting.push(name);
            }
        }
    }
    assert_eq!(
        waiting, NEED_A_CONNECTION_PARAMETER,
        "these now enable with credentials only: take them off the list"
    );
    assert!(
        enabled >= 30 - NEED_A_CONNECTION_PARAMETER.len(),
        "{enabled}"
    );
}
