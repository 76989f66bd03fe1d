//! URL templates over per-connection parameters: `https://{subdomain}.zendesk.com/…`.
//! A value reaches a template only after it matched its parameter's
//! pattern (anchored at both ends) and, for URL parameters, named a host
//! the operator allowed; the URL that comes out is checked again as a
//! whole (`check_url`), so a template can never point somewhere its
//! parameters were not allowed to.

use std::collections::BTreeMap;

use url::Url;

use super::entry::ParamSpec;

/// Names every template may use without declaring them.
pub(super) const BUILT_IN: &[&str] = &["base_url", "client_id"];

/// The `{name}`s in `template`, in order; `Err` for an unclosed brace or an
/// empty or malformed name.
pub(super) fn names(template: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("`{template}` has an unclosed `{{`"))?;
        let name = &after[..close];
        let well_formed = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !well_formed {
            return Err(format!("`{template}` has a malformed parameter `{name}`"));
        }
        out.push(name);
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(format!("`{template}` has a stray `}}`"));
    }
    Ok(out)
}

/// Replaces every `{name}` by its value; a name without a value is an error.
/// One pass over the template: a value is never read again for names, so a
/// value that itself holds `{other}` stays as it is.
pub(super) fn fill(template: &str, values: &BTreeMap<String, String>) -> Result<String, String> {
    names(template)?;
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        // `names` found every brace closed.
        let close = after.find('}').unwrap_or(after.len());
        let name = &after[..close];
        let value = values
            .get(name)
            .ok_or_else(|| format!("`{template}` needs the parameter `{name}`"))?;
        out.push_str(value);
        rest = after.get(close + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

/// A value that is text (not a URL): its pattern, which it must have,
/// matches the whole of it. Answers the value as templates take it.
pub(super) fn check_text(
    name: &str,
    pattern: Option<&Pattern>,
    value: &str,
) -> Result<String, String> {
    let pattern = pattern.ok_or_else(|| format!("parameter `{name}` has no pattern"))?;
    must_match(name, pattern, value)?;
    Ok(value.to_owned())
}

fn must_match(name: &str, pattern: &Pattern, value: &str) -> Result<(), String> {
    if pattern.matches(value) {
        Ok(())
    } else {
        Err(format!(
            "parameter `{name}` does not match its pattern `{}`",
            pattern.as_str()
        ))
    }
}

/// Checks a value against its parameter: the pattern must match the whole
/// value; a `url` parameter must be an https origin (plus path) on an
/// allowed host. Answers the value as templates take it (a URL without a
/// trailing slash). Messages never quote the value: it came from a user.
pub(super) fn check_value(name: &str, spec: &ParamSpec, value: &str) -> Result<String, String> {
    if spec.kind.as_deref() != Some("url") {
        return check_text(name, spec.pattern.as_ref(), value);
    }
    if let Some(pattern) = &spec.pattern {
        must_match(name, pattern, value)?;
    }
    // A backslash is a slash to the URL parser (`https://host\@evil`
    // becomes a path on `host`) but not to whoever reads the value: refused
    // rather than read one way here and another on the page.
    if value.contains('\\') {
        return Err(format!("parameter `{name}` must not contain a backslash"));
    }
    let url = Url::parse(value).map_err(|_| format!("parameter `{name}` is not a URL"))?;
    // The allowed host on the port it is allowed with: `host` alone allows
    // the https port only, `host:8443` that port only. Another port on the
    // same host may be another service, and the code, the client secret and
    // the tokens go where this URL says.
    let origin = allowed_host_form(&url);
    let allowed = spec.allowed_hosts.as_deref().unwrap_or_default();
    if !allowed.iter().any(|h| h.eq_ignore_ascii_case(&origin)) {
        return Err(format!(
            "parameter `{name}` names a host (or port) the operator did not allow (allowed_hosts)"
        ));
    }
    if url.scheme() != "https"
        || url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(format!(
            "parameter `{name}` must be an https URL without credentials, query or fragment"
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// How `allowed_hosts` names the place `url` points to: its host,
/// lowercase, with `:port` when the URL names a port other than its
/// scheme's.
pub(super) fn allowed_host_form(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// An operator's pattern for a parameter or a credential field, as
/// written and compiled, anchored at both ends so that `[a-z]+` cannot
/// match inside `evil.example/a`. Compiled when the catalog is read: a
/// pattern that does not compile stops the start-up naming its field, and
/// the values checked against it on every call and every form (a
/// connection's parameters, a credential's identifiers) cost a match, not
/// a compile — tens of microseconds each, where a match takes well under
/// one.
#[derive(Clone)]
pub(super) struct Pattern {
    source: String,
    anchored: regex::Regex,
}

impl Pattern {
    pub(super) fn new(source: &str) -> Result<Self, String> {
        let anchored = regex::Regex::new(&format!("^(?:{source})$"))
            .map_err(|e| format!("invalid pattern `{source}`: {e}"))?;
        Ok(Self {
            source: source.to_owned(),
            anchored,
        })
    }

    /// Whether the whole of `value` matches.
    pub(super) fn matches(&self, value: &str) -> bool {
        self.anchored.is_match(value)
    }

    /// The pattern as the operator wrote it.
    pub(super) fn as_str(&self) -> &str {
        &self.source
    }
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pattern").field(&self.source).finish()
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let source = String::deserialize(deserializer)?;
        Self::new(&source).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: &str) -> ParamSpec {
        ParamSpec {
            pattern: Some(Pattern::new(pattern).unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn names_and_filling() {
        assert_eq!(
            names("https://{subdomain}.zendesk.com/{x_1}").unwrap(),
            ["subdomain", "x_1"]
        );
        assert!(names("https://{sub.domain}.x").is_err());
        assert!(names("https://{open.x").is_err());
        assert!(names("https://close}.x").is_err());
        let values = BTreeMap::from([("shop".to_owned(), "acme".to_owned())]);
        assert_eq!(
            fill("https://{shop}.myshopify.com/admin/{shop}", &values).unwrap(),
            "https://acme.myshopify.com/admin/acme"
        );
        let e = fill("https://{tenant}.example", &values).unwrap_err();
        assert!(e.contains("`tenant`"), "{e}");
        // A value is filled in as it is, never read for names itself.
        let values = BTreeMap::from([
            ("a".to_owned(), "{b}".to_owned()),
            ("b".to_owned(), "evil.example".to_owned()),
        ]);
        assert_eq!(
            fill("https://{a}.x/{b}", &values).unwrap(),
            "https://{b}.x/evil.example"
        );
    }

    #[test]
    fn patterns_match_the_whole_value() {
        let s = spec("[a-z0-9][a-z0-9-]{0,62}");
        assert_eq!(check_value("subdomain", &s, "acme-1").unwrap(), "acme-1");
        for bad in ["evil.example/x", "acme.evil", "", "a b", "acme#", "ACME"] {
            let e = check_value("subdomain", &s, bad).unwrap_err();
            assert!(e.contains("does not match"), "{bad}: {e}");
        }
        assert!(check_value("x", &ParamSpec::default(), "free").is_err());
    }

    #[test]
    fn url_parameters_only_reach_allowed_hosts() {
        let s = ParamSpec {
            kind: Some("url".into()),
            allowed_hosts: Some(vec!["gitlab.example.com".into()]),
            ..Default::default()
        };
        assert_eq!(
            check_value("instance", &s, "https://GitLab.example.com/").unwrap(),
            "https://gitlab.example.com"
        );
        for bad in [
            "https://gitlab.evil.example",
            "http://gitlab.example.com",
            "https://user:pw@gitlab.example.com",
            "https://gitlab.example.com/?x=1",
            "https://gitlab.example.com.evil.example",
            "https://gitlab.example.com:8443",
            "https://gitlab.example.com\\@evil.example",
            "https://gitlab.example.com\\x",
            "not a url",
        ] {
            assert!(check_value("instance", &s, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_port_is_allowed_only_where_an_entry_names_it() {
        let s = ParamSpec {
            kind: Some("url".into()),
            allowed_hosts: Some(vec!["git.example.org:8443".into(), "gitlab.com".into()]),
            ..Default::default()
        };
        assert_eq!(
            check_value("instance", &s, "https://git.example.org:8443/").unwrap(),
            "https://git.example.org:8443"
        );
        // The default https port is no port at all.
        assert_eq!(
            check_value("instance", &s, "https://gitlab.com:443").unwrap(),
            "https://gitlab.com"
        );
        for bad in [
            "https://git.example.org",
            "https://git.example.org:8444",
            "https://gitlab.com:8443",
        ] {
            let e = check_value("instance", &s, bad).unwrap_err();
            assert!(e.contains("did not allow"), "{bad}: {e}");
        }
    }
}
