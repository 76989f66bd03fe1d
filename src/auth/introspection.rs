//! RFC 7662 token introspection, for opaque (non-JWT) access tokens: ask the
//! authorization server whether the token is active and whose it is. Positive
//! answers are cached briefly (never past the token's `exp`), refusals more
//! briefly still (a refused token is never accepted later, and a client
//! retrying one in a loop must not cost the server a request each time),
//! keyed by the token's SHA-256 so the cache holds no token. At most
//! [`MAX_IN_FLIGHT`] questions are in flight at once: a flood of made-up
//! tokens waits here instead of landing on the authorization server.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use reqwest::header::ACCEPT;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;
use sha2::{Digest, Sha256};
use url::{Url, form_urlencoded::byte_serialize};

use super::{
    AuthError, Principal,
    claims::{self, Claims, Expected},
    fetch,
};
use crate::config::IntrospectionSettings;

/// Longest time a positive answer is reused.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// Longest time a refusal is reused: short, as an authorization server
/// that answers from replicas may not know a token issued a moment ago.
const REFUSED_TTL: Duration = Duration::from_secs(5);
/// Most answers kept; past this, new answers are simply not cached.
const CACHE_MAX_ENTRIES: usize = 10_000;
/// Most refusals kept, apart from the answers: made-up tokens must not
/// crowd real ones out of the cache.
const REFUSED_MAX_ENTRIES: usize = 1_000;
/// Most introspection requests in flight at once.
pub(crate) const MAX_IN_FLIGHT: usize = 32;

struct Cached {
    principal: Principal,
    until: Instant,
}

pub(crate) struct Introspector {
    http: reqwest::Client,
    url: Url,
    client_id: String,
    client_secret: SecretString,
    cache: Mutex<HashMap<[u8; 32], Cached>>,
    refused: Mutex<HashMap<[u8; 32], Instant>>,
    in_flight: tokio::sync::Semaphore,
}

impl Introspector {
    pub(crate) fn new(settings: &IntrospectionSettings, http: reqwest::Client) -> Self {
        Self {
            http,
            url: settings.url.clone(),
            client_id: settings.client_id.clone(),
            client_secret: settings.client_secret.clone(),
            cache: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        }
    }

    pub(crate) async fn introspect(
        &self,
        token: &str,
        expected: &Expected,
    ) -> Result<Principal, AuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(principal) = self.cached(&key) {
            return Ok(principal);
        }
        if self.recently_refused(&key) {
            return Err(AuthError::Inactive);
        }
        // A turn among the questions in flight, within the time one
        // question may take: a queue of made-up tokens must not hold a
        // real one longer than that.
        let _permit = tokio::time::timeout(fetch::TIMEOUT, self.in_flight.acquire())
            .await
            .map_err(|_| {
                AuthError::IntrospectionFailed("too many introspections waiting".into())
            })?;
        let answer = self.ask(token, expected).await;
        match &answer {
            Ok((principal, ttl)) => self.remember(key, principal, *ttl),
            // Unreachable or failing: nothing learnt about the token.
            Err(e) if e.is_unavailable() => {}
            Err(_) => self.remember_refused(key),
        }
        answer.map(|(principal, _)| principal)
    }

    fn recently_refused(&self, key: &[u8; 32]) -> bool {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        refused
            .get(key)
            .is_some_and(|until| *until > Instant::now())
    }

    fn remember_refused(&self, key: [u8; 32]) {
        let now = Instant::now();
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if refused.len() >= REFUSED_MAX_ENTRIES {
            refused.retain(|_, until| *until > now);
        }
        if refused.len() < REFUSED_MAX_ENTRIES {
            refused.insert(key, now + REFUSED_TTL);
        }
    }

    /// The server's answer, checked, and how long it may be reused.
    async fn ask(
        &self,
        token: &str,
        expected: &Expected,
    ) -> Result<(Principal, Duration), AuthError> {
        // RFC 6749 §2.3.1: the Basic credentials are form-encoded first.
        let user: String = byte_serialize(self.client_id.as_bytes()).collect();
        let password: String =
            byte_serialize(self.client_secret.expose_secret().as_bytes()).collect();
        let response = self
            .http
            .post(self.url.clone())
            .header(ACCEPT, "application/json")
            .timeout(fetch::TIMEOUT)
            .basic_auth(user, Some(password))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .map_err(|e| AuthError::IntrospectionFailed(e.without_url().to_string()))?;
        let answer: Claims = fetch::read_json(response)
            .await
            .map_err(|e| AuthError::IntrospectionFailed(e.to_string()))?;

        if answer.get("active") != Some(&Value::Bool(true)) {
            return Err(AuthError::Inactive);
        }
        let now = unix_now();
        let exp = claims::check_lifetime(&answer, now, expected.leeway_secs, false)?;
        // A token without an audience could have been issued to any service
        // of this authorization server; only one issued for us is accepted.
        match answer.get("aud").filter(|v| !v.is_null()) {
            Some(aud) if claims::audience_contains(aud, &expected.audience)? => {}
            _ => return Err(AuthError::WrongAudience),
        }
        let principal = claims::principal(&answer, expected, true)?;

        let ttl = match exp {
            Some(exp) => CACHE_TTL.min(Duration::from_secs(exp.saturating_sub(now))),
            None => CACHE_TTL,
        };
        Ok((principal, ttl))
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Principal> {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cache
            .get(key)
            .filter(|c| c.until > Instant::now())
            .map(|c| c.principal.clone())
    }

    fn remember(&self, key: [u8; 32], principal: &Principal, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if cache.len() >= CACHE_MAX_ENTRIES {
            cache.retain(|_, c| c.until > now);
        }
        if cache.len() < CACHE_MAX_ENTRIES {
            cache.insert(
                key,
                Cached {
                    principal: principal.clone(),
                    until: now + ttl,
                },
            );
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_support::{Idp, now};
    use serde_json::json;

    fn introspector(idp: &Idp) -> (Introspector, Expected) {
        let settings = IntrospectionSettings {
            url: idp.url("/introspect"),
            client_id: "rs client".into(),
            client_secret: SecretString::from("s3cret:+"),
        };
        let http = crate::providers::outbound_http_client().unwrap();
        (Introspector::new(&settings, http), idp.expected())
    }

    #[actix_web::test]
    async fn active_token_yields_the_principal_and_is_cached() {
        let idp = Idp::start().await;
        idp.set_introspection(
            "opaque-1",
            json!({"active": true, "sub": "alice", "client_id": "c1", "scope": "read write",
                   "aud": ["x", idp.audience()], "exp": now() + 300}),
        );
        let (introspector, expected) = introspector(&idp);
        let p = introspector
            .introspect("opaque-1", &expected)
            .await
            .unwrap();
        assert_eq!(p.issuer, idp.issuer());
        assert_eq!((p.subject.as_str(), p.client_id.as_str()), ("alice", "c1"));
        assert_eq!(p.scopes, vec!["read", "write"]);
        assert_eq!(
            introspector
                .introspect("opaque-1", &expected)
                .await
                .unwrap(),
            p
        );
        assert_eq!(
            idp.introspections(),
            1,
            "the second answer comes from the cache"
        );
    }

    #[actix_web::test]
    async fn inactive_unknown_and_foreign_tokens_are_rejected() {
        let idp = Idp::start().await;
        idp.set_introspection(
            "off",
            json!({"active": false, "sub": "alice", "client_id": "c1"}),
        );
        idp.set_introspection(
            "other-aud",
            json!({"active": true, "sub": "a", "client_id": "c", "aud": "https://else"}),
        );
        idp.set_introspection(
            "other-iss",
            json!({"active": true, "sub": "a", "client_id": "c", "iss": "https://else", "aud": idp.audience()}),
        );
        idp.set_introspection(
            "expired",
            json!({"active": true, "sub": "a", "client_id": "c", "exp": now() - 100, "aud": idp.audience()}),
        );
        // Active, but not said to be for us: could be any service's token.
        idp.set_introspection(
            "no-aud",
            json!({"active": true, "sub": "a", "client_id": "c"}),
        );
        let (introspector, expected) = introspector(&idp);
        let err = async |t: &str| introspector.introspect(t, &expected).await.unwrap_err();
        assert!(matches!(err("off").await, AuthError::Inactive));
        assert!(matches!(err("never-issued").await, AuthError::Inactive));
        assert!(matches!(err("other-aud").await, AuthError::WrongAudience));
        assert!(matches!(err("other-iss").await, AuthError::WrongIssuer));
        assert!(matches!(err("expired").await, AuthError::Expired));
        assert!(matches!(err("no-aud").await, AuthError::WrongAudience));
        assert_eq!(idp.introspections(), 6);
        // Asked again: refused from the cache, without a request.
        for token in ["off", "never-issued", "other-aud", "expired"] {
            assert!(matches!(err(token).await, AuthError::Inactive), "{token}");
        }
        assert_eq!(idp.introspections(), 6, "refusals are remembered");
    }

    /// A flood of made-up tokens reaches the authorization server at most
    /// `MAX_IN_FLIGHT` at a time; the rest wait their turn and are answered.
    #[actix_web::test]
    async fn at_most_so_many_introspections_are_in_flight() {
        let idp = Idp::start().await;
        idp.slow_introspection(Duration::from_millis(150));
        let (introspector, expected) = introspector(&idp);
        let tokens: Vec<String> = (0..3 * MAX_IN_FLIGHT)
            .map(|i| format!("made-up-{i}"))
            .collect();
        let answers = futures::future::join_all(
            tokens
                .iter()
                .map(|token| introspector.introspect(token, &expected)),
        )
        .await;
        for answer in answers {
            assert!(matches!(answer, Err(AuthError::Inactive)), "{answer:?}");
        }
        assert_eq!(idp.introspections(), 3 * MAX_IN_FLIGHT);
        let most = idp.most_introspections_at_once();
        assert!(most <= MAX_IN_FLIGHT, "{most} at once");
        assert!(
            most > MAX_IN_FLIGHT / 2,
            "they did run side by side: {most}"
        );
    }

    #[actix_web::test]
    async fn wrong_client_credentials_are_an_introspection_failure() {
        let idp = Idp::start().await;
        let settings = IntrospectionSettings {
            url: idp.url("/introspect"),
            client_id: "rs client".into(),
            client_secret: SecretString::from("wrong"),
        };
        let introspector =
            Introspector::new(&settings, crate::providers::outbound_http_client().unwrap());
        let err = introspector
            .introspect("opaque-1", &idp.expected())
            .await
            .unwrap_err();
        assert!(matches!(err, AuthError::IntrospectionFailed(_)), "{err}");
        assert!(err.is_unavailable());
    }
}
