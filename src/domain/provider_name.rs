//! [`ProviderName`]: the name settings give a provider (`github`, `work`),
//! checked once where it enters — settings, a tool's arguments, a form, a
//! stored row — and trusted after. Stored and sent as plain text.

use std::{borrow::Borrow, fmt, ops::Deref};

use serde::{Deserialize, Serialize};
use sqlx::{
    Decode, Encode, Postgres, Type,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
};

use crate::config::is_valid_name;

/// A provider name that passed [`is_valid_name`]: 1 to 32 lowercase
/// letters, digits, `-` or `_`. Reads as a `&str` wherever one is wanted.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProviderName(String);

/// A string that is not a provider name (the message names the rule, not
/// the value: it may be anything a client sent).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a provider name is 1 to 32 lowercase letters, digits, '-' or '_'")]
pub struct InvalidProviderName;

impl ProviderName {
    /// The name, if `name` is one.
    pub fn parse(name: impl Into<String>) -> Result<Self, InvalidProviderName> {
        let name = name.into();
        if is_valid_name(&name) {
            Ok(Self(name))
        } else {
            Err(InvalidProviderName)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ProviderName {
    type Error = InvalidProviderName;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::parse(name)
    }
}

impl From<ProviderName> for String {
    fn from(name: ProviderName) -> Self {
        name.0
    }
}

impl Deref for ProviderName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ProviderName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// So a map keyed by names can be searched with a `&str`.
impl Borrow<str> for ProviderName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ProviderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl PartialEq<str> for ProviderName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ProviderName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Stored as `text`.
impl Type<Postgres> for ProviderName {
    fn type_info() -> PgTypeInfo {
        <String as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <String as Type<Postgres>>::compatible(ty)
    }
}

impl Encode<'_, Postgres> for ProviderName {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as Encode<Postgres>>::encode(self.as_str(), buf)
    }
}

/// A stored name is parsed like any other: a row that breaks the rule is
/// an error, not a name.
impl<'r> Decode<'r, Postgres> for ProviderName {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let name = <String as Decode<Postgres>>::decode(value)?;
        Ok(Self::parse(name)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_names_parse() {
        assert_eq!(ProviderName::parse("git-hub_2").unwrap(), "git-hub_2");
        for bad in ["", "GitHub", "a b", "../x", &"x".repeat(33)] {
            assert_eq!(
                ProviderName::parse(bad),
                Err(InvalidProviderName),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn serde_reads_and_writes_plain_text_and_refuses_a_bad_name() {
        let name: ProviderName = serde_json::from_str("\"demo\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"demo\"");
        assert!(serde_json::from_str::<ProviderName>("\"De Mo\"").is_err());
    }
}
