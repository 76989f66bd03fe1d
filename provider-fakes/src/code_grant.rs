//! What the newer fakes (Entra, Salesforce, Atlassian) share: the
//! authorization-code checks (the code is live and single-use, the
//! redirect URI is the authorize request's, the PKCE verifier matches its
//! challenge when there was one), the account behind a bearer token, the
//! RFC 6749 error answer, and the `[providers.<name>]` table.

use std::collections::BTreeMap;

use actix_web::{HttpRequest, HttpResponse};
use serde_json::json;

use super::{
    FakeProvider,
    http::{credentials, json},
    state::{Account, Code, Memory, Shared, pkce_matches},
};

/// Why a code was refused, in the provider's words.
pub(super) enum Refusal {
    /// Unknown, expired or already used.
    Code,
    RedirectUri,
    Verifier,
}

/// Takes the code of a token request (it is gone whatever follows).
pub(super) fn redeem(memory: &mut Memory, p: &BTreeMap<String, String>) -> Result<Code, Refusal> {
    let given = p.get("code").map(String::as_str).unwrap_or_default();
    let code = memory.take_code(given).ok_or(Refusal::Code)?;
    if p.get("redirect_uri").map(String::as_str) != code.param("redirect_uri") {
        return Err(Refusal::RedirectUri);
    }
    if let Some(challenge) = code.param("code_challenge") {
        let method = code.param("code_challenge_method").unwrap_or("plain");
        let verifier = p.get("code_verifier").ok_or(Refusal::Verifier)?;
        if !pkce_matches(method, challenge, verifier) {
            return Err(Refusal::Verifier);
        }
    }
    Ok(code)
}

/// The `Host` header and path of an API call, as the fake records it.
pub(super) fn seen(req: &HttpRequest) -> (String, String) {
    let host = super::http::header(req, "host").unwrap_or_default();
    (host.to_owned(), req.path().to_owned())
}

/// The account of the live access token in `Authorization: Bearer`.
pub(super) fn bearer_account(req: &HttpRequest, fake: &Shared) -> Option<Account> {
    let token = credentials(req, &["bearer"])?;
    fake.memory().access(token).map(|a| a.account)
}

/// An RFC 6749 §5.2 error answer.
pub(super) fn oauth_error(status: u16, code: &str, description: &str) -> HttpResponse {
    json(
        status,
        json!({"error": code, "error_description": description}),
    )
}

/// `[providers.<name>]` for a shipped entry: this fake's client, each URL
/// field as a path under its base, and `params.<param>.<field>` values.
pub(super) fn entry_table(
    fake: &FakeProvider,
    urls: &[(&str, &str)],
    params: &[(&str, &str, &str)],
) -> toml::Table {
    let mut table = toml::Table::new();
    table.insert("client_id".into(), fake.client_id().into());
    table.insert("client_secret".into(), fake.client_secret().into());
    for (field, path) in urls {
        table.insert((*field).into(), format!("{}{path}", fake.base).into());
    }
    let mut specs = toml::Table::new();
    for (param, field, value) in params {
        let spec = specs
            .entry(*param)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(spec) = spec {
            spec.insert((*field).into(), (*value).into());
        }
    }
    if !specs.is_empty() {
        table.insert("params".into(), specs.into());
    }
    table
}
