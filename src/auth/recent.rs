//! Tokens verified recently. An agent sends the same bearer token with every
//! step, and checking a signature (≈0.1 ms for Ed25519 here) is the largest
//! cost of a request that touches nothing else. A token already verified is
//! accepted again until its `exp` or for five minutes, whichever comes
//! first — keyed by the token's SHA-256, never the token itself.
//!
//! Each worker thread keeps its own (`crate::shards`): a lock and a
//! principal's reference count that both workers wrote would move between
//! their cores on every request. A token is then verified once per worker
//! that sees it rather than once per instance.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use sha2::{Digest, Sha256};

use super::Principal;
use crate::shards::Sharded;

/// How long a verification is reused at most. A key removed from the
/// issuer's JWKS stops working within this time after the keys are next
/// reloaded (`auth::keys`: every 15 minutes; keys the issuer has not
/// confirmed for an hour verify nothing).
const REUSE_FOR: Duration = Duration::from_secs(300);
/// Entries a thread keeps at most; beyond that its cache starts over.
const CAPACITY: usize = 5_000;

/// A verified token's principal, and until when it may be reused.
type Entry = (Arc<Principal>, Instant);

#[derive(Default)]
pub struct RecentTokens {
    /// Keyed by the token's SHA-256; a thread's own, see above.
    entries: Sharded<Mutex<HashMap<[u8; 32], Entry>>>,
}

pub fn key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl RecentTokens {
    /// The principal of a token verified recently: shared, not copied (a
    /// request needs only to read it).
    pub fn get(&self, key: &[u8; 32]) -> Option<Arc<Principal>> {
        let entries = self
            .entries
            .local()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (principal, until) = entries.get(key)?;
        (Instant::now() < *until).then(|| Arc::clone(principal))
    }

    /// Remembers a verified token that expires in `expires_in`.
    pub fn put(&self, key: [u8; 32], principal: Arc<Principal>, expires_in: Duration) {
        let until = Instant::now() + expires_in.min(REUSE_FOR);
        let mut entries = self
            .entries
            .local()
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if entries.len() >= CAPACITY {
            let now = Instant::now();
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (principal, until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> Principal {
        Principal {
            issuer: "i".into(),
            subject: "s".into(),
            client_id: "c".into(),
            scopes: vec![],
        }
    }

    #[test]
    fn reuse_ends_at_expiry() {
        let recent = RecentTokens::default();
        recent.put(key("a"), Arc::new(p()), Duration::from_secs(60));
        assert_eq!(recent.get(&key("a")).as_deref(), Some(&p()));
        assert_eq!(recent.get(&key("b")), None);
        recent.put(key("gone"), Arc::new(p()), Duration::ZERO);
        assert_eq!(recent.get(&key("gone")), None);
    }
}
