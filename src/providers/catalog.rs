//! The provider catalog: every `[providers.<name>]` of the settings resolved
//! against its preset once at start-up, with errors that name the setting.

use std::collections::BTreeMap;

use secrecy::ExposeSecret;
use url::Url;

use super::{
    Provider, ProviderConfigError,
    presets::{self, PresetKind, TokenAuthMethod},
};
use crate::config::{ProviderSettings, Settings};

/// Largest API response passed back unless configured.
const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// How long `api_request` waits for an answer unless configured.
const DEFAULT_API_TIMEOUT_SECS: u64 = 30;
/// A longer wait would outlast any MCP client's patience.
const MAX_API_TIMEOUT_SECS: u64 = 300;
/// Upper bound on `max_response_bytes`: answers end up in a model's context.
const MAX_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
const KNOWN_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The configured providers by name. Built once; shared behind an `Arc`.
#[derive(Debug, Default)]
pub struct ProviderCatalog {
    providers: BTreeMap<String, Provider>,
}

impl ProviderCatalog {
    /// Resolves `settings.providers`. Each redirect URI is
    /// `<settings.base_url()>/oauth/callback/<name>`.
    pub fn from_settings(settings: &Settings) -> Result<Self, ProviderConfigError> {
        let base = settings.base_url();
        let providers = settings
            .providers
            .iter()
            .map(|(name, ps)| {
                let provider = resolve(name, ps, &base)?;
                Ok((name.clone(), provider))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { providers })
    }

    pub fn get(&self, name: &str) -> Option<&Provider> {
        self.providers.get(name)
    }

    /// Provider names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.providers.keys().map(String::as_str).collect()
    }
}

fn resolve(name: &str, ps: &ProviderSettings, base: &str) -> Result<Provider, ProviderConfigError> {
    let err = |field: &'static str, message: String| ProviderConfigError::Invalid {
        provider: name.to_owned(),
        field,
        message,
    };
    let kind = match &ps.preset {
        Some(preset) => PresetKind::parse(preset).ok_or_else(|| {
            err(
                "preset",
                format!("unknown preset `{preset}` (known: {})", PresetKind::NAMES),
            )
        })?,
        None => PresetKind::parse(name).unwrap_or(PresetKind::Generic),
    };
    let d = presets::defaults(kind, base);
    let preset_name = kind.as_str();
    let url = |field: &'static str,
               set: &Option<Url>,
               default: &Option<String>|
     -> Result<Option<Url>, ProviderConfigError> {
        let url = match (set, default) {
            (Some(url), _) => url.clone(),
            (None, Some(default)) => Url::parse(default)
                .map_err(|e| err(field, format!("the preset URL `{default}` is invalid: {e}")))?,
            (None, None) => return Ok(None),
        };
        check_url(&url).map_err(|m| err(field, m))?;
        Ok(Some(url))
    };
    let required = |field: &'static str, value: Option<Url>| {
        value.ok_or_else(|| err(field, format!("required by the {preset_name} preset")))
    };

    let authorize_url = required(
        "authorize_url",
        url("authorize_url", &ps.authorize_url, &d.authorize_url)?,
    )?;
    let token_url = required("token_url", url("token_url", &ps.token_url, &d.token_url)?)?;
    let userinfo_url = required(
        "userinfo_url",
        url("userinfo_url", &ps.userinfo_url, &d.userinfo_url)?,
    )?;
    let mut api_base_url = required(
        "api_base_url",
        url("api_base_url", &ps.api_base_url, &d.api_base_url)?,
    )?;
    let revocation_url = url("revocation_url", &ps.revocation_url, &d.revocation_url)?;
    if api_base_url.query().is_some() || api_base_url.fragment().is_some() {
        return Err(err(
            "api_base_url",
            "must not carry a query or fragment".into(),
        ));
    }
    // A base without a trailing slash would let `join` replace its last
    // segment, and would make the prefix check admit `/v1x` for `/v1`.
    if !api_base_url.path().ends_with('/') {
        let path = format!("{}/", api_base_url.path());
        api_base_url.set_path(&path);
    }

    let auth_method = match &ps.token_auth_method {
        Some(m) => TokenAuthMethod::parse(m).ok_or_else(|| {
            err(
                "token_auth_method",
                format!("unknown method `{m}` (client_secret_post, client_secret_basic or none)"),
            )
        })?,
        None => d.auth_method,
    };
    let client_secret = ps
        .client_secret
        .clone()
        .filter(|s| !s.expose_secret().is_empty());
    if auth_method != TokenAuthMethod::None && client_secret.is_none() {
        let message = if ps.token_auth_method.is_some() {
            format!("required by token_auth_method {}", auth_method.as_str())
        } else {
            format!("required by the {preset_name} preset")
        };
        return Err(err("client_secret", message));
    }

    let allowed_methods = match &ps.allowed_methods {
        Some(list) => list
            .iter()
            .map(|m| {
                let m = m.trim().to_ascii_uppercase();
                if KNOWN_METHODS.contains(&m.as_str()) {
                    Ok(m)
                } else {
                    Err(err(
                        "allowed_methods",
                        format!("unknown method `{m}` (known: {})", KNOWN_METHODS.join(", ")),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => d.allowed_methods.iter().map(|m| m.to_string()).collect(),
    };
    let max_response_bytes = ps.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
    if !(1..=MAX_MAX_RESPONSE_BYTES).contains(&max_response_bytes) {
        return Err(err(
            "max_response_bytes",
            format!("must be between 1 and {MAX_MAX_RESPONSE_BYTES}"),
        ));
    }
    let api_timeout_secs = ps.api_timeout_secs.unwrap_or(DEFAULT_API_TIMEOUT_SECS);
    if !(1..=MAX_API_TIMEOUT_SECS).contains(&api_timeout_secs) {
        return Err(err(
            "api_timeout_secs",
            format!("must be between 1 and {MAX_API_TIMEOUT_SECS}"),
        ));
    }
    Ok(Provider {
        name: name.to_owned(),
        kind,
        display_name: ps
            .display_name
            .clone()
            .or_else(|| d.display_name.map(str::to_owned))
            .unwrap_or_else(|| name.to_owned()),
        client_id: ps.client_id.clone(),
        client_secret,
        auth_method,
        authorize_url,
        token_url,
        revocation_url,
        userinfo_url,
        api_base_url,
        issuer: ps.issuer.clone().or(d.issuer),
        require_iss: ps.require_iss.unwrap_or(d.require_iss),
        redirect_uri: format!("{base}/oauth/callback/{name}"),
        default_scopes: ps
            .scopes
            .clone()
            .unwrap_or_else(|| d.scopes.iter().map(|s| s.to_string()).collect()),
        account_id_field: field(&ps.account_id_field)
            .unwrap_or(d.account_id_field)
            .to_owned(),
        account_label_fields: match field(&ps.account_label_field) {
            Some(f) => vec![f.to_owned()],
            None => d
                .account_label_fields
                .iter()
                .map(|f| f.to_string())
                .collect(),
        },
        allowed_methods,
        max_response_bytes,
        api_timeout: std::time::Duration::from_secs(api_timeout_secs),
        quirks: d.quirks,
    })
}

fn field(set: &Option<String>) -> Option<&str> {
    set.as_deref().map(str::trim).filter(|f| !f.is_empty())
}

/// Tokens and client secrets travel to these URLs: https only, except on
/// loopback (tests, dev mode). Not even `insecure_http` allows plain http
/// elsewhere: anyone on the path would read every token.
fn check_url(url: &Url) -> Result<(), String> {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(format!("`{url}` has no host")),
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(format!(
                "`{url}` must be https (plain http only on loopback)"
            ));
        }
        _ => return Err(format!("`{url}` must be an https URL")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fakes::settings_with;

    fn error_of(providers_toml: &str) -> String {
        let settings = settings_with("https://connect.example.com", providers_toml);
        ProviderCatalog::from_settings(&settings)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn presets_fill_everything_but_credentials() {
        let settings = settings_with(
            "https://connect.example.com/",
            "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
             [providers.work]\npreset = \"google\"\nclient_id = \"c\"\nclient_secret = \"d\"\n",
        );
        let catalog = ProviderCatalog::from_settings(&settings).unwrap();
        assert_eq!(catalog.names(), vec!["github", "work"]);
        let gh = catalog.get("github").unwrap();
        assert_eq!(gh.display_name(), "GitHub");
        assert_eq!(gh.default_scopes(), ["read:user".to_string()]);
        assert_eq!(
            gh.redirect_uri(),
            "https://connect.example.com/oauth/callback/github"
        );
        assert!(!gh.supports_revocation());
        assert_eq!(gh.issuer(), None);
        let work = catalog.get("work").unwrap();
        assert_eq!(work.preset(), "google");
        assert_eq!(work.issuer(), Some("https://accounts.google.com"));
        assert!(work.supports_revocation());
        assert!(catalog.get("gitlab").is_none());
        assert!(!format!("{catalog:?}").contains("\"b\""));
    }

    #[test]
    fn missing_secret_names_the_setting_and_preset() {
        let e = error_of("[providers.github]\nclient_id = \"a\"\n");
        assert_eq!(
            e,
            "providers.github.client_secret: required by the github preset"
        );
    }

    #[test]
    fn generic_needs_its_urls() {
        let e = error_of("[providers.acme]\nclient_id = \"a\"\nclient_secret = \"b\"\n");
        assert_eq!(
            e,
            "providers.acme.authorize_url: required by the generic preset"
        );
        let e = error_of(
            "[providers.acme]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
             authorize_url = \"https://a.example/auth\"\ntoken_url = \"https://a.example/token\"\n\
             userinfo_url = \"https://a.example/me\"\n",
        );
        assert!(e.starts_with("providers.acme.api_base_url:"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = error_of("[providers.x]\npreset = \"gitlab2\"\nclient_id = \"a\"\n");
        assert!(e.starts_with("providers.x.preset: unknown preset"), "{e}");
        let e = error_of(
            "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
             token_url = \"http://github.example/token\"\n",
        );
        assert!(e.starts_with("providers.github.token_url:"), "{e}");
        let e = error_of(
            "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
             allowed_methods = [\"GET\", \"TRACE\"]\n",
        );
        assert!(e.starts_with("providers.github.allowed_methods:"), "{e}");
        let e = error_of(
            "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
             token_auth_method = \"private_key_jwt\"\n",
        );
        assert!(e.starts_with("providers.github.token_auth_method:"), "{e}");
    }

    #[test]
    fn plain_http_provider_urls_are_refused_off_loopback_even_with_insecure_http() {
        let toml = "[providers.github]\nclient_id = \"a\"\nclient_secret = \"b\"\n\
                    token_url = \"http://github.example/token\"\n";
        let mut settings = settings_with("http://127.0.0.1:8080", toml);
        settings.insecure_http = true;
        let e = ProviderCatalog::from_settings(&settings)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("providers.github.token_url:"), "{e}");
        let loopback = toml.replace("github.example", "127.0.0.1:9");
        let settings = settings_with("http://127.0.0.1:8080", &loopback);
        assert!(ProviderCatalog::from_settings(&settings).is_ok());
    }

    #[test]
    fn public_clients_need_no_secret_and_bases_get_a_slash() {
        let settings = settings_with(
            "https://connect.example.com",
            "[providers.acme]\nclient_id = \"a\"\ntoken_auth_method = \"none\"\n\
             authorize_url = \"https://a.example/auth\"\ntoken_url = \"https://a.example/token\"\n\
             userinfo_url = \"https://a.example/me\"\napi_base_url = \"https://api.a.example/v1\"\n\
             allowed_methods = [\"get\", \"post\"]\n",
        );
        let catalog = ProviderCatalog::from_settings(&settings).unwrap();
        let acme = catalog.get("acme").unwrap();
        assert_eq!(acme.api_base_url().as_str(), "https://api.a.example/v1/");
        assert_eq!(acme.allowed_methods, vec!["GET", "POST"]);
        assert_eq!(acme.display_name(), "acme");
        assert_eq!(acme.account_label_fields[0], "preferred_username");
    }
}
