//! Values the catalog resolves an entry with: its parameters as the
//! operator fixed them, the allowed API methods, and the rule for URLs that
//! credentials travel to.

use std::collections::BTreeMap;

use url::Url;

use super::{ProviderConfigError, catalog::Named, entry::Entry, template};

const KNOWN_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];
const READ_ONLY: &[&str] = &["GET", "HEAD"];

/// The values of the entry's parameters as the operator fixed them (their
/// `default`), checked against their patterns, plus the built-in ones.
/// Parameters asked per connection or learned after consent are not
/// available yet; an entry that needs one without a default is refused.
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
    for (pname, spec) in e.params.iter().flatten() {
        if spec.source.is_some() {
            return Err(n.err(
                "params",
                format!("`{pname}` is learned after consent, which is not available yet"),
            ));
        }
        let value = spec.default.as_deref().ok_or_else(|| {
            n.err(
                "params",
                format!("`{pname}` needs a value: set params.{pname}.default"),
            )
        })?;
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
/// loopback (tests, dev mode) or when the operator chose plain http.
pub(super) fn check_url(url: &Url, insecure_http: bool) -> Result<(), String> {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(format!("`{url}` has no host")),
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback || insecure_http => {}
        "http" => return Err(format!("`{url}` must be https")),
        _ => return Err(format!("`{url}` must be an https URL")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".into());
    }
    Ok(())
}
