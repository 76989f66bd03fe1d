//! `[webhooks]`: where connection events are sent (Standard Webhooks),
//! which events each endpoint wants, how long an undelivered event is
//! retried and how long a failed one is kept for inspection.
//!
//! An endpoint is a named table (`[webhooks.endpoints.ops]`), so every key
//! has an environment variable too, and its signing secret can come from a
//! file like any other secret:
//! `MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__SECRET_FILE=/run/secrets/ops`.

use std::{collections::BTreeMap, time::Duration};

use base64::{Engine, engine::general_purpose::STANDARD};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer, de::Error as _};
use url::Url;

use super::{ConfigError, defaults, lenient};

/// The events a webhook endpoint can be sent, as the payload's `type` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookEvent {
    /// A user connected an account (or connected it again).
    ConnectionCreated,
    /// The connection cannot be used until its user connects again.
    ConnectionReauthRequired,
    /// The provider refused to refresh the connection's token.
    ConnectionRefreshFailed,
    /// The user disconnected the account.
    ConnectionDeleted,
    /// An MCP client may now use the connection.
    GrantCreated,
    /// An MCP client may no longer use the connection.
    GrantRemoved,
}

impl WebhookEvent {
    pub const ALL: [WebhookEvent; 6] = [
        Self::ConnectionCreated,
        Self::ConnectionReauthRequired,
        Self::ConnectionRefreshFailed,
        Self::ConnectionDeleted,
        Self::GrantCreated,
        Self::GrantRemoved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectionCreated => "connection.created",
            Self::ConnectionReauthRequired => "connection.reauth_required",
            Self::ConnectionRefreshFailed => "connection.refresh_failed",
            Self::ConnectionDeleted => "connection.deleted",
            Self::GrantCreated => "grant.created",
            Self::GrantRemoved => "grant.removed",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// The receivers, by a name of the operator's choosing
    /// (`[webhooks.endpoints.ops]`). None: no event is written at all.
    #[serde(default)]
    pub endpoints: BTreeMap<String, WebhookEndpoint>,
    /// How long an event is retried before it is marked failed, in seconds.
    #[serde(
        default = "defaults::webhook_retry_for_secs",
        deserialize_with = "lenient::number"
    )]
    pub retry_for_secs: u64,
    /// The wait before the first retry, in milliseconds; each next retry
    /// waits twice as long, at most an hour.
    #[serde(
        default = "defaults::webhook_first_retry_ms",
        deserialize_with = "lenient::number"
    )]
    pub first_retry_ms: u64,
    /// How long one delivery may take, connect to answer, in seconds.
    #[serde(
        default = "defaults::webhook_timeout_secs",
        deserialize_with = "lenient::number"
    )]
    pub timeout_secs: u64,
    /// How often each instance looks for events due, in milliseconds.
    #[serde(
        default = "defaults::webhook_poll_interval_ms",
        deserialize_with = "lenient::number"
    )]
    pub poll_interval_ms: u64,
    /// Events that failed are kept this many days for inspection.
    #[serde(
        default = "defaults::webhook_failed_retention_days",
        deserialize_with = "lenient::number"
    )]
    pub failed_retention_days: u32,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            endpoints: BTreeMap::new(),
            retry_for_secs: defaults::webhook_retry_for_secs(),
            first_retry_ms: defaults::webhook_first_retry_ms(),
            timeout_secs: defaults::webhook_timeout_secs(),
            poll_interval_ms: defaults::webhook_poll_interval_ms(),
            failed_retention_days: defaults::webhook_failed_retention_days(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookEndpoint {
    /// Where events are POSTed: https, or plain http to loopback only.
    pub url: Url,
    /// The Standard Webhooks signing secret, `whsec_` and base64 (24 to 64
    /// bytes); better given as `…__SECRET_FILE`.
    pub secret: SecretString,
    /// The secret being replaced, while its receiver may still check with
    /// it: every event is then signed with both (Standard Webhooks lists
    /// several `v1,` signatures in one header), so the receiver can move
    /// to the new secret whenever it is ready. Remove it once it has.
    #[serde(default)]
    pub previous_secret: Option<SecretString>,
    /// The events this endpoint wants; absent: all of them (an empty list
    /// is refused: it would read as all of them).
    #[serde(default, deserialize_with = "event_list")]
    pub events: Vec<WebhookEvent>,
    /// Deliver even when the host is (or resolves to) a loopback, private
    /// or link-local address. Off: such addresses are refused, so a name
    /// that moves inside the network is not followed there.
    #[serde(default, deserialize_with = "lenient::boolean")]
    pub allow_private_network: bool,
}

impl WebhookEndpoint {
    /// Whether this endpoint is sent `event`.
    pub fn wants(&self, event: WebhookEvent) -> bool {
        self.events.is_empty() || self.events.contains(&event)
    }
}

impl WebhookSettings {
    /// The names of the endpoints that want `event`, in a fixed order.
    pub fn endpoints_for(&self, event: WebhookEvent) -> Vec<String> {
        self.endpoints
            .iter()
            .filter(|(_, e)| e.wants(event))
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn retry_for(&self) -> Duration {
        Duration::from_secs(self.retry_for_secs)
    }
    pub fn first_retry(&self) -> Duration {
        Duration::from_millis(self.first_retry_ms)
    }
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }
    pub fn failed_retention(&self) -> chrono::Duration {
        chrono::Duration::days(i64::from(self.failed_retention_days))
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: String, message: String| ConfigError::Invalid { key, message };
        for (key, value, low, high) in [
            ("retry_for_secs", self.retry_for_secs, 1, 30 * 24 * 3600),
            ("first_retry_ms", self.first_retry_ms, 10, 3_600_000),
            ("timeout_secs", self.timeout_secs, 1, 60),
            ("poll_interval_ms", self.poll_interval_ms, 10, 60_000),
            (
                "failed_retention_days",
                u64::from(self.failed_retention_days),
                1,
                3650,
            ),
        ] {
            if !(low..=high).contains(&value) {
                return Err(invalid(
                    format!("webhooks.{key}"),
                    format!("must be between {low} and {high}"),
                ));
            }
        }
        for (name, endpoint) in &self.endpoints {
            let key = |field: &str| format!("webhooks.endpoints.{name}.{field}");
            if !super::validate::is_valid_name(name) {
                return Err(invalid(
                    format!("webhooks.endpoints.{name}"),
                    "endpoint names are 1 to 32 lowercase letters, digits, `-` or `_`".into(),
                ));
            }
            check_url(&endpoint.url).map_err(|m| invalid(key("url"), m.into()))?;
            let current =
                signing_key(&endpoint.secret).map_err(|m| invalid(key("secret"), m.into()))?;
            if let Some(previous) = &endpoint.previous_secret {
                let previous =
                    signing_key(previous).map_err(|m| invalid(key("previous_secret"), m.into()))?;
                if previous == current {
                    return Err(invalid(
                        key("previous_secret"),
                        "is the same key as secret: set secret to the new one".into(),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The HMAC key of a `whsec_…` secret. The message never repeats the secret.
pub fn signing_key(secret: &SecretString) -> Result<Vec<u8>, &'static str> {
    let encoded = secret
        .expose_secret()
        .trim()
        .strip_prefix("whsec_")
        .ok_or("must be a Standard Webhooks secret: `whsec_` followed by base64")?;
    let key = STANDARD
        .decode(encoded)
        .map_err(|_| "the part after `whsec_` is not valid base64")?;
    if !(24..=64).contains(&key.len()) {
        return Err(
            "must hold 24 to 64 random bytes (e.g. `echo whsec_$(openssl rand -base64 32)`)",
        );
    }
    Ok(key)
}

fn check_url(url: &Url) -> Result<(), &'static str> {
    if url.host().is_none() {
        return Err("must be an http(s) URL with a host");
    }
    if url.fragment().is_some() {
        return Err("must not carry a fragment");
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if super::validate::is_loopback(url) => Ok(()),
        _ => Err("must be https (plain http is accepted only on loopback)"),
    }
}

/// A list of event names: a TOML array, or a comma-separated string.
fn event_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<WebhookEvent>, D::Error> {
    let names = lenient::list(d)?;
    // Absent means every event; an empty list written to pause an
    // endpoint would read the same and send it everything.
    if names.is_empty() {
        return Err(D::Error::custom(
            "an empty list of events; leave `events` out for every event, or remove the endpoint to send it none",
        ));
    }
    names
        .iter()
        .map(|name| {
            WebhookEvent::parse(name).ok_or_else(|| {
                let known: Vec<&str> = WebhookEvent::ALL.iter().map(|e| e.as_str()).collect();
                D::Error::custom(format!(
                    "unknown event {:?}; the events are {}",
                    name.chars().take(40).collect::<String>(),
                    known.join(", ")
                ))
            })
        })
        .collect()
}
