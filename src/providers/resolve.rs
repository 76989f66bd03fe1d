//! Values the catalog resolves an entry with: its parameters as the
//! operator fixed them, the allowed API methods, and the rule for URLs that
//! credentials travel to.

use std::collections::BTreeMap;

use url::Url;

use super::{ProviderConfigError, catalog::Named, entry::Entry, template};

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
