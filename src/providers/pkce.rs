//! PKCE (RFC 7636) pairs for the authorize step. Always S256: `plain` would
//! put the verifier itself into the browser's address bar.

use oauth2::PkceCodeChallenge;
use secrecy::SecretString;

/// A fresh verifier and its S256 challenge. The challenge goes into
/// [`super::Provider::authorize_url`]; the verifier is kept server-side
/// (sealed) until [`super::Provider::exchange_code`].
#[derive(Debug)]
pub struct PkcePair {
    pub challenge: String,
    pub verifier: SecretString,
}

impl PkcePair {
    /// 32 random bytes, base64url: a 43-character verifier.
    pub fn generate() -> Self {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        Self {
            challenge: challenge.as_str().to_owned(),
            verifier: SecretString::from(verifier.into_secret()),
        }
    }

    /// The S256 challenge of a verifier.
    pub fn challenge_of(verifier: &str) -> String {
        let verifier = oauth2::PkceCodeVerifier::new(verifier.to_owned());
        PkceCodeChallenge::from_code_verifier_sha256(&verifier)
            .as_str()
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn pairs_are_fresh_and_match() {
        let a = PkcePair::generate();
        let b = PkcePair::generate();
        assert_ne!(a.verifier.expose_secret(), b.verifier.expose_secret());
        assert_eq!(a.verifier.expose_secret().len(), 43);
        assert_eq!(
            PkcePair::challenge_of(a.verifier.expose_secret()),
            a.challenge
        );
        // base64url(sha256(verifier)) computed independently (Python hashlib).
        assert_eq!(
            PkcePair::challenge_of("dBjftJeZ4CVP-mJ92K9qX-8Zq5sLHjvP7ZM7TjsVtsQ"),
            "f1ZR3DvjixCgWQjFd5Odf39KsFfaPmKkVL6L6e9tPjU"
        );
    }
}
