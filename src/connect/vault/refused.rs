//! Refreshes the provider refused for good, remembered a minute per
//! connection in this instance: a provider refusing this server's client
//! (a wrong secret) or a grant in words no entry names would otherwise be
//! asked again on every call of every user of it, each logged, until
//! someone mends it. A connection whose tokens change is looked at afresh:
//! only a refresh of the same tokens is held back.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use uuid::Uuid;

/// How long a refusal stands before the provider is asked again.
const STANDS_FOR: Duration = Duration::from_secs(60);
/// Beyond this many connections remembered, refusals that stand no more
/// are forgotten.
const TIDY_ABOVE: usize = 1024;

/// What the provider answered, for the calls that come before it is asked
/// again.
/// A refresh the provider refused without saying the grant is dead: what
/// the calls are told while it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The provider's error, credential-free.
    pub reason: String,
    /// It refused this server's client (a wrong secret), which only the
    /// operator can mend; otherwise connecting again may.
    pub client_refused: bool,
}

struct Remembered {
    at: Instant,
    /// The sealed access token the refusal was for.
    access_token: Vec<u8>,
    refusal: Refusal,
}

#[derive(Default)]
pub struct RefusedRefreshes(Mutex<HashMap<Uuid, Remembered>>);

impl RefusedRefreshes {
    /// Notes that refreshing `connection`, whose sealed access token is
    /// `access_token`, was refused.
    pub(super) fn remember(&self, connection: Uuid, access_token: &[u8], refusal: Refusal) {
        self.remember_at(connection, access_token, refusal, Instant::now());
    }

    /// The refusal of the last minute for `connection`, if its access
    /// token is still the one refused.
    pub(super) fn standing(&self, connection: Uuid, access_token: &[u8]) -> Option<Refusal> {
        self.standing_at(connection, access_token, Instant::now())
    }

    fn remember_at(&self, connection: Uuid, access_token: &[u8], refusal: Refusal, now: Instant) {
        // A poisoned lock still holds consistent entries.
        let mut remembered = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if remembered.len() >= TIDY_ABOVE {
            remembered.retain(|_, r| now.duration_since(r.at) < STANDS_FOR);
        }
        remembered.insert(
            connection,
            Remembered {
                at: now,
                access_token: access_token.to_vec(),
                refusal,
            },
        );
    }

    fn standing_at(&self, connection: Uuid, access_token: &[u8], now: Instant) -> Option<Refusal> {
        let remembered = self.0.lock().unwrap_or_else(|p| p.into_inner());
        remembered
            .get(&connection)
            .filter(|r| now.duration_since(r.at) < STANDS_FOR && r.access_token == access_token)
            .map(|r| r.refusal.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_stands_a_minute_for_the_same_tokens() {
        let refused = RefusedRefreshes::default();
        let (id, t0) = (Uuid::new_v4(), Instant::now());
        let refusal = Refusal {
            reason: "invalid_client".into(),
            client_refused: true,
        };
        refused.remember_at(id, b"sealed-1", refusal.clone(), t0);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(refused.standing_at(id, b"sealed-1", later), Some(refusal));
        // New tokens (refreshed elsewhere, reconnected): asked afresh.
        assert_eq!(refused.standing_at(id, b"sealed-2", later), None);
        assert_eq!(
            refused.standing_at(Uuid::new_v4(), b"sealed-1", later),
            None
        );
        assert_eq!(refused.standing_at(id, b"sealed-1", t0 + STANDS_FOR), None);
    }
}
