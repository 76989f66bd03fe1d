//! Whole-entry checks, for shipped entries (a test runs them over every
//! file in `catalog/`) and for each entry an operator enables, after their
//! fields are merged over it: what the kind needs is there, every template
//! names only declared parameters and resolves (with each parameter's
//! example) to an https URL, patterns compile and match their examples,
//! identity pointers are JSON pointers, and credentials say how they are
//! sent.

use std::collections::BTreeMap;

use url::Url;

use super::{
    catalog::check_url,
    entry::{AccountIdFrom, CredentialKind, Entry},
    provider::ApiAuth,
    template,
};

/// The fields a code exchange writes itself (RFC 6749 §4.1.3, PKCE and
/// client authentication): `token_params` may add others, never these.
const TOKEN_REQUEST_FIELDS: &[&str] = &[
    "grant_type",
    "code",
    "redirect_uri",
    "code_verifier",
    "client_id",
    "client_secret",
    "refresh_token",
];

/// A problem: the field and what is wrong with it.
pub(super) type Problem = (String, String);

fn problem(field: &str, message: impl Into<String>) -> Problem {
    (field.to_owned(), message.into())
}

pub(super) fn entry(e: &Entry) -> Result<(), Problem> {
    let kind = e.kind.ok_or_else(|| problem("kind", "required"))?;
    let oauth = kind == CredentialKind::Oauth2;
    if e.display_name.as_deref().is_none_or(str::is_empty) {
        return Err(problem("display_name", "required"));
    }
    let docs = e
        .docs_url
        .as_deref()
        .ok_or_else(|| problem("docs_url", "required"))?;
    https_link("docs_url", docs)?;
    if !oauth {
        https_link("key_url", e.key_url.as_deref().unwrap_or_default())?;
        if e.instructions.as_deref().is_none_or(str::is_empty) {
            return Err(problem(
                "instructions",
                "required by api_key and basic entries",
            ));
        }
    }

    let mut examples = BTreeMap::new();
    for name in template::BUILT_IN {
        examples.insert((*name).to_owned(), built_in_example(name).to_owned());
    }
    for (name, spec) in e.params.iter().flatten() {
        let field = format!("params.{name}");
        if spec.label.as_deref().is_none_or(str::is_empty) {
            return Err(problem(&field, "needs a label"));
        }
        let example = spec
            .example
            .as_deref()
            .ok_or_else(|| problem(&field, "needs an example"))?;
        match spec.source.as_deref() {
            None => {}
            Some("token_response") if spec.pointer.is_some() => {}
            Some("lookup") if spec.pointer.is_some() && spec.lookup_url.is_some() => {
                // An access token travels there: the rule of every endpoint.
                let lookup = format!("{field}.lookup_url");
                let text = spec.lookup_url.as_deref().unwrap_or_default();
                let url =
                    Url::parse(text).map_err(|e| problem(&lookup, format!("`{text}`: {e}")))?;
                check_url(&url).map_err(|m| problem(&lookup, m))?;
            }
            Some(_) => {
                return Err(problem(
                    &field,
                    "source is token_response (with pointer) or lookup (with pointer and lookup_url)",
                ));
            }
        }
        if let Some(pointer) = &spec.pointer {
            json_pointer(&format!("{field}.pointer"), pointer)?;
        }
        let mut check_spec = spec.clone();
        if let Some(default) = &spec.default {
            template::check_value(name, &check_spec, default).map_err(|m| problem(&field, m))?;
        }
        // The example shows the shape of a value; which hosts are allowed is
        // the operator's choice, so its host counts as allowed here.
        if let Some(host) = url::Url::parse(example)
            .ok()
            .filter(|u| u.host_str().is_some())
            .map(|u| template::allowed_host_form(&u))
        {
            check_spec
                .allowed_hosts
                .get_or_insert_with(Vec::new)
                .push(host);
        }
        let value =
            template::check_value(name, &check_spec, example).map_err(|m| problem(&field, m))?;
        examples.insert(name.clone(), value);
    }
    for (name, spec) in e.fields.iter().flatten() {
        let field = format!("fields.{name}");
        if oauth {
            return Err(problem(
                &field,
                "only api_key and basic entries have fields",
            ));
        }
        if spec.label.as_deref().is_none_or(str::is_empty) {
            return Err(problem(&field, "needs a label"));
        }
        // (One that does not compile stopped the reading of the entry.)
        if spec.pattern.is_none() {
            return Err(problem(&field, "needs a pattern"));
        }
        let send = spec.send.as_deref().unwrap_or_default();
        let valid_send = matches!(send, "bearer" | "basic_user" | "basic_password" | "none")
            || (send.contains(':') && ApiAuth::parse(send).is_some());
        if !valid_send {
            return Err(problem(
                &field,
                "send is bearer, basic_user, basic_password, header:<name>, query:<name> or none",
            ));
        }
        // Identifiers (an account SID) may appear in URLs; secrets never.
        if spec.secret == Some(false) {
            examples.insert(name.clone(), "example".into());
        }
    }
    let sends = |s: &str| {
        e.fields
            .iter()
            .flatten()
            .filter(|(_, f)| f.send.as_deref() == Some(s))
            .count()
    };
    match kind {
        CredentialKind::ApiKey if e.fields.as_ref().is_none_or(BTreeMap::is_empty) => {
            return Err(problem("fields", "an api_key entry names its key field"));
        }
        CredentialKind::Basic if sends("basic_user") != 1 || sends("basic_password") != 1 => {
            return Err(problem(
                "fields",
                "a basic entry has one basic_user and one basic_password field",
            ));
        }
        _ => {}
    }

    let mut urls = vec![
        ("userinfo_url", &e.userinfo_url),
        ("api_base_url", &e.api_base_url),
    ];
    if oauth {
        urls.extend([
            ("authorize_url", &e.authorize_url),
            ("token_url", &e.token_url),
        ]);
    }
    for (field, template) in urls {
        if template.is_none() {
            return Err(problem(field, "required"));
        }
    }
    for (field, template) in [
        ("authorize_url", &e.authorize_url),
        ("token_url", &e.token_url),
        ("refresh_url", &e.refresh_url),
        ("revocation_url", &e.revocation_url),
        ("userinfo_url", &e.userinfo_url),
        ("api_base_url", &e.api_base_url),
    ] {
        let Some(template) = template else { continue };
        let text = template::fill(template, &examples).map_err(|m| problem(field, m))?;
        let url = Url::parse(&text).map_err(|err| problem(field, format!("`{text}`: {err}")))?;
        check_url(&url).map_err(|m| problem(field, m))?;
    }

    if e.account_id_from.unwrap_or(AccountIdFrom::Response) == AccountIdFrom::Response {
        let id = e
            .account_id_pointer
            .as_deref()
            .ok_or_else(|| problem("account_id_pointer", "required"))?;
        json_pointer("account_id_pointer", id)?;
        let labels = e.account_label_pointers.as_deref().unwrap_or_default();
        if labels.is_empty() {
            return Err(problem("account_label_pointers", "required"));
        }
        for p in labels {
            json_pointer("account_label_pointers", p)?;
        }
    }
    if oauth && (e.scope_separator.is_none() || e.pkce.is_none() || e.refresh.is_none()) {
        return Err(problem(
            "scope_separator",
            "oauth2 entries say their scope_separator, pkce and refresh",
        ));
    }
    for (name, _) in e.token_params.iter().flatten() {
        if TOKEN_REQUEST_FIELDS.contains(&name.as_str()) {
            return Err(problem(
                "token_params",
                format!("`{name}` is a field the token request sets itself"),
            ));
        }
    }
    for (name, _) in e.api_headers.iter().flatten() {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(problem(
                "api_headers",
                format!("`{name}` is not a header name"),
            ));
        }
    }
    Ok(())
}

fn built_in_example(name: &str) -> &'static str {
    match name {
        "base_url" => "http://127.0.0.1:8080",
        _ => "client-id",
    }
}

fn https_link(field: &str, link: &str) -> Result<(), Problem> {
    match Url::parse(link) {
        Ok(url) if url.scheme() == "https" && url.host().is_some() => Ok(()),
        _ => Err(problem(field, "must be an https link")),
    }
}

fn json_pointer(field: &str, pointer: &str) -> Result<(), Problem> {
    if pointer.starts_with('/') {
        Ok(())
    } else {
        Err(problem(field, format!("`{pointer}` is not a JSON pointer")))
    }
}
