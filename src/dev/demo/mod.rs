//! The demo provider (`/dev/demo`): a small but real OAuth 2.0 authorization
//! server and API, so that connecting a third-party account can be tried in
//! dev mode with no external account. The app knows it as provider `demo`
//! (preset `demo`), which expects exactly these paths.
//!
//! One registered client, [`CLIENT_ID`], authenticated with HTTP Basic; its
//! secret is generated once and kept in `dev_secrets`. One registered
//! redirect URI, `<base>/oauth/callback/demo`, matched exactly but for the
//! port of its loopback address (RFC 8252 §7.3), so that another dev server
//! on this machine can use this one as its provider. PKCE S256 is
//! required. Codes and tokens live in memory (dev mode is one process), as
//! SHA-256 digests; a restart forgets them, which the app must survive anyway.

mod api;
mod authorize;
mod client_auth;
mod store;
mod token;

#[cfg(test)]
mod flow_tests;

use std::{
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use actix_web::{HttpResponse, web};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use super::{DevServices, grants::random_token, params::UserName};
use store::Store;

/// The one registered client.
pub const CLIENT_ID: &str = "mcp-connect-demo";
/// `dev_secrets` row holding the client secret.
pub const CLIENT_SECRET_NAME: &str = "demo_client_secret";
/// Access tokens are short-lived so that refresh is exercised in dev mode.
pub const DEFAULT_ACCESS_TTL: Duration = Duration::from_secs(300);
/// Granted when the authorization request names no scope.
pub const DEFAULT_SCOPE: &str = "profile";

/// The demo authorization server's state. Reached through
/// [`DevServices::demo`].
pub struct DemoProvider {
    issuer: String,
    redirect_uri: String,
    client_secret: SecretString,
    store: Mutex<Store>,
}

impl std::fmt::Debug for DemoProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoProvider")
            .field("issuer", &self.issuer)
            .field("client_id", &CLIENT_ID)
            .finish_non_exhaustive()
    }
}

impl DemoProvider {
    /// `base` is the server's public URL without a trailing slash.
    pub(super) fn new(base: &str, client_secret: SecretString) -> Self {
        Self {
            issuer: format!("{base}/dev/demo"),
            redirect_uri: format!("{base}/oauth/callback/demo"),
            client_secret,
            store: Mutex::new(Store::new(DEFAULT_ACCESS_TTL)),
        }
    }

    /// `<base>/dev/demo`, sent as `iss` on every authorization response.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    pub fn client_id(&self) -> &'static str {
        CLIENT_ID
    }

    pub fn client_secret(&self) -> &SecretString {
        &self.client_secret
    }

    /// The registered redirect URI: where this server's own `demo`
    /// provider receives its callbacks.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Whether `given` is the registered redirect URI, compared as a
    /// string, or that URI with another port: RFC 8252 §7.3 (and RFC 9700
    /// §4.1.3) let a loopback redirect URI's port vary, and dev mode's
    /// base is always `http://127.0.0.1:<port>`. Only the port may differ:
    /// the candidate must already be in its canonical form, so nothing
    /// else can be smuggled past the comparison by a URL parser's
    /// normalization.
    pub fn accepts_redirect_uri(&self, given: &str) -> bool {
        if given == self.redirect_uri {
            return true;
        }
        let (Ok(mut candidate), Ok(registered)) =
            (url::Url::parse(given), url::Url::parse(&self.redirect_uri))
        else {
            return false;
        };
        let loopback = matches!(
            registered.host(),
            Some(url::Host::Ipv4(ip)) if ip.is_loopback()
        ) || matches!(registered.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback());
        if !loopback || candidate.as_str() != given || candidate.port().is_none() {
            return false;
        }
        candidate.set_port(registered.port()).is_ok() && candidate == registered
    }

    pub fn access_ttl(&self) -> Duration {
        self.store().access_ttl()
    }

    /// Lifetime of access tokens issued from now on (tests shorten it to
    /// make the app refresh).
    pub fn set_access_ttl(&self, ttl: Duration) {
        self.store().set_access_ttl(ttl);
    }

    /// The `[providers.demo]` settings table that points the app at this
    /// provider: `preset`, `client_id`, `client_secret`. Every URL comes
    /// from the preset.
    pub fn provider_settings(&self) -> toml::Table {
        let mut table = toml::Table::new();
        table.insert("preset".into(), "demo".into());
        table.insert("client_id".into(), CLIENT_ID.into());
        table.insert(
            "client_secret".into(),
            self.client_secret.expose_secret().into(),
        );
        table
    }

    /// A poisoned lock still holds consistent maps: every operation checks
    /// before it changes anything.
    fn store(&self) -> MutexGuard<'_, Store> {
        self.store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The client secret from `dev_secrets`. With `create`, a first start stores
/// a new one; without, a database that has none gets an unsaved one (only
/// `mcp-connect dev token` loads without creating, and it serves nothing).
pub(super) async fn client_secret(
    pool: &PgPool,
    create: bool,
) -> Result<SecretString, sqlx::Error> {
    let stored = if create {
        Some(
            crate::db::dev_secrets::get_or_insert(pool, CLIENT_SECRET_NAME, &random_token())
                .await?,
        )
    } else {
        crate::db::dev_secrets::get(pool, CLIENT_SECRET_NAME).await?
    };
    Ok(SecretString::from(stored.unwrap_or_else(random_token)))
}

/// A secret for instances that have no database (tests).
#[cfg(test)]
pub(super) fn unsaved_client_secret() -> SecretString {
    SecretString::from(random_token())
}

/// The account id the demo API reports for a name: stable across restarts
/// and processes, and not the name itself, as at real providers.
fn account_id(user: &UserName) -> String {
    let digest = Sha256::digest(format!("mcp-connect demo account:{}", user.as_str()));
    let hex = crate::crypto::hex(&digest[..8]);
    format!("demo-{hex}")
}

/// Registers `/dev/demo/…`.
pub(super) fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/dev/demo")
            .route("/authorize", web::get().to(authorize::show))
            .route("/authorize", web::post().to(authorize::submit))
            .route("/token", web::post().to(token::exchange))
            .route("/revoke", web::post().to(token::revoke))
            .route("/api/me", web::get().to(api::me))
            .route("/api/me", web::head().to(api::me))
            .route("/api/echo", web::route().to(api::echo))
            .route("/api/{rest:.*}", web::route().to(api::not_found)),
    )
    // RFC 8414 §3.1: the well-known segment goes before the issuer's path.
    .route(
        "/.well-known/oauth-authorization-server/dev/demo",
        web::get().to(metadata),
    );
}

async fn metadata(dev: web::Data<DevServices>) -> HttpResponse {
    let issuer = dev.demo().issuer();
    HttpResponse::Ok().json(serde_json::json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "revocation_endpoint": format!("{issuer}/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic"],
        "scopes_supported": [DEFAULT_SCOPE],
        "authorization_response_iss_parameter_supported": true,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids_are_stable_and_distinct() {
        let alice = UserName::parse("alice").unwrap();
        let bob = UserName::parse("bob").unwrap();
        assert_eq!(account_id(&alice), account_id(&alice));
        assert_ne!(account_id(&alice), account_id(&bob));
        assert_eq!(account_id(&alice).len(), "demo-".len() + 16);
    }

    #[test]
    fn a_loopback_redirect_uri_may_differ_in_its_port_and_nothing_else() {
        let demo = DemoProvider::new("http://127.0.0.1:9", SecretString::from("s"));
        for accepted in [
            "http://127.0.0.1:9/oauth/callback/demo",
            "http://127.0.0.1:41234/oauth/callback/demo",
        ] {
            assert!(demo.accepts_redirect_uri(accepted), "{accepted}");
        }
        for refused in [
            "http://127.0.0.1/oauth/callback/demo",
            // Not in canonical form (the default port is left out).
            "http://127.0.0.1:80/oauth/callback/demo",
            "http://localhost:41234/oauth/callback/demo",
            "http://127.0.0.2:41234/oauth/callback/demo",
            "https://127.0.0.1:41234/oauth/callback/demo",
            "http://127.0.0.1:41234/oauth/callback/demo2",
            "http://127.0.0.1:41234/oauth/callback/demo?x=1",
            "http://127.0.0.1:41234/oauth/callback/demo#x",
            "http://127.0.0.1:41234/oauth/callback/./demo",
            "http://127.0.0.1:041234/oauth/callback/demo",
            "http://u@127.0.0.1:41234/oauth/callback/demo",
            "HTTP://127.0.0.1:41234/oauth/callback/demo",
            "",
        ] {
            assert!(!demo.accepts_redirect_uri(refused), "{refused}");
        }
        // Off loopback, the URI is matched exactly.
        let public = DemoProvider::new("https://connect.example", SecretString::from("s"));
        assert!(public.accepts_redirect_uri("https://connect.example/oauth/callback/demo"));
        assert!(!public.accepts_redirect_uri("https://connect.example:8443/oauth/callback/demo"));
    }

    #[test]
    fn settings_name_the_preset_and_client_but_debug_hides_the_secret() {
        let demo = DemoProvider::new("http://127.0.0.1:9", SecretString::from("s3cret-value"));
        let table = demo.provider_settings();
        assert_eq!(table["preset"].as_str(), Some("demo"));
        assert_eq!(table["client_id"].as_str(), Some(CLIENT_ID));
        assert_eq!(table["client_secret"].as_str(), Some("s3cret-value"));
        assert!(!format!("{demo:?}").contains("s3cret-value"));
        assert_eq!(
            demo.redirect_uri(),
            "http://127.0.0.1:9/oauth/callback/demo"
        );
    }
}
