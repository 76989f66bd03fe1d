//! `grants` (who may use a connection) and `[clients]` (how MCP clients are
//! named on the approval and connections pages).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::lenient;

/// Which MCP clients may use a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantMode {
    /// Only the clients the user approved for that connection (the client
    /// that connected it, and any other the user allowed on the approval
    /// page).
    #[default]
    PerClient,
    /// Every client of the user: for deployments with a single client.
    PerUser,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsSettings {
    /// Names for known client ids, shown instead of the id
    /// (`[clients.names] "my-client-id" = "Team assistant"`).
    #[serde(default)]
    pub names: BTreeMap<String, String>,
    /// Hosts (`host` or `host:port`) whose Client ID Metadata Documents are
    /// fetched even though they resolve to a private or loopback address
    /// (an operator's own client registry). Public addresses need no entry.
    #[serde(default, deserialize_with = "lenient::list")]
    pub metadata_trusted_hosts: Vec<String>,
}
