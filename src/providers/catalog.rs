//! The provider catalog: every `[providers.<name>]` of the settings is its
//! catalog entry (shipped in `catalog/`, or none for an operator's own)
//! with the table's fields merged over it, resolved once at start-up with
//! errors that name the setting.

use crate::domain::ProviderName;
use std::collections::BTreeMap;

use secrecy::ExposeSecret;

pub(super) use super::resolve::check_url;
use super::{
    Provider, ProviderConfigError,
    entry::{self, AccountIdFrom, CredentialKind, Entry, Refresh, TokenResponseFormat},
    provider::{ApiAuth, Quirks, Templates, TokenAuthMethod},
    resolve::{Endpoints, endpoints, methods, param_values},
    scopes::ScopeRules,
    shipped, template,
};
use crate::{
    config::{ProviderSettings, Settings},
    metrics::ProviderCalls,
};

/// Largest API response passed back unless configured.
const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// How long `api_request` waits for an answer unless configured.
const DEFAULT_API_TIMEOUT_SECS: u64 = 15;
/// Every API call must end inside the shutdown drain (`config::SHUTDOWN_DRAIN`, 30 s).
const MAX_API_TIMEOUT_SECS: u64 = 25;
/// Upper bound on `max_response_bytes`: answers end up in a model's context.
const MAX_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

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

    /// Whether `api_request` may change anything at any provider.
    pub fn allows_writes(&self) -> bool {
        self.providers.values().any(Provider::allows_writes)
    }

    /// Each provider's name and outbound call counters, sorted by name:
    /// what `/metrics` reports of them.
    pub fn call_metrics(&self) -> impl Iterator<Item = (&str, &ProviderCalls)> + Clone {
        self.providers
            .iter()
            .map(|(name, provider)| (name.as_str(), &provider.calls))
    }
}

/// A named problem with one setting of one provider.
pub(super) struct Named<'a> {
    provider: &'a str,
}

impl Named<'_> {
    pub(super) fn err(&self, field: &str, message: String) -> ProviderConfigError {
        ProviderConfigError::Invalid {
            provider: self.provider.to_owned(),
            field: field.to_owned(),
            message,
        }
    }
}

/// The shipped entry `entry_name` (none: an operator's own) with `over`
/// merged over it.
pub(super) fn merged_entry(
    entry_name: Option<&str>,
    over: &toml::Table,
) -> Result<Entry, (String, String)> {
    let mut table = match entry_name {
        Some(e) => shipped::table(e)
            .ok_or_else(|| ("preset".to_owned(), format!("unknown catalog entry `{e}`")))?,
        None => toml::Table::new(),
    };
    entry::merge(&mut table, over.clone());
    entry::parse(table)
}

/// One client secret, one place to send it. A `url` parameter the user
/// chooses that makes the token, refresh or revocation URL — where the
/// secret goes, with the code and the PKCE verifier — may allow one host
/// only: with several, any user could send this provider's secret to any
/// of them, and whoever runs that host could then act as this client (an
/// instance's OAuth application is registered there, so one client id
/// serves one instance anyway). Several instances are several providers.
fn secret_stays_on_one_host(n: &Named<'_>, e: &Entry) -> Result<(), ProviderConfigError> {
    let secret_goes_to = [&e.token_url, &e.refresh_url, &e.revocation_url];
    for (name, spec) in e.params.iter().flatten() {
        // Learned values are the provider's to tell, not the user's.
        let chosen_url = spec.kind.as_deref() == Some("url") && spec.source.is_none();
        let hosts = spec.allowed_hosts.as_deref().unwrap_or_default();
        let placeholder = format!("{{{name}}}");
        let carries_secret = secret_goes_to
            .iter()
            .filter_map(|t| t.as_deref())
            .any(|t| t.contains(&placeholder));
        if chosen_url && hosts.len() > 1 && carries_secret {
            return Err(n.err(
                &format!("params.{name}.allowed_hosts"),
                "names several hosts, but the client secret is sent to the one a user picks: \
                 allow one host here, and add a provider per instance (with `preset`)"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// The client secret goes where the token endpoint is and, from the
/// shipped entry, to its refresh and revocation endpoints too: an operator
/// who moves the token endpoint to another host (GitHub Enterprise Server,
/// a provider's other region) and leaves one of those where the entry had
/// it would send this client's secret to the entry's host on every
/// refresh or disconnect. Refused, naming the field to set.
fn secret_follows_the_token_endpoint(
    n: &Named<'_>,
    entry_name: &str,
    over: &toml::Table,
    e: &Entry,
) -> Result<(), ProviderConfigError> {
    let host = |u: Option<&str>| {
        let parsed = url::Url::parse(u?).ok()?;
        parsed.host_str().map(str::to_owned)
    };
    if !over.contains_key("token_url") {
        return Ok(());
    }
    let Some(token_host) = host(e.token_url.as_deref()) else {
        return Ok(());
    };
    // Moved within the entry's own host, nothing leaves it.
    let shipped = shipped::table(entry_name);
    let shipped_token = shipped.as_ref().and_then(|t| t.get("token_url")?.as_str());
    if host(shipped_token).is_some_and(|h| h == token_host) {
        return Ok(());
    }
    for (field, url) in [
        ("refresh_url", &e.refresh_url),
        ("revocation_url", &e.revocation_url),
    ] {
        if over.contains_key(field) {
            continue;
        }
        if let Some(other) = host(url.as_deref()).filter(|h| *h != token_host) {
            return Err(n.err(
                field,
                format!(
                    "is still the entry's (on {other}), but token_url was moved to {token_host}: \
                     set {field} too, or this client's secret would be sent to {other}"
                ),
            ));
        }
    }
    Ok(())
}

fn resolve(name: &str, ps: &ProviderSettings, base: &str) -> Result<Provider, ProviderConfigError> {
    let n = Named { provider: name };
    let entry_name = match &ps.preset {
        Some(p) => Some(p.as_str()),
        None => shipped::table(name).map(|_| name),
    };
    let e = merged_entry(entry_name, &ps.overrides).map_err(|(path, message)| {
        if path == "preset" {
            let shipped = shipped::names().join(", ");
            n.err("preset", format!("{message} (shipped: {shipped})"))
        } else {
            n.err(&path, message)
        }
    })?;
    // A shipped entry, however the operator changed it, must still be a
    // whole one; an operator's own entry is checked field by field below.
    if let Some(entry_name) = entry_name {
        super::check::entry(&e).map_err(|(field, m)| n.err(&field, m))?;
        secret_follows_the_token_endpoint(&n, entry_name, &ps.overrides, &e)?;
    }
    let kind = e.kind.unwrap_or(CredentialKind::Oauth2);
    let oauth = kind == CredentialKind::Oauth2;
    // An operator's own API-key or Basic entry is checked whole too: it has
    // no client credentials to catch a mistake later.
    if !oauth && entry_name.is_none() {
        super::check::entry(&e).map_err(|(field, m)| n.err(&field, m))?;
    }
    if oauth && ps.client_id.trim().is_empty() {
        let var = crate::config::env_name(&format!("providers.{name}.client_id"));
        return Err(n.err(
            "client_id",
            format!("required by oauth2 entries (set it in the file or as {var})"),
        ));
    }
    let values = param_values(&n, &e, base, &ps.client_id)?;
    let entry_label = entry_name.unwrap_or("custom");
    let Endpoints {
        authorize: authorize_url,
        token: token_url,
        refresh: refresh_url,
        userinfo: userinfo_url,
        api_base: api_base_url,
        revocation: revocation_url,
    } = endpoints(&n, &e, &values, entry_label)?;

    let auth_method = match &e.token_auth_method {
        Some(m) => TokenAuthMethod::parse(m).ok_or_else(|| {
            n.err(
                "token_auth_method",
                format!("unknown method `{m}` (client_secret_post, client_secret_basic or none)"),
            )
        })?,
        None if oauth => TokenAuthMethod::ClientSecretBasic,
        // No token endpoint, no client to authenticate.
        None => TokenAuthMethod::None,
    };
    let client_secret = ps
        .client_secret
        .clone()
        .filter(|s| !s.expose_secret().is_empty());
    if auth_method != TokenAuthMethod::None && client_secret.is_none() {
        let var = crate::config::env_name(&format!("providers.{name}.client_secret"));
        return Err(n.err(
            "client_secret",
            format!(
                "required by token_auth_method {} (set {var}_FILE to a file holding it, or \
                 {var}; with Docker Compose, a {var}_FILE line in deploy/providers.env)",
                auth_method.as_str()
            ),
        ));
    }
    if client_secret.is_some() {
        secret_stays_on_one_host(&n, &e)?;
    }
    let allowed_methods = methods(&n, e.allowed_methods.as_deref())?;
    let grant_paths = e.grant_paths.clone().unwrap_or_default();
    for path in &grant_paths {
        super::guard::check_grant_path(path).map_err(|m| n.err("grant_paths", m))?;
    }
    let api_timeout_secs = e.api_timeout_secs.unwrap_or(DEFAULT_API_TIMEOUT_SECS);
    if !(1..=MAX_API_TIMEOUT_SECS).contains(&api_timeout_secs) {
        return Err(n.err(
            "api_timeout_secs",
            format!("must be between 1 and {MAX_API_TIMEOUT_SECS}"),
        ));
    }
    let max_response_bytes = e.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
    if !(1..=MAX_MAX_RESPONSE_BYTES).contains(&max_response_bytes) {
        return Err(n.err(
            "max_response_bytes",
            format!("must be between 1 and {MAX_MAX_RESPONSE_BYTES}"),
        ));
    }
    let userinfo_method = match e.userinfo_method.as_deref().unwrap_or("GET") {
        "GET" => reqwest::Method::GET,
        "POST" => reqwest::Method::POST,
        other => return Err(n.err("userinfo_method", format!("`{other}`: GET or POST"))),
    };
    let api_auth = match &e.api_auth {
        Some(a) => ApiAuth::parse(a).ok_or_else(|| {
            n.err(
                "api_auth",
                format!("`{a}`: bearer, header:<name> or query:<name>"),
            )
        })?,
        None => ApiAuth::Bearer,
    };
    let mut headers = e.api_headers.clone().unwrap_or_default();
    // Answers are read as JSON unless the entry asks for its own type.
    if !headers.keys().any(|k| k.eq_ignore_ascii_case("accept")) {
        headers.insert("accept".into(), "application/json".into());
    }
    let api_headers = headers
        .into_iter()
        .map(|(k, v)| {
            let v = template::fill(&v, &values).map_err(|m| n.err("api_headers", m))?;
            Ok((k, v))
        })
        .collect::<Result<Vec<_>, ProviderConfigError>>()?;
    let issuer = match &e.issuer {
        Some(i) => Some(template::fill(i, &values).map_err(|m| n.err("issuer", m))?),
        None => None,
    };
    // RFC 9207: `iss` protects against mix-up only when compared with
    // the issuer; demanding one that nothing is compared with would look
    // like that protection without being it.
    let require_iss = e.require_iss.unwrap_or(false);
    if require_iss && issuer.is_none() {
        return Err(n.err(
            "require_iss",
            "needs `issuer`: the callback's `iss` is compared with it (RFC 9207)".into(),
        ));
    }
    let account_id_from = e.account_id_from.unwrap_or(AccountIdFrom::Response);
    let pointer = |field: &'static str, p: &str| {
        if p.is_empty() || p.starts_with('/') {
            Ok(p.to_owned())
        } else {
            Err(n.err(
                field,
                format!("`{p}` is not a JSON pointer (starts with `/`)"),
            ))
        }
    };
    let pairs = |m: &Option<BTreeMap<String, String>>| {
        m.clone()
            .unwrap_or_default()
            .into_iter()
            .collect::<Vec<_>>()
    };
    let name_checked = ProviderName::parse(name).map_err(|e| n.err("name", e.to_string()))?;
    Ok(Provider {
        name: name_checked,
        entry: entry_label.to_owned(),
        kind,
        display_name: e.display_name.clone().unwrap_or_else(|| name.to_owned()),
        docs_url: e.docs_url.clone(),
        client_id: ps.client_id.clone(),
        client_secret,
        auth_method,
        authorize_url,
        token_url,
        refresh_url,
        revocation_url,
        userinfo_url,
        userinfo_method,
        userinfo_body: e.userinfo_body.clone(),
        api_base_url,
        issuer,
        require_iss,
        redirect_uri: format!("{base}/oauth/callback/{name}"),
        default_scopes: e.scopes.clone().unwrap_or_default(),
        account_id_from,
        account_id_pointer: pointer(
            "account_id_pointer",
            e.account_id_pointer.as_deref().unwrap_or("/sub"),
        )?,
        account_label_pointers: match &e.account_label_pointers {
            Some(list) => list
                .iter()
                .map(|p| pointer("account_label_pointers", p))
                .collect::<Result<_, _>>()?,
            None => ["/preferred_username", "/email", "/name"]
                .map(str::to_owned)
                .to_vec(),
        },
        allowed_methods,
        grant_paths,
        max_response_bytes,
        api_timeout: std::time::Duration::from_secs(api_timeout_secs),
        quirks: Quirks {
            scope_param: e.scope_param.clone().unwrap_or_else(|| "scope".into()),
            scope_separator: e.scope_separator.clone().unwrap_or_else(|| " ".into()),
            pkce: e.pkce.unwrap_or(true),
            authorize_params: pairs(&e.authorize_params),
            token_params: pairs(&e.token_params),
            account_chooser: pairs(&e.account_chooser),
            decline_errors: e.decline_errors.clone().unwrap_or_default(),
            dead_grant_answers: match &e.dead_grant_answers {
                Some(list) => list
                    .iter()
                    .map(|a| Ok((pointer("dead_grant_answers", &a.pointer)?, a.value.clone())))
                    .collect::<Result<_, _>>()?,
                None => Vec::new(),
            },
            json_token_request: e.token_request_format == Some(entry::TokenRequestFormat::Json),
            revocation: e.revocation.unwrap_or(entry::Revocation::Rfc7009),
            form_answers: e.token_response_format
                == Some(TokenResponseFormat::FormUnlessJsonAccept),
            token_pointer: e.token_pointer.clone(),
            ok_envelope: e.error_envelope == Some(entry::ErrorEnvelope::OkField),
            refresh: e.refresh.unwrap_or(Refresh::Expiring),
            refresh_token_kept: e.refresh == Some(Refresh::Expiring),
            token_lifetime: e.token_lifetime_secs.map(std::time::Duration::from_secs),
            granted_scopes_in_callback: e.granted_scopes_in_callback.unwrap_or(false),
            api_headers,
            api_auth,
            path_rules: e.api_path_rules,
        },
        templates: Templates {
            authorize: e.authorize_url.clone(),
            token: e.token_url.clone(),
            refresh: e.refresh_url.clone(),
            revocation: e.revocation_url.clone(),
            userinfo: e.userinfo_url.clone(),
            api_base: e.api_base_url.clone(),
        },
        param_specs: e.params.clone().unwrap_or_default(),
        field_specs: e.fields.clone().unwrap_or_default(),
        key_url: e.key_url.clone(),
        instructions: e.instructions.clone(),
        fixed_values: values.clone(),
        scope_rules: ScopeRules {
            prefix: e.scope_prefix.clone(),
            aliases: e.scope_aliases.clone().unwrap_or_default(),
            implied_by: e.scope_implied_by.clone().unwrap_or_default(),
            descriptions: e.scope_descriptions.clone().unwrap_or_default(),
            unlisted: e.unlisted_scopes.clone().unwrap_or_default(),
        },
        calls: ProviderCalls::default(),
    })
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "catalog_enable_tests.rs"]
mod enable_tests;
