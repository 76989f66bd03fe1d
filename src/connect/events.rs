//! "A connection was stored": Postgres `NOTIFY` from whichever instance
//! handled the OAuth callback, `LISTEN` on every instance, so a retry that
//! waits for the user is woken at once wherever it runs.
//!
//! The payload names (issuer, subject, provider) by a keyed tag per key of
//! the sender's ring ([`crate::crypto::KeyRing::name_tags`]), comma
//! separated: any role that can connect to the database can LISTEN, and an
//! unkeyed digest of a known issuer, a provider and a guessable subject (an
//! e-mail address) would tell it who just connected what. Instances share
//! at least one key, also in the middle of a rotation, so a waiter matches
//! the sender's tag for that key.
//!
//! Notifications sent while the listening connection is down are lost.
//! When it comes back, every waiter is told to look again ([`RECHECK`]).
//! A connection can also die without a word (a NAT or load balancer that
//! dropped an idle mapping, a failover without a reset): an idle listener
//! asks its connection a trivial question now and then, and one that gets
//! no answer in time is replaced.

use crate::domain::UserRef;
use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use sqlx::{PgExecutor, PgPool, postgres::PgListener};
use tokio::sync::broadcast;

use crate::{crypto::KeyRing, db};

/// The wake-up that tells every waiter to look again: notifications may
/// have been missed. (A tag is 32 hex digits; this is none.)
pub const RECHECK: &str = "*";

/// An idle listener checks its connection after this long.
const PING_WHEN_IDLE: Duration = Duration::from_secs(15);
/// How long the check may take before the connection counts as dead.
const PING_DEADLINE: Duration = Duration::from_secs(5);
/// How often the listener looks up from its wait (to notice that the
/// application is gone, and to count idle time).
const TICK: Duration = Duration::from_secs(5);

pub struct ConnectionEvents {
    sender: broadcast::Sender<String>,
}

impl Default for ConnectionEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectionEvents {
    /// Wake-ups for this instance only, until [`Self::listen`] is called.
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(256);
        Self { sender }
    }

    /// Starts listening in the background, on a connection of a pool that
    /// `connect` makes each time it listens (anew after a lost
    /// connection). The task ends when `events` is dropped (the
    /// application stopped).
    pub fn listen(events: &Arc<Self>, connect: impl Fn() -> PgPool + Send + 'static) {
        tokio::spawn(listen(connect, Arc::downgrade(events)));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.sender.subscribe()
    }
}

/// The tags naming one user's connection to one provider, one per key of
/// `keys`.
pub fn tags(keys: &KeyRing, user: UserRef<'_>, provider: &str) -> Vec<String> {
    keys.name_tags(&[user.issuer(), user.subject(), provider])
}

/// Whether a notification's payload names what `tags` name (or asks every
/// waiter to look again).
pub fn names(payload: &str, tags: &[String]) -> bool {
    payload == RECHECK
        || payload
            .split(',')
            .any(|sent| tags.iter().any(|t| t == sent))
}

/// Announces a stored connection of `user` to `provider`; inside a
/// transaction it is delivered at commit.
pub async fn notify(
    exec: impl PgExecutor<'_>,
    keys: &KeyRing,
    user: UserRef<'_>,
    provider: &str,
) -> Result<(), sqlx::Error> {
    db::notifications::notify(exec, &tags(keys, user, provider).join(",")).await
}

async fn listen(connect: impl Fn() -> PgPool, events: Weak<ConnectionEvents>) {
    let mut backoff = Duration::from_millis(250);
    let mut listened_before = false;
    loop {
        if events.strong_count() == 0 {
            return;
        }
        let mut listener = match PgListener::connect_with(&connect()).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "connection events: cannot connect; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        // Within a deadline: a database frozen, or a path to it gone
        // black, would otherwise hold this instance's wake-ups until the
        // kernel gives up on the connection.
        let listened =
            tokio::time::timeout(PING_DEADLINE, db::notifications::listen(&mut listener));
        let failed = match listened.await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("no answer in time".to_owned()),
        };
        if let Some(error) = failed {
            tracing::warn!(error, "connection events: cannot LISTEN; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(10));
            continue;
        }
        backoff = Duration::from_millis(250);
        if listened_before {
            tracing::info!("connection events: listening again");
            announce(&events, RECHECK);
        }
        listened_before = true;
        let mut idle = Duration::ZERO;
        loop {
            match tokio::time::timeout(TICK, listener.try_recv()).await {
                Err(_) => {
                    if events.strong_count() == 0 {
                        return;
                    }
                    idle += TICK;
                    if idle >= PING_WHEN_IDLE {
                        idle = Duration::ZERO;
                        if !answers(&mut listener).await {
                            tracing::warn!(
                                "connection events: the listening connection does not answer; replacing it"
                            );
                            break;
                        }
                    }
                }
                Ok(Ok(Some(notification))) => {
                    idle = Duration::ZERO;
                    announce(&events, notification.payload());
                }
                // The connection was lost. sqlx would connect and listen
                // again only at the next `try_recv`, so the waiters' recheck
                // would come before that LISTEN, and a notification sent in
                // between would be lost to them: start afresh instead,
                // which listens first and then tells them to look again.
                Ok(Ok(None)) => {
                    tracing::info!("connection events: connection lost; listening again");
                    break;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "connection events: listener failed; reconnecting");
                    break;
                }
            }
        }
    }
}

/// Wakes this instance's waiters with `payload`.
fn announce(events: &Weak<ConnectionEvents>, payload: &str) {
    if let Some(events) = events.upgrade() {
        // No receiver waiting is normal.
        let _ = events.sender.send(payload.to_owned());
    }
}

/// Whether the listening connection answers a trivial query in time.
async fn answers(listener: &mut PgListener) -> bool {
    let ping = db::notifications::ping(listener);
    matches!(tokio::time::timeout(PING_DEADLINE, ping).await, Ok(Ok(())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_names_the_tags_of_a_shared_key() {
        let a = KeyRing::generate_entry("a");
        let b = KeyRing::generate_entry("b");
        let ring = |entries: &[&str]| KeyRing::from_entries(entries.iter().copied()).unwrap();
        let alice = UserRef::new("https://idp.example", "alice");
        // Sent by an instance that already seals with `b`, heard by one
        // that still has only `a` first: the tag for `a` matches.
        let sent = tags(&ring(&[&b, &a]), alice, "github").join(",");
        assert!(names(&sent, &tags(&ring(&[&a, &b]), alice, "github")));
        assert!(names(&sent, &tags(&ring(&[&a]), alice, "github")));
        assert!(!names(&sent, &tags(&ring(&[&a]), alice, "google")));
        let bob = UserRef::new("https://idp.example", "bob");
        assert!(!names(&sent, &tags(&ring(&[&a]), bob, "github")));
        // A ring with none of the sender's keys hears nothing it can place.
        let c = KeyRing::generate_entry("c");
        assert!(!names(&sent, &tags(&ring(&[&c]), alice, "github")));
        assert!(names(RECHECK, &tags(&ring(&[&c]), alice, "github")));
    }
}
