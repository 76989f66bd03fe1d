//! The state of a sign-in in progress (OIDC `state`, nonce, PKCE verifier,
//! where to go afterwards, the connect link to come back to), kept in the
//! browser that started it: a sealed, short-lived `__Host-` cookie rather
//! than a row, so an anonymous `GET /login` or `/connect?ticket=…` writes
//! nothing to the database.
//!
//! Sealed with the key ring's cookie purpose: the browser can neither read
//! nor alter it. The callback's `state` must equal the sealed one, so a
//! sign-in finishes only in the browser holding the cookie; the code it
//! carries is single-use at the identity provider.

use chrono::Utc;
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::crypto::{KeyRing, Purpose};

/// Associated data of the sealed value: this cookie and nothing else.
const CONTEXT: &[u8] = b"login-state";
/// Longer than any value this module seals; anything longer is not opened.
pub const MAX_SEALED_LEN: usize = 1024;

#[derive(Debug, Serialize, Deserialize)]
pub struct LoginState {
    /// The OIDC `state` sent to the identity provider.
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    /// A plain local path (`login::safe_return_to`).
    pub return_to: String,
    /// The connect link to resume after signing in.
    pub ticket_id: Option<Uuid>,
    /// Unix seconds after which the sign-in is refused.
    pub expires: i64,
}

impl LoginState {
    /// Fails if the cipher does, or (a bug) if the state does not serialize:
    /// never seals an empty state.
    pub fn seal(&self, keys: &KeyRing) -> anyhow::Result<String> {
        let plain = serde_json::to_vec(self)?;
        Ok(keys.seal_to_string(Purpose::Cookie, CONTEXT, &plain)?)
    }

    /// The state sealed in `sealed`, when it opens and is well formed.
    pub fn open(keys: &KeyRing, sealed: &str) -> Option<Self> {
        if sealed.len() > MAX_SEALED_LEN {
            return None;
        }
        let plain = keys.open_string(Purpose::Cookie, CONTEXT, sealed).ok()?;
        serde_json::from_slice(&plain).ok()
    }

    /// Whether the callback's `state` is the one sealed here.
    pub fn matches(&self, presented: &str) -> bool {
        bool::from(self.state.as_bytes().ct_eq(presented.as_bytes()))
    }

    pub fn expired(&self) -> bool {
        self.expires <= Utc::now().timestamp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> KeyRing {
        KeyRing::from_entries(["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]).unwrap()
    }

    #[test]
    fn a_sealed_state_opens_only_unaltered_and_matches_only_its_state() {
        let s = LoginState {
            state: "abc".into(),
            nonce: "n".into(),
            verifier: "v".into(),
            return_to: "/connections".into(),
            ticket_id: None,
            expires: Utc::now().timestamp() + 60,
        };
        let sealed = s.seal(&keys()).unwrap();
        assert!(!sealed.contains("abc") && sealed.len() < MAX_SEALED_LEN);
        let opened = LoginState::open(&keys(), &sealed).unwrap();
        assert!(opened.matches("abc") && !opened.matches("abd") && !opened.expired());
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(LoginState::open(&keys(), &String::from_utf8(altered).unwrap()).is_none());
        // Another purpose's sealed value is not a login state.
        let other = keys()
            .seal_to_string(Purpose::RequestState, CONTEXT, b"{}")
            .unwrap();
        assert!(LoginState::open(&keys(), &other).is_none());
    }
}
