//! Authorization codes and refresh tokens of the dev identity provider, kept
//! in memory (dev mode is one process). Only SHA-256 digests are kept as
//! keys; a code is removed on its first presentation, whatever the outcome,
//! and refresh tokens rotate.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::params::UserName;

pub const CODE_TTL: Duration = Duration::from_secs(60);
pub const REFRESH_TTL: Duration = Duration::from_secs(24 * 3600);

/// What an authorization code stands for.
#[derive(Debug, Clone)]
pub struct CodeGrant {
    pub client_id: String,
    /// Exactly as the client sent it; the token request must repeat it.
    pub redirect_uri: String,
    pub code_challenge: String,
    pub user: UserName,
    pub scope: String,
    pub nonce: Option<String>,
    /// Seconds since the epoch when the user signed in.
    pub auth_time: u64,
}

/// What a refresh token stands for.
#[derive(Debug, Clone)]
pub struct RefreshGrant {
    pub client_id: String,
    pub user: UserName,
    pub scope: String,
    pub auth_time: u64,
}

#[derive(Default)]
pub struct Grants {
    codes: HashMap<[u8; 32], (CodeGrant, Instant)>,
    refresh: HashMap<[u8; 32], (RefreshGrant, Instant)>,
}

impl Grants {
    /// Stores `grant` and returns the code (256 random bits, base64url).
    pub fn issue_code(&mut self, grant: CodeGrant, now: Instant) -> String {
        self.sweep(now);
        let code = random_token();
        self.codes.insert(digest(&code), (grant, now + CODE_TTL));
        code
    }

    /// Removes the code and returns its grant if it was still valid. A second
    /// presentation finds nothing.
    pub fn take_code(&mut self, code: &str, now: Instant) -> Option<CodeGrant> {
        let (grant, expires) = self.codes.remove(&digest(code))?;
        (now < expires).then_some(grant)
    }

    pub fn issue_refresh(&mut self, grant: RefreshGrant, now: Instant) -> String {
        self.sweep(now);
        let token = random_token();
        self.refresh
            .insert(digest(&token), (grant, now + REFRESH_TTL));
        token
    }

    /// Removes the refresh token (rotation: the caller issues a new one).
    pub fn take_refresh(&mut self, token: &str, now: Instant) -> Option<RefreshGrant> {
        let (grant, expires) = self.refresh.remove(&digest(token))?;
        (now < expires).then_some(grant)
    }

    fn sweep(&mut self, now: Instant) {
        self.codes.retain(|_, (_, expires)| now < *expires);
        self.refresh.retain(|_, (_, expires)| now < *expires);
    }
}

/// 256 random bits, base64url without padding.
pub fn random_token() -> String {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    URL_SAFE_NO_PAD.encode(raw)
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// RFC 7636 S256: `BASE64URL(SHA256(verifier)) == challenge`, compared in
/// constant time.
pub fn pkce_s256_matches(verifier: &str, challenge: &str) -> bool {
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    computed.as_bytes().ct_eq(challenge.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant() -> CodeGrant {
        CodeGrant {
            client_id: "client".into(),
            redirect_uri: "http://127.0.0.1:9/cb".into(),
            code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
            user: UserName::parse("alice").unwrap(),
            scope: "openid".into(),
            nonce: None,
            auth_time: 0,
        }
    }

    #[test]
    fn pkce_s256_matches_the_rfc_example_only() {
        // RFC 7636 Appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_s256_matches(verifier, challenge));
        assert!(!pkce_s256_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK",
            challenge
        ));
        assert!(!pkce_s256_matches(
            verifier,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN"
        ));
        // `plain` (verifier == challenge) must not pass.
        assert!(!pkce_s256_matches(challenge, challenge));
    }

    #[test]
    fn a_code_works_once() {
        let mut grants = Grants::default();
        let now = Instant::now();
        let code = grants.issue_code(grant(), now);
        assert_eq!(URL_SAFE_NO_PAD.decode(&code).unwrap().len(), 32);
        assert_eq!(grants.take_code(&code, now).unwrap().user.as_str(), "alice");
        assert!(grants.take_code(&code, now).is_none());
    }

    #[test]
    fn a_code_expires_after_sixty_seconds() {
        let mut grants = Grants::default();
        let now = Instant::now();
        let code = grants.issue_code(grant(), now);
        assert!(grants.take_code(&code, now + CODE_TTL).is_none());
        let code = grants.issue_code(grant(), now);
        assert!(
            grants
                .take_code(&code, now + CODE_TTL - Duration::from_secs(1))
                .is_some()
        );
    }

    #[test]
    fn unknown_codes_and_expired_entries_are_gone() {
        let mut grants = Grants::default();
        let now = Instant::now();
        assert!(grants.take_code("nope", now).is_none());
        let _old = grants.issue_code(grant(), now);
        let _new = grants.issue_code(grant(), now + CODE_TTL * 2);
        assert_eq!(
            grants.codes.len(),
            1,
            "the expired code should have been swept"
        );
    }

    #[test]
    fn refresh_tokens_rotate() {
        let mut grants = Grants::default();
        let now = Instant::now();
        let rg = RefreshGrant {
            client_id: "c".into(),
            user: UserName::parse("bob").unwrap(),
            scope: String::new(),
            auth_time: 0,
        };
        let token = grants.issue_refresh(rg.clone(), now);
        assert!(grants.take_refresh(&token, now).is_some());
        assert!(grants.take_refresh(&token, now).is_none());
        let token = grants.issue_refresh(rg, now);
        assert!(grants.take_refresh(&token, now + REFRESH_TTL).is_none());
    }
}
