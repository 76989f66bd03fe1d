//! The issuer's signing keys: where the JWKS lives (configured, or found by
//! discovery), the cached keys, and the refetch on an unknown `kid`.
//!
//! Nothing is fetched until the first token arrives: the issuer may be this
//! very server (dev mode), which is not listening yet when the verifier is
//! built. Fetches are single-flight — concurrent verifications wait for one
//! fetch and share its result — and refetches for unknown `kid`s happen at
//! most once per [`REFETCH_INTERVAL`], so random `kid`s cannot turn this
//! server into a load generator against the issuer.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use jsonwebtoken::{Algorithm, DecodingKey, jwk::Jwk};
use serde::Deserialize;
use tokio::sync::{Mutex, RwLock};
use url::Url;

use super::{AuthError, discovery, fetch, jwt};

/// Least time between two refetches caused by unknown `kid`s.
pub(crate) const REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// Keys older than this are reloaded, so a key the issuer withdrew stops
/// verifying without a restart.
const MAX_AGE: Duration = Duration::from_secs(15 * 60);
/// Keys the issuer could not be asked about for this long verify nothing:
/// while its JWKS is unreachable, a key it withdrew (one that leaked, say)
/// would otherwise verify for ever. Requests are refused as unavailable
/// (503) until a load succeeds.
const MAX_STALE: Duration = Duration::from_secs(60 * 60);
/// After a failed load, wait this long before trying again.
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);

struct Key {
    kid: Option<String>,
    /// `None`: a key in the set that fits none of the accepted algorithms.
    usable: Option<(Algorithm, DecodingKey)>,
}

#[derive(Default)]
struct Cache {
    /// The discovered JWKS URL (the configured one is not cached here).
    jwks_uri: Option<Url>,
    keys: Arc<Vec<Key>>,
    loaded_at: Option<Instant>,
    refetched_at: Option<Instant>,
    failed_at: Option<Instant>,
    /// Completed fetch attempts; a waiter that sees it change knows another
    /// task already fetched and does not fetch again.
    attempts: u64,
}

impl Cache {
    /// Whether keys were loaded, recently enough to verify with
    /// (`max_stale`: [`MAX_STALE`]).
    fn has_keys(&self, max_stale: Duration) -> bool {
        self.loaded_at.is_some_and(|t| t.elapsed() < max_stale)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// Nothing loaded yet, or the keys are older than [`MAX_AGE`].
    Load,
    UnknownKid,
}

enum Lookup {
    Found(DecodingKey),
    /// The `kid` exists but its key does not fit the header's algorithm.
    Mismatch,
    /// Several keys fit a token without a `kid`.
    Ambiguous,
    NotFound,
}

pub(crate) struct KeySource {
    http: reqwest::Client,
    issuer: Url,
    jwks_url: Option<Url>,
    cache: RwLock<Cache>,
    /// Held while the JWKS is fetched: one fetch at a time.
    fetching: Arc<Mutex<()>>,
    ages: Ages,
}

/// When keys are reloaded, and when they verify nothing any more: the
/// constants, shorter in tests (an `Instant` cannot go back before the
/// machine started).
struct Ages {
    max_age: Duration,
    max_stale: Duration,
}

impl KeySource {
    pub(crate) fn new(http: reqwest::Client, issuer: Url, jwks_url: Option<Url>) -> Self {
        Self {
            http,
            issuer,
            jwks_url,
            cache: RwLock::new(Cache::default()),
            fetching: Arc::new(Mutex::new(())),
            ages: Ages {
                max_age: MAX_AGE,
                max_stale: MAX_STALE,
            },
        }
    }

    /// The key that verifies a token with this header.
    pub(crate) async fn key_for(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, AuthError> {
        let (attempts, keys, loaded, stale) = {
            let cache = self.cache.read().await;
            let fresh = cache
                .loaded_at
                .is_some_and(|t| t.elapsed() < self.ages.max_age);
            let loaded = cache.has_keys(self.ages.max_stale);
            (cache.attempts, cache.keys.clone(), loaded, !fresh)
        };
        let why = if stale {
            Why::Load
        } else {
            match lookup(&keys, kid, alg) {
                Lookup::NotFound => Why::UnknownKid,
                found => return into_result(found, kid),
            }
        };
        // Old keys that still name this one: a reload is due, but no
        // request waits for it (an issuer that hangs would hold it for
        // its timeout); it runs beside them, and they verify with what
        // they have.
        if stale
            && loaded
            && let Lookup::Found(key) = lookup(&keys, kid, alg)
        {
            // One reload at a time: a request that finds one under way
            // starts none.
            if let Ok(single_flight) = Arc::clone(&self.fetching).try_lock_owned() {
                let source = Arc::clone(self);
                tokio::spawn(async move {
                    // Its outcome is the cache's (and the log's).
                    let _ = source
                        .refresh_holding(single_flight, attempts, Why::Load)
                        .await;
                });
            }
            return Ok(key);
        }
        let single_flight = Arc::clone(&self.fetching).lock_owned().await;
        let keys = self.refresh_holding(single_flight, attempts, why).await?;
        into_result(lookup(&keys, kid, alg), kid)
    }

    /// Fetches the JWKS, holding the single flight, unless another task
    /// did since `seen_attempts` or the rate limits say not now; returns
    /// the keys to use either way.
    async fn refresh_holding(
        &self,
        _single_flight: tokio::sync::OwnedMutexGuard<()>,
        seen_attempts: u64,
        why: Why,
    ) -> Result<Arc<Vec<Key>>, AuthError> {
        let cached_uri = {
            let cache = self.cache.read().await;
            let have_keys = cache.has_keys(self.ages.max_stale);
            let current = || {
                if have_keys {
                    Ok(cache.keys.clone())
                } else {
                    Err(AuthError::KeysUnavailable(
                        "the last attempt to load the JWKS failed".into(),
                    ))
                }
            };
            if cache.attempts != seen_attempts {
                return current();
            }
            let recently = |t: Option<Instant>, d: Duration| t.is_some_and(|t| t.elapsed() < d);
            if why == Why::UnknownKid && recently(cache.refetched_at, REFETCH_INTERVAL) {
                return current();
            }
            if recently(cache.failed_at, FAILURE_BACKOFF) {
                return current();
            }
            cache.jwks_uri.clone()
        };

        let result = self.fetch(cached_uri).await;
        let now = Instant::now();
        let mut cache = self.cache.write().await;
        cache.attempts += 1;
        if why == Why::UnknownKid {
            cache.refetched_at = Some(now);
        }
        match result {
            Ok((uri, keys)) => {
                tracing::debug!(jwks = %uri, keys = keys.len(), "loaded the issuer's signing keys");
                cache.jwks_uri = self.jwks_url.is_none().then_some(uri);
                cache.keys = Arc::new(keys);
                cache.loaded_at = Some(now);
                cache.failed_at = None;
                Ok(cache.keys.clone())
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, error = %e, "cannot load the issuer's signing keys");
                cache.failed_at = Some(now);
                cache.jwks_uri = None;
                // Stale keys beat none while the issuer is unreachable,
                // for a while.
                if cache.has_keys(self.ages.max_stale) {
                    Ok(cache.keys.clone())
                } else {
                    Err(e)
                }
            }
        }
    }

    async fn fetch(&self, cached_uri: Option<Url>) -> Result<(Url, Vec<Key>), AuthError> {
        let uri = match (&self.jwks_url, cached_uri) {
            (Some(configured), _) => configured.clone(),
            (None, Some(discovered)) => discovered,
            (None, None) => discovery::jwks_uri(&self.http, &self.issuer).await?,
        };
        let set: RawJwks = fetch::get_json(&self.http, &uri)
            .await
            .map_err(|e| AuthError::KeysUnavailable(format!("JWKS {uri}: {e}")))?;
        Ok((uri, set.keys.into_iter().filter_map(parse_key).collect()))
    }
}

/// Keys parsed one by one: one odd entry must not hide the others.
#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<serde_json::Value>,
}

fn parse_key(value: serde_json::Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(value).ok()?;
    Some(Key {
        usable: jwt::decoding_key(&jwk),
        kid: jwk.common.key_id,
    })
}

fn lookup(keys: &[Key], kid: Option<&str>, alg: Algorithm) -> Lookup {
    let fits = |k: &Key| match &k.usable {
        Some((a, key)) if *a == alg => Some(key.clone()),
        _ => None,
    };
    match kid {
        Some(kid) => {
            let mut named = keys
                .iter()
                .filter(|k| k.kid.as_deref() == Some(kid))
                .peekable();
            if named.peek().is_none() {
                return Lookup::NotFound;
            }
            named.find_map(fits).map_or(Lookup::Mismatch, Lookup::Found)
        }
        None => {
            let mut fitting = keys.iter().filter_map(fits);
            match (fitting.next(), fitting.next()) {
                (Some(key), None) => Lookup::Found(key),
                (Some(_), Some(_)) => Lookup::Ambiguous,
                (None, _) => Lookup::NotFound,
            }
        }
    }
}

fn into_result(lookup: Lookup, kid: Option<&str>) -> Result<DecodingKey, AuthError> {
    match lookup {
        Lookup::Found(key) => Ok(key),
        Lookup::Mismatch => Err(AuthError::KeyMismatch),
        Lookup::Ambiguous | Lookup::NotFound => Err(AuthError::UnknownKey {
            kid: kid.map(jwt::printable),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_support::{Idp, KeyKind};

    /// `source` with keys reloaded after a second and unused after
    /// `max_stale`.
    fn short_lived(mut source: KeySource, max_stale: Duration) -> KeySource {
        source.ages = Ages {
            max_age: Duration::from_secs(1),
            max_stale,
        };
        source
    }

    /// Keys loaded long enough ago to be reloaded, and an issuer whose
    /// JWKS answers nothing: no request waits for the reload, which runs
    /// beside them; they verify with the keys they have.
    #[actix_web::test]
    async fn a_hanging_reload_holds_up_no_one_else() {
        let idp = Idp::start().await;
        let hanging = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let jwks_url =
            Url::parse(&format!("http://{}/jwks", hanging.local_addr().unwrap())).unwrap();
        let http = crate::providers::outbound_http_client().unwrap();
        let source = Arc::new(short_lived(
            KeySource::new(http.clone(), idp.url("/"), Some(jwks_url)),
            MAX_STALE,
        ));
        let set: RawJwks = fetch::get_json(&http, &idp.url("/jwks")).await.unwrap();
        {
            let mut cache = source.cache.write().await;
            cache.keys = Arc::new(set.keys.into_iter().filter_map(parse_key).collect());
            cache.loaded_at = Instant::now().checked_sub(Duration::from_secs(2));
        }
        let kid = KeyKind::Rsa.kid();
        // The first, which starts the reload, and one while it hangs.
        for _ in 0..2 {
            let started = Instant::now();
            let key = source.key_for(Some(kid), Algorithm::RS256).await;
            assert!(key.is_ok());
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "waited {:?} for the reload",
                started.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            source.fetching.try_lock().is_err(),
            "the reload is under way beside them"
        );
        drop(hanging);
    }

    /// Keys the issuer's JWKS has not confirmed for over [`MAX_STALE`]
    /// (it does not answer): a token they verify is refused as
    /// unavailable, not accepted on keys the issuer may have withdrawn.
    #[actix_web::test]
    async fn keys_too_long_unconfirmed_verify_nothing() {
        let idp = Idp::start().await;
        // Nobody listens there once the listener is gone.
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let jwks_url = Url::parse(&format!("http://{}/jwks", gone.local_addr().unwrap())).unwrap();
        drop(gone);
        let http = crate::providers::outbound_http_client().unwrap();
        let source = Arc::new(short_lived(
            KeySource::new(http.clone(), idp.url("/"), Some(jwks_url)),
            Duration::from_secs(10),
        ));
        let set: RawJwks = fetch::get_json(&http, &idp.url("/jwks")).await.unwrap();
        let keys = Arc::new(
            set.keys
                .into_iter()
                .filter_map(parse_key)
                .collect::<Vec<_>>(),
        );
        let kid = KeyKind::Rsa.kid();
        let loaded_ago = |ago: Duration| {
            let keys = keys.clone();
            let source = &source;
            async move {
                let mut cache = source.cache.write().await;
                cache.keys = keys;
                cache.loaded_at = Instant::now().checked_sub(ago);
                cache.failed_at = None;
            }
        };
        // Due for a reload that fails: still used, for a while.
        loaded_ago(Duration::from_secs(2)).await;
        assert!(source.key_for(Some(kid), Algorithm::RS256).await.is_ok());
        // Unconfirmed for too long: refused until a load succeeds.
        loaded_ago(Duration::from_secs(11)).await;
        let refused = source.key_for(Some(kid), Algorithm::RS256).await;
        assert!(
            matches!(refused, Err(AuthError::KeysUnavailable(_))),
            "{:?}",
            refused.err()
        );
    }
}
