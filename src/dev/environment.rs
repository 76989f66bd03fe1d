//! The `MCP_CONNECT_*` variables `dev` passes on to the server it starts,
//! and the serve settings among them it refuses.

use anyhow::{anyhow, bail};

use crate::config::ENV_PREFIX;

/// The serve settings dev sets itself, by key path as a variable names it
/// (`MCP_CONNECT_AUTH__ISSUER`: `auth__issuer`), each with what dev uses.
const SET_BY_DEV: [(&str, &str); 8] = [
    (
        "database_url",
        "its database is --database-url or DATABASE_URL",
    ),
    ("public_url", "it serves http://127.0.0.1:<--port>"),
    ("bind", "it listens on 127.0.0.1:<--port>"),
    (
        "auth__issuer",
        "its tokens are issued by its own identity provider at /dev/idp",
    ),
    (
        "auth__web_client_id",
        "its web pages sign in with its own identity provider at /dev/idp",
    ),
    (
        "auth__jwks_url",
        "its tokens are signed by its own identity provider's keys",
    ),
    (
        "auth__introspection",
        "its tokens are checked against its own identity provider's keys",
    ),
    (
        "keys",
        "its database's tokens are sealed by the key it keeps there",
    ),
];

/// The process's `MCP_CONNECT_*` variables; they override dev defaults.
pub(super) fn connect_env() -> anyhow::Result<Vec<(String, String)>> {
    let mut vars = Vec::new();
    for (key, value) in std::env::vars_os() {
        let Some(key) = key
            .to_str()
            .filter(|k| k.starts_with(ENV_PREFIX))
            .map(str::to_owned)
        else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| anyhow!("{key} is not valid UTF-8"))?;
        vars.push((key, value));
    }
    Ok(vars)
}

/// A serve deployment's settings left in the environment would override
/// what dev sets up (`env` goes over dev's own settings): its database,
/// then written by a server whose sign-in takes any name; an address and
/// an issuer the token dev prints is not for (refused: `aud`, `iss`), and
/// connect links pointing elsewhere. Refused before anything is
/// connected, naming the variable (never its value).
pub(super) fn refuse_settings_dev_sets(env: &[(String, String)]) -> anyhow::Result<()> {
    for (var, _) in env {
        let Some(name) = var.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        // As the settings read them: `…_FILE` names a file holding the
        // value, and a path is the name in lower case.
        let key = name
            .strip_suffix("_FILE")
            .unwrap_or(name)
            .to_ascii_lowercase();
        // A table's fields too (`auth__introspection__url`).
        let set_by_dev = |k: &str| key == k || key.starts_with(&format!("{k}__"));
        if let Some((_, used)) = SET_BY_DEV.iter().find(|(k, _)| set_by_dev(k)) {
            bail!("dev does not use {var} (a serve setting): {used}. Unset {var} to run dev.");
        }
    }
    Ok(())
}
