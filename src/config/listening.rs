//! Where this environment's instance listens, for `mcp-connect health`:
//! `bind` from the same file and variables `serve` reads, and nothing
//! else — the container check runs every few seconds beside the service
//! and needs none of its secrets.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    path::Path,
};

use serde::Deserialize;

use super::{
    ConfigError, defaults,
    sources::{deserialize, layered, only, prefixed_env},
};

#[derive(Debug, Deserialize)]
pub struct ListenSettings {
    /// As [`super::Settings::bind`].
    #[serde(default = "defaults::bind")]
    pub bind: SocketAddr,
}

impl ListenSettings {
    /// Loads `bind` from the optional file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_sources(file, prefixed_env()?)
    }

    /// Loads `bind` from the optional file and the given environment.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        deserialize(
            layered(file, only(env, &["bind"]), toml::Table::new())?,
            file,
        )
    }

    /// The instance's `/readyz`, as the instance itself can reach it: on
    /// loopback when it listens on every address.
    pub fn readiness_url(&self) -> String {
        let ip = match self.bind.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}/readyz", SocketAddr::new(ip, self.bind.port()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(env: &[(&str, &str)]) -> String {
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        ListenSettings::from_sources(None, env)
            .unwrap()
            .readiness_url()
    }

    #[test]
    fn the_readiness_url_follows_bind() {
        assert_eq!(url(&[]), "http://127.0.0.1:8080/readyz");
        assert_eq!(
            url(&[("MCP_CONNECT_BIND", "0.0.0.0:9000")]),
            "http://127.0.0.1:9000/readyz"
        );
        assert_eq!(
            url(&[("MCP_CONNECT_BIND", "[::]:9000")]),
            "http://[::1]:9000/readyz"
        );
        assert_eq!(
            url(&[("MCP_CONNECT_BIND", "10.0.0.5:8443")]),
            "http://10.0.0.5:8443/readyz"
        );
        // The service's other settings, secrets included, are not read.
        assert_eq!(
            url(&[
                ("MCP_CONNECT_KEYS_FILE", "/nonexistent/keys"),
                ("MCP_CONNECT_PUBLIC_URL", "not a url"),
            ]),
            "http://127.0.0.1:8080/readyz"
        );
    }

    #[test]
    fn a_malformed_bind_is_named() {
        let err = ListenSettings::from_sources(
            None,
            [("MCP_CONNECT_BIND".to_owned(), "port 80".to_owned())],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("bind"), "{err}");
    }
}
