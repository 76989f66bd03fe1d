//! How many new connect links one user may be given per minute, in this
//! instance. Every link is a row in `connect_tickets` until it expires, and
//! any holder of a valid MCP token can ask for links as fast as it likes; a
//! person needs a handful. A fixed one-minute window per user, kept in
//! memory (a restart or another instance starts afresh: this bounds a
//! flood, it is not an account quota).

use crate::domain::UserRef;
use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

const WINDOW: Duration = Duration::from_secs(60);
/// Beyond this many users tracked, windows that ended are forgotten.
const TIDY_ABOVE: usize = 10_000;

pub struct LinkLimit {
    per_window: u32,
    windows: Mutex<HashMap<[u8; 16], Window>>,
}

struct Window {
    started: Instant,
    issued: u32,
}

impl LinkLimit {
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_window: per_minute,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a new link for the user; `Err(wait)` when the user has had
    /// their share for this minute, with how long until the next.
    pub fn take(&self, user: UserRef<'_>) -> Result<(), Duration> {
        self.take_at(user, Instant::now())
    }

    /// Gives back a link taken for a ticket that was not made after all
    /// (its connection deleted in between): the call asks for another.
    pub fn give_back(&self, user: UserRef<'_>) {
        let key = crate::crypto::parts_key(&[user.issuer(), user.subject()]);
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(window) = windows.get_mut(&key) {
            window.issued = window.issued.saturating_sub(1);
        }
    }

    fn take_at(&self, user: UserRef<'_>, now: Instant) -> Result<(), Duration> {
        // Fixed size, whatever the length of the names.
        let key = crate::crypto::parts_key(&[user.issuer(), user.subject()]);
        // A poisoned lock still holds consistent counts.
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() > TIDY_ABOVE {
            windows.retain(|_, w| now.duration_since(w.started) < WINDOW);
        }
        let window = windows.entry(key).or_insert(Window {
            started: now,
            issued: 0,
        });
        if now.duration_since(window.started) >= WINDOW {
            *window = Window {
                started: now,
                issued: 0,
            };
        }
        if window.issued >= self.per_window {
            return Err(WINDOW.saturating_sub(now.duration_since(window.started)));
        }
        window.issued += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_given_back_can_be_taken_again() {
        let limit = LinkLimit::new(1);
        let alice = UserRef::new("iss", "alice");
        let t0 = Instant::now();
        assert!(limit.take_at(alice, t0).is_ok());
        assert!(limit.take_at(alice, t0).is_err());
        limit.give_back(alice);
        assert!(limit.take_at(alice, t0).is_ok());
        // Nothing to give back for someone who took none.
        limit.give_back(UserRef::new("iss", "bob"));
        assert!(limit.take_at(UserRef::new("iss", "bob"), t0).is_ok());
    }

    #[test]
    fn a_user_gets_their_share_per_minute_and_others_are_unaffected() {
        let limit = LinkLimit::new(2);
        let t0 = Instant::now();
        assert!(limit.take_at(UserRef::new("iss", "alice"), t0).is_ok());
        assert!(limit.take_at(UserRef::new("iss", "alice"), t0).is_ok());
        let wait = limit
            .take_at(UserRef::new("iss", "alice"), t0 + Duration::from_secs(20))
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(40));
        // Another user, or the same name at another issuer, has their own.
        assert!(limit.take_at(UserRef::new("iss", "bob"), t0).is_ok());
        assert!(limit.take_at(UserRef::new("other", "alice"), t0).is_ok());
        // A minute later alice may ask again.
        assert!(
            limit
                .take_at(UserRef::new("iss", "alice"), t0 + WINDOW)
                .is_ok()
        );
    }

    #[test]
    fn ended_windows_are_forgotten_when_many_users_are_tracked() {
        let limit = LinkLimit::new(1);
        let t0 = Instant::now();
        for i in 0..=TIDY_ABOVE {
            assert!(
                limit
                    .take_at(UserRef::new("iss", &format!("user{i}")), t0)
                    .is_ok()
            );
        }
        assert!(
            limit
                .take_at(UserRef::new("iss", "late"), t0 + WINDOW)
                .is_ok()
        );
        let tracked = limit.windows.lock().map(|w| w.len()).unwrap_or(0);
        assert_eq!(tracked, 1);
    }
}
