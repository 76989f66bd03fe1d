//! "A connection was stored": Postgres `NOTIFY` from whichever instance
//! handled the OAuth callback, `LISTEN` on every instance, so a retry that
//! waits for the user is woken at once wherever it runs.
//!
//! The payload is a digest of (issuer, subject, provider), not the names
//! themselves: anyone who can LISTEN on the database learns nothing.

use crate::domain::UserRef;
use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use sqlx::{PgExecutor, PgPool, postgres::PgListener};
use tokio::sync::broadcast;

use crate::db;

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

    /// Starts listening in the background. The task ends when `events` is
    /// dropped (the application stopped).
    pub fn listen(events: &Arc<Self>, pool: PgPool) {
        tokio::spawn(listen(pool, Arc::downgrade(events)));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.sender.subscribe()
    }
}

/// The event key for one user's connection to one provider.
pub fn key(user: UserRef<'_>, provider: &str) -> String {
    crate::crypto::hex(&crate::crypto::parts_key(&[
        user.issuer(),
        user.subject(),
        provider,
    ]))
}

/// Announces a stored connection; inside a transaction it is delivered at commit.
pub async fn notify(exec: impl PgExecutor<'_>, key: &str) -> Result<(), sqlx::Error> {
    db::notifications::notify(exec, key).await
}

async fn listen(pool: PgPool, events: Weak<ConnectionEvents>) {
    let mut backoff = Duration::from_millis(250);
    loop {
        if events.strong_count() == 0 {
            return;
        }
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "connection events: cannot connect; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        if let Err(e) = db::notifications::listen(&mut listener).await {
            tracing::warn!(error = %e, "connection events: cannot LISTEN; retrying");
            tokio::time::sleep(backoff).await;
            continue;
        }
        backoff = Duration::from_millis(250);
        loop {
            // Wake up now and then to notice that the application is gone.
            match tokio::time::timeout(Duration::from_secs(5), listener.try_recv()).await {
                Err(_) => {
                    if events.strong_count() == 0 {
                        return;
                    }
                }
                Ok(Ok(Some(notification))) => {
                    let Some(events) = events.upgrade() else {
                        return;
                    };
                    // No receiver waiting is normal.
                    let _ = events.sender.send(notification.payload().to_owned());
                }
                Ok(Ok(None)) => {
                    tracing::info!("connection events: connection lost; reconnecting");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_their_parts() {
        assert_eq!(
            key(UserRef::new("i", "s"), "p"),
            key(UserRef::new("i", "s"), "p")
        );
        assert_ne!(
            key(UserRef::new("i", "sp"), ""),
            key(UserRef::new("i", "s"), "p")
        );
        assert_eq!(key(UserRef::new("i", "s"), "p").len(), 32);
    }
}
