//! [`AppState`]: the value the composition root (`startup`) builds and the
//! HTTP layer (`web`, `mcp`, `dev`) reads. Nothing below the HTTP layer
//! sees it: tools get the [`ConnectionService`] and the pieces they need.

use std::{net::IpAddr, sync::Arc};

use actix_web::{HttpRequest, dev::ResponseHead, http::ConnectionType};
use sqlx::PgPool;

use crate::{
    auth::TokenVerifier, config::Settings, connect::ConnectionService, crypto::KeyRing,
    metrics::Metrics, web::oidc::SignInProviderMetadata,
};

/// The composition root: what the HTTP handlers may use. Cheap to clone
/// (all `Arc`s). Only the HTTP layer (`web`, `mcp`, `auth`'s routes, `dev`)
/// sees it; everything below takes the narrow piece it needs.
#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    /// The web side's own tables (sessions, sign-in flows) and readiness.
    pub db: PgPool,
    pub keys: Arc<KeyRing>,
    pub verifier: Arc<TokenVerifier>,
    /// Outbound HTTP (issuer metadata, JWKS, providers). Never follows redirects.
    pub http: reqwest::Client,
    /// Every decision about a user's account.
    pub connect: Arc<ConnectionService>,
    /// The identity provider's metadata for starting web sign-ins.
    pub sign_in_metadata: Arc<SignInMetadata>,
    /// This instance's counters, read by `/metrics`.
    pub metrics: Arc<Metrics>,
}

impl AppState {
    /// Tells every waiting request that the server is stopping.
    pub fn begin_shutdown(&self) {
        self.connect.begin_shutdown();
    }

    /// The address of the client behind `req`: its peer, or, when the peer
    /// is one of the `trusted_proxies`, the client its `X-Forwarded-For`
    /// names (see [`crate::config::TrustedProxies`]).
    pub fn client_address(&self, req: &HttpRequest) -> Option<IpAddr> {
        let peer = req.peer_addr()?.ip();
        let trusted = &self.settings.trusted_proxies;
        if trusted.is_empty() {
            return Some(peer);
        }
        let lines = req
            .headers()
            .get_all(crate::config::FORWARDED_FOR)
            // A line that is not text is a hop that is not an address.
            .map(|v| v.to_str().unwrap_or("?"));
        Some(trusted.client_address(peer, lines))
    }

    /// While the server drains, every answer closes its connection: the
    /// listener is closed by then, so a client or proxy holding a
    /// kept-alive connection opens its next one to another instance
    /// instead of sending more requests here until the drain's deadline
    /// cuts them off.
    pub fn close_connection_if_stopping(&self, head: &mut ResponseHead) {
        if self.connect.is_stopping() {
            head.set_connection_type(ConnectionType::Close);
        }
    }
}

/// The identity provider's metadata as last discovered for starting a web
/// sign-in, and when. Failures are not kept: the next visitor tries again.
#[derive(Default)]
pub struct SignInMetadata {
    kept: tokio::sync::Mutex<Option<(std::time::Instant, SignInProviderMetadata)>>,
    /// Discovered at least once since start-up.
    reached: std::sync::atomic::AtomicBool,
    /// A readiness probe's discovery is under way. One at a time: probes
    /// come every few seconds, and an identity provider that hangs would
    /// otherwise collect a queue of them, each waiting for the lock.
    probing: std::sync::atomic::AtomicBool,
    /// Wakes the probes waiting for that discovery when it ends.
    probe_ended: tokio::sync::Notify,
}

impl SignInMetadata {
    /// Whether a discovery succeeded once since start-up.
    pub fn was_reached(&self) -> bool {
        self.reached.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Claims the readiness discovery; false while another is under way.
    pub fn start_probe(&self) -> bool {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        self.probing
            .compare_exchange(false, true, AcqRel, Acquire)
            .is_ok()
    }

    /// Ends the readiness discovery and wakes the probes waiting for it.
    pub fn end_probe(&self) {
        self.probing
            .store(false, std::sync::atomic::Ordering::Release);
        self.probe_ended.notify_waiters();
    }

    /// Resolves when the readiness discovery under way (or the next) ends.
    pub fn probe_ended(&self) -> tokio::sync::futures::Notified<'_> {
        self.probe_ended.notified()
    }

    /// The kept metadata while younger than `ttl`, else what `discover`
    /// finds (kept for next time). The lock is held across the discovery:
    /// a burst of visitors waits for one.
    pub async fn get_or_discover<E, F>(
        &self,
        ttl: std::time::Duration,
        discover: F,
    ) -> Result<SignInProviderMetadata, E>
    where
        F: Future<Output = Result<SignInProviderMetadata, E>>,
    {
        let mut kept = self.kept.lock().await;
        if let Some((at, metadata)) = kept.as_ref()
            && at.elapsed() < ttl
        {
            return Ok(metadata.clone());
        }
        let metadata = discover.await?;
        self.reached
            .store(true, std::sync::atomic::Ordering::Relaxed);
        *kept = Some((std::time::Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    /// What `discover` finds now (kept for next time), unless the kept
    /// metadata is younger than `min_age`: then `None`, and nobody is
    /// asked. For a signing key the kept JWKS lacks — the identity provider
    /// may have rotated its keys — without letting tokens that name
    /// made-up keys turn into a discovery each.
    pub async fn rediscover<E, F>(
        &self,
        min_age: std::time::Duration,
        discover: F,
    ) -> Result<Option<SignInProviderMetadata>, E>
    where
        F: Future<Output = Result<SignInProviderMetadata, E>>,
    {
        let mut kept = self.kept.lock().await;
        if let Some((at, _)) = kept.as_ref()
            && at.elapsed() < min_age
        {
            return Ok(None);
        }
        let metadata = discover.await?;
        self.reached
            .store(true, std::sync::atomic::Ordering::Relaxed);
        *kept = Some((std::time::Instant::now(), metadata.clone()));
        Ok(Some(metadata))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn metadata() -> SignInProviderMetadata {
        serde_json::from_value(crate::web::oidc::least_discovery_document()).unwrap()
    }

    #[tokio::test]
    async fn an_unknown_key_discovers_again_only_after_the_interval() {
        let kept = SignInMetadata::default();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let discover = || async {
            asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, ()>(metadata())
        };
        kept.get_or_discover(Duration::from_secs(300), discover())
            .await
            .unwrap();
        let soon = kept.rediscover(Duration::from_secs(30), discover()).await;
        assert!(matches!(soon, Ok(None)), "too soon: nobody is asked");
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        let due = kept.rediscover(Duration::ZERO, discover()).await;
        assert!(matches!(due, Ok(Some(_))));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
