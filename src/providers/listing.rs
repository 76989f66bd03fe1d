//! The shipped catalog as a Markdown table, for the README (a test keeps
//! the README's copy equal to this).

use super::{
    entry::{CredentialKind, Entry, Refresh},
    shipped,
};

/// One row per shipped entry: its name in settings, the service, what the
/// user hands over, the per-connection parameters, refresh, PKCE, and the
/// docs.
pub fn catalog_markdown() -> String {
    let mut out = String::from(
        "| Name | Service | Credential | Parameters | Refresh | PKCE | Documentation |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for name in shipped::names() {
        let Some(entry) = shipped::table(name).and_then(|t| super::entry::parse(t).ok()) else {
            out.push_str(&format!("| `{name}` | (invalid entry) | | | | | |\n"));
            continue;
        };
        out.push_str(&row(name, &entry));
    }
    out
}

fn row(name: &str, e: &Entry) -> String {
    let kind = e.kind.unwrap_or(CredentialKind::Oauth2);
    let credential = match kind {
        CredentialKind::Oauth2 => "OAuth 2.0".to_owned(),
        _ => {
            let fields: Vec<_> = e
                .fields
                .iter()
                .flatten()
                .map(|(_, f)| f.label.clone().unwrap_or_default())
                .collect();
            let what = if kind == CredentialKind::Basic {
                "Basic"
            } else {
                "API key"
            };
            format!("{what}: {}", fields.join(" + "))
        }
    };
    let params: Vec<_> = e
        .params
        .iter()
        .flatten()
        .map(|(p, spec)| match spec.source.as_deref() {
            Some(source) => format!("`{p}` (from {})", source.replace('_', " ")),
            None => format!("`{p}`"),
        })
        .collect();
    let refresh = match (kind, e.refresh) {
        (CredentialKind::Oauth2, Some(r)) => r.as_str().replace('_', "-"),
        (CredentialKind::Oauth2, None) => Refresh::Expiring.as_str().to_owned(),
        _ => "—".to_owned(),
    };
    // Off where the provider refuses or ignores it (README, "Provider
    // catalog").
    let pkce = match (kind, e.pkce) {
        (CredentialKind::Oauth2, Some(false)) => "no",
        (CredentialKind::Oauth2, _) => "S256",
        _ => "—",
    };
    format!(
        "| `{name}` | {} | {credential} | {} | {refresh} | {pkce} | [docs]({}) |\n",
        e.display_name.as_deref().unwrap_or(name),
        if params.is_empty() {
            "—".to_owned()
        } else {
            params.join(", ")
        },
        e.docs_url.as_deref().unwrap_or_default(),
    )
}
