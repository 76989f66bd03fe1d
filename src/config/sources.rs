//! Loading: the code-supplied base table, then the TOML file, then the
//! environment, merged into one table and deserialized into [`Settings`].
//! Deserialization errors are reworded here so they name the setting and the
//! variable that sets it.

use std::path::Path;

use super::{
    ConfigError, ENV_PREFIX, Settings,
    env::{env_entries, env_name},
};

impl Settings {
    /// Loads settings from the optional file and the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let vars: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                k.starts_with(ENV_PREFIX).then_some((k, v))
            })
            .map(|(k, v)| match v.into_string() {
                Ok(v) => Ok((k, v)),
                Err(_) => Err(ConfigError::NotUnicode { var: k }),
            })
            .collect::<Result<_, _>>()?;
        Self::from_sources(file, vars, toml::Table::new())
    }

    /// Layers `base` (code-supplied values, e.g. dev mode's), then the file,
    /// then the given environment, and validates the result.
    pub fn from_sources(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        base: toml::Table,
    ) -> Result<Self, ConfigError> {
        let mut table = base;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
                path: path.display().to_string(),
                source,
            })?;
            let file_table: toml::Table =
                text.parse()
                    .map_err(|e: toml::de::Error| ConfigError::Toml {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
            merge(&mut table, file_table);
        }
        for (key_path, value) in env_entries(env)? {
            insert_path(&mut table, &key_path, toml::Value::String(value));
        }
        // Present the required table so a missing key inside it is named precisely.
        table
            .entry("auth")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let mut settings: Settings = deserialize(table)?;
        settings.validate()?;
        settings.mcp_resource = settings.mcp_resource();
        Ok(settings)
    }
}

fn insert_path(table: &mut toml::Table, path: &[String], value: toml::Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = table;
    for key in parents {
        let entry = current
            .entry(key.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        current = next;
    }
    current.insert(last.clone(), value);
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn deserialize(table: toml::Table) -> Result<Settings, ConfigError> {
    let value = toml::Value::Table(table);
    serde_path_to_error::deserialize(value).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde names a missing field only in its message; lift it into the key.
        if let Some(field) = inner
            .strip_prefix("missing field `")
            .and_then(|s| s.split('`').next())
        {
            let key = if key == "." {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            };
            return ConfigError::Missing {
                env: env_name(&key),
                key,
            };
        }
        if let Some(field) = inner
            .strip_prefix("unknown field `")
            .and_then(|s| s.split('`').next())
        {
            let key = if key == "." {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            };
            return ConfigError::Invalid {
                message: format!("unknown setting (from the file, or {})", env_name(&key)),
                key,
            };
        }
        ConfigError::Invalid {
            key,
            message: inner,
        }
    })
}
