//! Test-only: the smallest environment that loads, for the config tests to
//! add to or take from.

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pub(super) fn minimal() -> Vec<(String, String)> {
    env(&[
        ("MCP_CONNECT_PUBLIC_URL", "https://connect.example.com"),
        ("MCP_CONNECT_DATABASE_URL", "postgres://localhost/x"),
        ("MCP_CONNECT_KEYS", KEY),
        ("MCP_CONNECT_AUTH__ISSUER", "https://idp.example.com"),
    ])
}
