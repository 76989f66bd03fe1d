//! The authorization-code checks the newer fakes share: the code is live
//! and single-use, the redirect URI is the authorize request's, and the
//! PKCE verifier matches its challenge when there was one.

use std::collections::BTreeMap;

use actix_web::HttpRequest;

use super::state::{Code, Memory, pkce_matches};

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
