//! `mcp-connect dev`: a loopback-only development mode whose built-in identity
//! provider (`/dev/idp`) issues the tokens this server accepts, so the whole
//! flow runs with no external account. The dev IdP is only the configured
//! issuer: its tokens go through the same validation as a production issuer's.
//!
//! Its keys live in `dev_secrets`, so restarts keep issued tokens valid;
//! authorization codes and refresh tokens live in memory (one process).

mod authorize;
mod cli;
mod database;
pub mod demo;
mod discovery;
mod environment;
mod grants;
mod mint;
mod pages;
mod params;
mod run;
mod signing;
mod token;

#[cfg(test)]
mod db_tests;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod test_server;

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::{SystemTime, UNIX_EPOCH},
};

use actix_web::web;
use sqlx::PgPool;
use url::Url;

pub use cli::{DevArgs, DevCommand, TokenArgs};
pub use params::UserName;
pub use run::run;

use grants::Grants;
use signing::SigningKey;

/// `dev_secrets` row holding the IdP's Ed25519 key (base64 PKCS#8).
pub const SIGNING_KEY_SECRET: &str = "idp_signing_key_ed25519";
/// `dev_secrets` row holding the AES key-ring entry (`kid:base64`).
pub const AES_KEY_SECRET: &str = "aes_key";

/// What can stop the dev identity provider. A cause is part of the
/// message and never also a `source`: `main` prints the whole chain,
/// which would say it twice.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error("dev secrets: {}", crate::db::failures::Said(.0))]
    Db(sqlx::Error),
    #[error("this database has no dev keys yet: run `mcp-connect dev` once first")]
    NotInitialised,
    #[error("cannot generate the dev signing key")]
    KeyGeneration,
    #[error(
        "the stored dev signing key is unusable ({0}); delete the `{SIGNING_KEY_SECRET}` row of dev_secrets to start over"
    )]
    BadStoredKey(String),
    #[error("the public base URL `{0}` is not an absolute http(s) URL")]
    BadBaseUrl(String),
    #[error("cannot sign a token: {0}")]
    Sign(jsonwebtoken::errors::Error),
}

impl From<sqlx::Error> for DevError {
    fn from(e: sqlx::Error) -> Self {
        Self::Db(e)
    }
}

impl From<jsonwebtoken::errors::Error> for DevError {
    fn from(e: jsonwebtoken::errors::Error) -> Self {
        Self::Sign(e)
    }
}

/// The dev identity provider. Cheap to clone; mounted by `startup::serve`
/// as `web::Data<DevServices>`.
#[derive(Clone)]
pub struct DevServices {
    inner: Arc<Inner>,
}

struct Inner {
    base: Url,
    /// `base` without a trailing slash, for joining paths.
    base_str: String,
    key: SigningKey,
    grants: Mutex<Grants>,
    demo: demo::DemoProvider,
}

impl std::fmt::Debug for DevServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevServices")
            .field("issuer", &self.issuer())
            .field("kid", &self.inner.key.kid())
            .finish_non_exhaustive()
    }
}

impl DevServices {
    /// Loads the dev signing key from `dev_secrets`, creating it on first start.
    pub async fn load_or_create(pool: &PgPool, public_base_url: &str) -> Result<Self, DevError> {
        let candidate = SigningKey::generate_pkcs8_b64()?;
        let stored =
            crate::db::dev_secrets::get_or_insert(pool, SIGNING_KEY_SECRET, &candidate).await?;
        let demo_secret = demo::client_secret(pool, true).await?;
        Self::new(
            public_base_url,
            SigningKey::from_pkcs8_b64(&stored)?,
            demo_secret,
        )
    }

    /// Loads the existing dev signing key; [`DevError::NotInitialised`] when
    /// `mcp-connect dev` has never run against this database.
    pub async fn load(pool: &PgPool, public_base_url: &str) -> Result<Self, DevError> {
        let stored = crate::db::dev_secrets::get(pool, SIGNING_KEY_SECRET)
            .await
            .map_err(not_set_up)?;
        let stored = stored.ok_or(DevError::NotInitialised)?;
        let demo_secret = demo::client_secret(pool, false).await?;
        Self::new(
            public_base_url,
            SigningKey::from_pkcs8_b64(&stored)?,
            demo_secret,
        )
    }

    fn new(
        public_base_url: &str,
        key: SigningKey,
        demo_secret: secrecy::SecretString,
    ) -> Result<Self, DevError> {
        let base = Url::parse(public_base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or_else(|| DevError::BadBaseUrl(public_base_url.to_owned()))?;
        let base_str = base.as_str().trim_end_matches('/').to_owned();
        let demo = demo::DemoProvider::new(&base_str, demo_secret);
        Ok(Self {
            inner: Arc::new(Inner {
                base,
                base_str,
                key,
                grants: Mutex::new(Grants::default()),
                demo,
            }),
        })
    }

    /// `<public_base_url>/dev/idp`.
    pub fn issuer(&self) -> String {
        format!("{}/dev/idp", self.inner.base_str)
    }

    /// `<public_base_url>/mcp`: the audience of every access token.
    pub fn mcp_resource(&self) -> String {
        format!("{}/mcp", self.inner.base_str)
    }

    /// The JWK Set served at `/dev/idp/jwks`.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({ "keys": [self.inner.key.public_jwk()] })
    }

    /// The demo OAuth provider served at `/dev/demo`.
    pub fn demo(&self) -> &demo::DemoProvider {
        &self.inner.demo
    }

    pub(crate) fn base_url(&self) -> &Url {
        &self.inner.base
    }

    #[cfg(test)]
    pub(crate) fn signing_kid(&self) -> &str {
        self.inner.key.kid()
    }

    /// The in-memory codes and refresh tokens. A poisoned lock still holds
    /// consistent maps (every update is a single insert or remove).
    pub(crate) fn grants(&self) -> MutexGuard<'_, Grants> {
        self.inner
            .grants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A key-less instance for tests that need no database.
    #[cfg(test)]
    pub(crate) fn ephemeral(public_base_url: &str) -> Self {
        let key = SigningKey::generate_pkcs8_b64().and_then(|k| SigningKey::from_pkcs8_b64(&k));
        match key.and_then(|k| Self::new(public_base_url, k, demo::unsaved_client_secret())) {
            Ok(dev) => dev,
            Err(e) => panic!("ephemeral dev services: {e}"),
        }
    }
}

/// The AES key-ring entry (`kid:base64`) for dev mode, generated once and
/// kept in `dev_secrets` so sealed values survive restarts.
pub async fn dev_key_entry(pool: &PgPool) -> Result<String, DevError> {
    let candidate = crate::crypto::KeyRing::generate_entry("dev1");
    Ok(crate::db::dev_secrets::get_or_insert(pool, AES_KEY_SECRET, &candidate).await?)
}

impl DevServices {
    /// The dev identity provider's and demo provider's routes with their
    /// data, to mount beside the service's own.
    pub fn routes(&self) -> std::sync::Arc<dyn Fn(&mut web::ServiceConfig) + Send + Sync> {
        let data = web::Data::new(self.clone());
        std::sync::Arc::new(move |cfg: &mut web::ServiceConfig| {
            cfg.app_data(data.clone());
            configure(cfg);
        })
    }
}

/// Registers the dev identity provider's routes.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/dev/idp")
            .route(
                "/.well-known/openid-configuration",
                web::get().to(discovery::metadata),
            )
            .route("/jwks", web::get().to(discovery::jwks))
            .route("/authorize", web::get().to(authorize::show))
            .route("/authorize", web::post().to(authorize::submit))
            .route("/token", web::post().to(token::exchange)),
    )
    // RFC 8414 §3.1 and the OIDC variant MCP clients also try: the
    // well-known segment inserted before the issuer's path.
    .route(
        "/.well-known/oauth-authorization-server/dev/idp",
        web::get().to(discovery::metadata),
    )
    .route(
        "/.well-known/openid-configuration/dev/idp",
        web::get().to(discovery::metadata),
    );
    demo::configure(cfg);
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A missing database (3D000) or table (42P01) means dev mode never ran here.
fn not_set_up(e: sqlx::Error) -> DevError {
    let code = e
        .as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned());
    match code.as_deref() {
        Some("3D000" | "42P01") => DevError::NotInitialised,
        _ => DevError::Db(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_must_be_http() {
        let key = SigningKey::from_pkcs8_b64(&SigningKey::generate_pkcs8_b64().unwrap()).unwrap();
        assert!(matches!(
            DevServices::new("not a url", key, demo::unsaved_client_secret()),
            Err(DevError::BadBaseUrl(_))
        ));
    }
}
