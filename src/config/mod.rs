//! Settings: code defaults, then an optional TOML file, then `MCP_CONNECT_…`
//! environment variables (each also as `…_FILE`, read from a file — the way
//! container secrets arrive). Loaded once in `main` and passed down; nothing
//! here is global.
//!
//! Environment names map onto the TOML keys: `MCP_CONNECT_PUBLIC_URL` is
//! `public_url`, and a double underscore descends into a table, so
//! `MCP_CONNECT_AUTH__ISSUER` is `[auth] issuer`. Unknown keys, in the file or
//! the environment, stop start-up with a message that names them.
//!
//! The parts: `settings` and `tables` hold the structs, a doc comment on
//! each key (README's settings table follows them); `defaults` the values of
//! unset keys; `lenient` the deserializers that also take the strings the
//! environment gives; `env` the variable names; `sources` the layering and
//! loading; `migration` the database settings that `migrate` loads alone;
//! `validate` the checks a loaded configuration must pass; `proxies` the
//! proxies whose `X-Forwarded-For` is believed; `webhooks` the
//! endpoints connection events are sent to; `error` what stops loading.

mod clients;
mod defaults;
mod env;
mod error;
pub(crate) mod lenient;
mod listening;
mod migration;
mod operations;
mod proxies;
mod settings;
mod sources;
mod tables;
mod validate;
pub(crate) use validate::{check_database_url, is_secure_or_loopback};
pub use validate::{is_token68, is_valid_name};
#[cfg(test)]
mod validate_tests;
mod webhooks;
#[cfg(test)]
mod webhooks_tests;

#[cfg(test)]
mod test_support;

pub use clients::{ClientsSettings, GrantMode};
pub use env::{ENV_PREFIX, env_name};
pub use error::{ConfigError, without_userinfo};
pub use lenient::parse_list;
pub use listening::ListenSettings;
pub use migration::MigrationSettings;
pub use operations::{
    AuditSettings, DatabaseSettings, MAX_CONNECT_WAIT_MS, RevocationSettings, SHUTDOWN_DRAIN,
};
pub use proxies::{FORWARDED_FOR, TrustedProxies};
pub use settings::{LogFormat, Settings};
pub use tables::{
    AuthSettings, FlowSettings, IntrospectionSettings, ProviderSettings, WebSettings,
};
pub use webhooks::{WebhookEndpoint, WebhookEvent, WebhookSettings, signing_key};
