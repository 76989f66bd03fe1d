//! Deserializers that accept both native TOML values and the strings that
//! environment variables always are.

use secrecy::SecretString;
use serde::{Deserialize, Deserializer, de::Error as _};

#[derive(Deserialize)]
#[serde(untagged)]
enum StrOr<T> {
    Native(T),
    Str(String),
}

pub fn number<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + std::str::FromStr,
{
    // An untagged enum's own failure says only that no variant matched: a
    // negative number for an unsigned setting, a float, a table.
    let value = StrOr::<T>::deserialize(d)
        .map_err(|_| D::Error::custom("expected a whole number in the setting's range"))?;
    match value {
        StrOr::Native(n) => Ok(n),
        StrOr::Str(s) => s
            .trim()
            .parse()
            .map_err(|_| D::Error::custom(format!("expected a whole number, got {s:?}"))),
    }
}

pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let value =
        StrOr::<bool>::deserialize(d).map_err(|_| D::Error::custom("expected true or false"))?;
    match value {
        StrOr::Native(b) => Ok(b),
        StrOr::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" | "" => Ok(false),
            _ => Err(D::Error::custom(format!(
                "expected true or false, got {s:?}"
            ))),
        },
    }
}

pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    boolean(d).map(Some)
}

/// A list: a TOML array, or a comma-separated string.
pub fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let value = StrOr::<Vec<String>>::deserialize(d).map_err(|_| {
        D::Error::custom("expected a list: an array of strings, or a comma-separated string")
    })?;
    Ok(match value {
        StrOr::Native(v) => v,
        StrOr::Str(s) => parse_list(&s),
    })
}

pub fn opt_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    list(d).map(Some)
}

pub fn opt_number<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + std::str::FromStr,
{
    number(d).map(Some)
}

pub fn secret_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SecretString>, D::Error> {
    Ok(list(d)?.into_iter().map(SecretString::from).collect())
}

/// Builds a list setting from a string the way the environment does.
pub fn parse_list(s: &str) -> Vec<String> {
    s.split([',', '\n'])
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}
