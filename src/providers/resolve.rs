//! Values the catalog resolves an entry with: its parameters as the
//! operator fixed them, its endpoints, the allowed API methods, and the
//! rule for URLs that credentials travel to.

use std::collections::BTreeMap;

use url::Url;

use super::{
    ProviderConfigError,
    catalog::Named,
    entry::{CredentialKind, Entry},
    template,
};

const KNOWN_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
const READ_ONLY: &[&str] = &["GET", "HEAD"];

/// The values the catalog resolves an entry's endpoints with at start-up:
/// the built-in ones and each parameter's `default` (as the operator set
/// it), checked against its pattern. Per-connection values go through
/// `Provider::endpoints_for`.
pub(super) fn param_values(
    n: &Named<'_>,
    e: &Entry,
    base: &str,
    client_id: &str,
) -> Result<BTreeMap<String, String>, ProviderConfigError> {
    let mut values = BTreeMap::from([
        ("base_url".to_owned(), base.to_owned()),
        ("client_id".to_owned(), client_id.to_owned()),
    ]);
    // A template that needs a parameter without a value here fails when
    // it is filled, naming the parameter.
    for (pname, spec) in e.params.iter().flatten() {
        let Some(value) = spec.default.as_deref().filter(|_| spec.source.is_none()) else {
            continue;
        };
        let value = template::check_value(pname, spec, value).map_err(|m| n.err("params", m))?;
        values.insert(pname.clone(), value);
    }
    Ok(values)
}

/// An entry's endpoints as the catalog resolves them at start-up; `None`
/// where it has none, and where a URL needs a value only a connection has
/// (a Zendesk subdomain without default, Salesforce's `instance_url`: see
/// `Provider::url_for`).
pub(super) struct Endpoints {
    pub authorize: Option<Url>,
    pub token: Option<Url>,
    pub refresh: Option<Url>,
    pub userinfo: Option<Url>,
    /// Ends with `/`.
    pub api_base: Option<Url>,
    pub revocation: Option<Url>,
}

/// Fills the entry's URL templates with `values` and checks each URL
/// (`check_url`); an OAuth entry must have all of its endpoints, though
/// some may be resolved per connection only.
pub(super) fn endpoints(
    n: &Named<'_>,
    e: &Entry,
    values: &BTreeMap<String, String>,
    entry_label: &str,
) -> Result<Endpoints, ProviderConfigError> {
    let oauth = e.kind.unwrap_or(CredentialKind::Oauth2) == CredentialKind::Oauth2;
    // Values only a connection has: the parameters users give on the
    // connect page or consent tells, and the credential's non-secret
    // fields (an account SID).
    let per_connection: Vec<&str> = e
        .params
        .iter()
        .flatten()
        .map(|(name, _)| name.as_str())
        .chain(
            e.fields
                .iter()
                .flatten()
                .filter(|(_, f)| f.secret == Some(false))
                .map(|(name, _)| name.as_str()),
        )
        .filter(|name| !values.contains_key(*name))
        .collect();
    let url = |field: &'static str,
               template: &Option<String>|
     -> Result<Option<Url>, ProviderConfigError> {
        let Some(template) = template else {
            return Ok(None);
        };
        // Such URLs are resolved per connection only (shipped templates
        // are checked with their examples by `check::entry`).
        if template::names(template)
            .map_err(|m| n.err(field, m))?
            .iter()
            .any(|name| per_connection.contains(name))
        {
            return Ok(None);
        }
        let text = template::fill(template, values).map_err(|m| n.err(field, m))?;
        let url =
            Url::parse(&text).map_err(|e| n.err(field, format!("`{text}` is invalid: {e}")))?;
        check_url(&url).map_err(|m| n.err(field, m))?;
        Ok(Some(url))
    };
    let required = |field: &'static str, template: &Option<String>| {
        if template.is_none() {
            return Err(n.err(field, format!("required by the {entry_label} entry")));
        }
        url(field, template)
    };

    let (authorize_url, token_url, refresh_url, userinfo_url) = if oauth {
        let authorize_url = required("authorize_url", &e.authorize_url)?;
        let token_url = required("token_url", &e.token_url)?;
        let refresh_url = match &e.refresh_url {
            Some(_) => url("refresh_url", &e.refresh_url)?,
            None => token_url.clone(),
        };
        let userinfo_url = required("userinfo_url", &e.userinfo_url)?;
        (authorize_url, token_url, refresh_url, userinfo_url)
    } else {
        (None, None, None, url("userinfo_url", &e.userinfo_url)?)
    };
    let mut api_base_url = if oauth {
        required("api_base_url", &e.api_base_url)?
    } else {
        url("api_base_url", &e.api_base_url)?
    };
    let revocation_url = url("revocation_url", &e.revocation_url)?;
    if let Some(api_base_url) = api_base_url.as_mut() {
        if api_base_url.query().is_some() || api_base_url.fragment().is_some() {
            return Err(n.err("api_base_url", "must not carry a query or fragment".into()));
        }
        // A base without a trailing slash would let `join` replace its last
        // segment, and would make the prefix check admit `/v1x` for `/v1`.
        if !api_base_url.path().ends_with('/') {
            let path = format!("{}/", api_base_url.path());
            api_base_url.set_path(&path);
        }
    }

    Ok(Endpoints {
        authorize: authorize_url,
        token: token_url,
        refresh: refresh_url,
        userinfo: userinfo_url,
        api_base: api_base_url,
        revocation: revocation_url,
    })
}

pub(super) fn methods(
    n: &Named<'_>,
    list: Option<&[String]>,
) -> Result<Vec<String>, ProviderConfigError> {
    let Some(list) = list else {
        return Ok(READ_ONLY.iter().map(|m| m.to_string()).collect());
    };
    list.iter()
        .map(|m| {
            let m = m.trim().to_ascii_uppercase();
            if KNOWN_METHODS.contains(&m.as_str()) {
                Ok(m)
            } else {
                Err(n.err(
                    "allowed_methods",
                    format!("unknown method `{m}` (known: {})", KNOWN_METHODS.join(", ")),
                ))
            }
        })
        .collect()
}

/// Tokens and client secrets travel to these URLs: https only, except on
/// loopback (tests, dev mode). Not even `insecure_http` allows plain http
/// elsewhere: anyone on the path would read every token.
pub(super) fn check_url(url: &Url) -> Result<(), String> {
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
