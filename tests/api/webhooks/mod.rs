//! Connection events to the operator's webhooks: which action writes which
//! event (and nothing else, never a credential), in the transaction of its
//! change; delivery with Standard Webhooks signatures, retries, failure,
//! and across instances — one killed mid-delivery, two delivering at once.

mod delivery;
mod events;
mod receiver;

use std::time::Duration;

use receiver::SECRET;

/// The `[webhooks]` table of a test instance: one endpoint `ops` at `url`
/// for `events` (empty: all, the setting left out), quick polls and
/// retries; `extra` (TOML) overrides the timing.
pub fn webhooks_table(url: &str, events: &[&str], extra: &str) -> toml::Table {
    let events: Vec<String> = events.iter().map(|e| format!("\"{e}\"")).collect();
    let events = match events.is_empty() {
        true => String::new(),
        false => format!("events = [{}]", events.join(", ")),
    };
    let mut table: toml::Table = toml::from_str(&format!(
        r#"
        poll_interval_ms = 50
        first_retry_ms = 200
        timeout_secs = 2
        [endpoints.ops]
        url = "{url}"
        secret = "{SECRET}"
        allow_private_network = true
        {events}
        "#
    ))
    .unwrap();
    let extra: toml::Table = toml::from_str(extra).unwrap();
    table.extend(extra);
    table
}

/// A settings tweak adding [`webhooks_table`].
pub fn with_webhooks<'a>(
    url: &'a str,
    events: &'a [&'a str],
    extra: &'a str,
) -> impl FnOnce(&mut toml::Table) + 'a {
    move |t| {
        t.insert(
            "webhooks".into(),
            toml::Value::Table(webhooks_table(url, events, extra)),
        );
    }
}

/// Long enough for any delivery these tests expect.
pub const PATIENCE: Duration = Duration::from_secs(20);
