//! The catalog entries shipped with the service: `catalog/<name>.toml`,
//! compiled in so that a binary needs no data directory. A test keeps this
//! list and the directory equal.

macro_rules! shipped {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/catalog/", $name, ".toml")))),*]
    };
}

/// `(name, TOML text)`, sorted by name.
pub(super) const SHIPPED: &[(&str, &str)] = shipped![
    "airtable",
    "asana",
    "atlassian",
    "bitbucket",
    "box",
    "calendly",
    "clickup",
    "cloudflare",
    "datadog",
    "demo",
    "digitalocean",
    "discord",
    "dropbox",
    "github",
    "gitlab",
    "google",
    "hubspot",
    "intercom",
    "jira_api_token",
    "linear",
    "linkedin",
    "microsoft",
    "notion",
    "openai",
    "pipedrive",
    "postmark",
    "reddit",
    "salesforce",
    "sendgrid",
    "shopify",
    "slack",
    "spotify",
    "strava",
    "stripe",
    "twilio",
    "twitch",
    "vercel",
    "x",
    "zendesk",
    "zoom",
];

/// The names of the shipped entries.
pub(super) fn names() -> Vec<&'static str> {
    SHIPPED.iter().map(|(name, _)| *name).collect()
}

/// A shipped entry as a table, ready for an operator's fields to be merged
/// over it. `None` for a name that is not shipped, and for an entry that
/// does not parse (the catalog tests refuse such a file).
pub(super) fn table(name: &str) -> Option<toml::Table> {
    let (_, text) = SHIPPED.iter().find(|(n, _)| *n == name)?;
    text.parse().ok()
}
