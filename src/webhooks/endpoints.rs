//! The configured endpoints, ready to send to: URL, HMAC key and the HTTP
//! client. Every request goes through the service's outbound client
//! settings (no redirects, bounded times); an endpoint that does not
//! allow private networks gets the address-guarded one, which connects to
//! public addresses only — a name that later resolves inside the network
//! is not followed there. One on an address literal or `localhost` is
//! reached directly, never through a proxy.

use std::collections::HashMap;

use url::{Host, Url};

use crate::{
    config::{ConfigError, WebhookSettings, env_name, signing_key},
    providers::{guarded, is_public, outbound_http_builder},
};

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The cause is part of the message, not a `source`: `main` prints
    /// the whole chain, which would say it twice.
    #[error("cannot build the webhook HTTP client: {0}")]
    Http(reqwest::Error),
}

impl From<reqwest::Error> for SetupError {
    fn from(e: reqwest::Error) -> Self {
        Self::Http(e)
    }
}

/// One endpoint as the deliverer uses it.
pub struct Endpoint {
    pub url: Url,
    /// The HMAC keys (the decoded secrets): the current one, then the
    /// previous one while it is being rotated out.
    pub keys: Vec<Vec<u8>>,
    pub client: reqwest::Client,
}

/// The endpoints by name.
pub struct Endpoints {
    by_name: HashMap<String, Endpoint>,
}

impl Endpoints {
    /// Checks what loading could not (an address literal or `localhost`
    /// needs `allow_private_network`) and builds the clients.
    pub fn from_settings(settings: &WebhookSettings) -> Result<Self, SetupError> {
        Self::with_environment_proxy(settings, None)
    }

    /// As [`Self::from_settings`]; `proxy` stands for one the environment
    /// sets (`HTTPS_PROXY`), which the tests cannot set for one instance.
    fn with_environment_proxy(
        settings: &WebhookSettings,
        proxy: Option<reqwest::Proxy>,
    ) -> Result<Self, SetupError> {
        let mut by_name = HashMap::new();
        // Every start-up comes here: no clients (each loads its TLS roots)
        // where nothing is sent.
        if settings.endpoints.is_empty() {
            return Ok(Self { by_name });
        }
        let builder = || outbound_http_builder().timeout(settings.timeout());
        let guarded = guarded(builder()).build()?;
        let open = match proxy {
            Some(proxy) => builder().proxy(proxy).build()?,
            None => builder().build()?,
        };
        // An address literal or `localhost` is reached directly: through a
        // proxy of the environment's its events would travel to the proxy
        // (in clear, for plain http) and be delivered to the proxy's own
        // loopback or network, not this host's.
        let direct = builder().no_proxy().build()?;
        for (name, e) in &settings.endpoints {
            let key = |field: &str| format!("webhooks.endpoints.{name}.{field}");
            if !e.allow_private_network && !names_public_host(&e.url) {
                return Err(ConfigError::Invalid {
                    key: key("url"),
                    message: format!(
                        "names a loopback or private address; set {} = true (or {}) if that is meant",
                        key("allow_private_network"),
                        env_name(&key("allow_private_network"))
                    ),
                }
                .into());
            }
            let decode = |field: &str, secret| {
                signing_key(secret).map_err(|m| ConfigError::Invalid {
                    key: key(field),
                    message: m.into(),
                })
            };
            let mut keys = vec![decode("secret", &e.secret)?];
            if let Some(previous) = &e.previous_secret {
                keys.push(decode("previous_secret", previous)?);
            }
            let client = if !e.allow_private_network {
                guarded.clone()
            } else if names_public_host(&e.url) {
                open.clone()
            } else {
                direct.clone()
            };
            by_name.insert(
                name.clone(),
                Endpoint {
                    url: e.url.clone(),
                    keys,
                    client,
                },
            );
        }
        Ok(Self { by_name })
    }

    pub fn get(&self, name: &str) -> Option<&Endpoint> {
        self.by_name.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The configured endpoints' names.
    pub fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }
}

/// The resolver only sees names: address literals and `localhost` are
/// judged here.
fn names_public_host(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => is_public(ip.into()),
        Some(Host::Ipv6(ip)) => is_public(ip.into()),
        Some(Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d != "localhost" && !d.ends_with(".localhost")
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use secrecy::SecretString;

    use super::*;
    use crate::config::WebhookEndpoint;

    fn settings(url: &str, allow_private_network: bool) -> WebhookSettings {
        let endpoint = WebhookEndpoint {
            url: Url::parse(url).unwrap(),
            secret: SecretString::from("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned()),
            previous_secret: None,
            events: Vec::new(),
            allow_private_network,
        };
        WebhookSettings {
            endpoints: [("ops".to_owned(), endpoint)].into(),
            ..WebhookSettings::default()
        }
    }

    #[test]
    fn a_private_address_needs_the_endpoint_to_allow_it() {
        let err = Endpoints::from_settings(&settings("http://127.0.0.1:9000/hook", false))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("webhooks.endpoints.ops.url")
                && err.contains("MCP_CONNECT_WEBHOOKS__ENDPOINTS__OPS__ALLOW_PRIVATE_NETWORK"),
            "{err}"
        );
        let allowed = Endpoints::from_settings(&settings("http://127.0.0.1:9000/hook", true));
        assert!(allowed.unwrap().get("ops").is_some());
        let public = Endpoints::from_settings(&settings("https://hooks.example.com/x", false));
        let public = public.unwrap();
        let keys = &public.get("ops").unwrap().keys;
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].len(), 24);
    }

    #[test]
    fn a_previous_secret_signs_after_the_current_one() {
        let mut rotating = settings("https://hooks.example.com/x", false);
        let ops = rotating.endpoints.get_mut("ops").unwrap();
        ops.previous_secret = Some(ops.secret.clone());
        ops.secret = SecretString::from(format!("whsec_{}", "A".repeat(32)));
        let endpoints = Endpoints::from_settings(&rotating).unwrap();
        let keys = &endpoints.get("ops").unwrap().keys;
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0], vec![0u8; 24], "the current key first");
        assert_eq!(keys[1][..2], [0x31, 0xf2], "then the previous one");
    }

    #[test]
    fn literal_private_addresses_and_localhost_are_not_public_hosts() {
        for url in [
            "http://127.0.0.1:9000/hook",
            "https://10.0.0.5/hook",
            "https://[::1]/hook",
            "https://localhost/hook",
            "https://x.localhost./hook",
            "https://169.254.169.254/latest",
        ] {
            assert!(!names_public_host(&Url::parse(url).unwrap()), "{url}");
        }
        for url in ["https://hooks.example.com/x", "https://93.184.216.34/x"] {
            assert!(names_public_host(&Url::parse(url).unwrap()), "{url}");
        }
    }

    /// Answers every request on `listener` with 204 and counts them.
    fn answer_all(
        listener: tokio::net::TcpListener,
    ) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut request = vec![0; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
        seen
    }

    #[tokio::test]
    async fn an_endpoint_on_a_loopback_address_is_reached_past_the_environments_proxy() {
        let receiver = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", receiver.local_addr().unwrap());
        let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
        let (received, proxied) = (answer_all(receiver), answer_all(proxy));
        let endpoints = Endpoints::with_environment_proxy(
            &settings(&url, true),
            Some(reqwest::Proxy::all(proxy_url).unwrap()),
        )
        .unwrap();
        let endpoint = endpoints.get("ops").unwrap();
        let answer = endpoint
            .client
            .post(endpoint.url.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 204);
        assert_eq!(received.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(proxied.load(std::sync::atomic::Ordering::SeqCst), 0);
    }
}
