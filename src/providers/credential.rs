//! API-key and Basic credentials: the fields an entry names (`[fields.*]`)
//! and the parameters it asks (`[params.*]`), checked against their
//! patterns before anything is sent, then kept as one secret (the fields
//! as a JSON object) that the vault seals like a token. Messages name the
//! field and never quote what the user typed.

use std::collections::BTreeMap;

use secrecy::{ExposeSecret, SecretString};

use super::{
    Provider, ProviderError,
    template::{self, Pattern},
};

/// An API-key or Basic credential: each field of the entry by name.
pub struct FieldCredential {
    fields: BTreeMap<String, SecretString>,
}

impl std::fmt::Debug for FieldCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FieldCredential")
            .field("fields", &self.fields.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl FieldCredential {
    /// The credential as the one secret the vault seals.
    pub fn to_secret(&self) -> SecretString {
        let object: serde_json::Map<String, serde_json::Value> = self
            .fields
            .iter()
            .map(|(name, value)| (name.clone(), value.expose_secret().into()))
            .collect();
        SecretString::from(serde_json::Value::Object(object).to_string())
    }

    /// Reads back what [`Self::to_secret`] wrote.
    pub(super) fn from_secret(text: &str) -> Result<Self, ProviderError> {
        let unreadable = || ProviderError::UnreadableCredential("it is not a set of fields");
        let map: BTreeMap<String, String> = serde_json::from_str(text).map_err(|_| unreadable())?;
        Ok(Self {
            fields: map
                .into_iter()
                .map(|(k, v)| (k, SecretString::from(v)))
                .collect(),
        })
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(|v| v.expose_secret())
    }
}

/// A field the connect page asks for.
#[derive(Debug, Clone)]
pub struct CredentialField {
    /// The field's name in the entry (`api_key`).
    pub name: String,
    pub label: String,
    /// Typed into a password input, never shown again.
    pub secret: bool,
}

/// A value on the connect page that was refused: which input and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormProblem {
    /// The field's or parameter's name; empty for the form as a whole.
    pub name: String,
    /// What the page calls it.
    pub label: String,
    pub message: String,
}

/// What the connect page submitted, checked: the credential and the
/// connection's parameters.
#[derive(Debug)]
pub struct CheckedCredential {
    pub credential: FieldCredential,
    pub params: BTreeMap<String, String>,
}

impl Provider {
    /// The credential's fields, in the entry's order (by name).
    pub fn credential_fields(&self) -> Vec<CredentialField> {
        self.field_specs
            .iter()
            .map(|(name, spec)| CredentialField {
                name: name.clone(),
                label: spec.label.clone().unwrap_or_else(|| name.clone()),
                secret: spec.secret != Some(false),
            })
            .collect()
    }

    /// Where the user creates the key.
    pub fn key_url(&self) -> Option<&str> {
        self.key_url.as_deref()
    }

    /// What the connect page tells the user about the credential.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// Checks what the user typed on the connect page: each field against
    /// its pattern, each asked parameter against its own (an empty one
    /// takes its default), and the URLs they make against the SSRF guard.
    /// Nothing is sent; every problem is named, none quotes a value.
    pub fn check_credential_form(
        &self,
        fields: &BTreeMap<String, String>,
        params: &BTreeMap<String, String>,
    ) -> Result<CheckedCredential, Vec<FormProblem>> {
        let mut problems = Vec::new();
        let checked_params = self.check_asked_params(params, &mut problems);
        let mut values = BTreeMap::new();
        for field in self.credential_fields() {
            let spec = &self.field_specs[&field.name];
            // Keys are pasted: surrounding blanks are never part of them.
            let value = fields
                .get(&field.name)
                .map(|v| v.trim())
                .unwrap_or_default();
            let problem = |message: String| FormProblem {
                name: field.name.clone(),
                label: field.label.clone(),
                message,
            };
            if value.is_empty() {
                problems.push(problem("is required.".into()));
                continue;
            }
            if !spec.pattern.as_ref().is_some_and(|p| p.matches(value)) {
                problems.push(problem(not_in_form(spec.pattern.as_ref())));
                continue;
            }
            values.insert(field.name.clone(), SecretString::from(value.to_owned()));
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let credential = FieldCredential { fields: values };
        // Every URL the connection will call, built now: the same guard
        // refuses a templated host here that would be refused on use.
        if let Err(e) = self.endpoints_with(&checked_params, Some(&credential)) {
            return Err(vec![FormProblem::unreachable(&e)]);
        }
        Ok(CheckedCredential {
            credential,
            params: checked_params,
        })
    }

    /// The asked parameters as the page posted them, each checked against
    /// its pattern (an empty one takes its default); a problem per value
    /// refused, none quoting it.
    pub(super) fn check_asked_params(
        &self,
        params: &BTreeMap<String, String>,
        problems: &mut Vec<FormProblem>,
    ) -> BTreeMap<String, String> {
        let mut checked = BTreeMap::new();
        for (name, label, default) in self.asked_params() {
            let given = params.get(name).map(|v| v.trim()).unwrap_or_default();
            let value = match (given, default) {
                ("", Some(default)) => default,
                (given, _) => given,
            };
            let problem = |message: String| FormProblem {
                name: name.to_owned(),
                label: label.to_owned(),
                message,
            };
            if value.is_empty() {
                problems.push(problem("is required.".into()));
                continue;
            }
            let Some(spec) = self.param_specs.get(name) else {
                continue;
            };
            match template::check_value(name, spec, value) {
                Ok(value) => {
                    checked.insert(name.to_owned(), value);
                }
                Err(_) if spec.kind.as_deref() == Some("url") && value.contains('\\') => {
                    problems.push(problem("must not contain a backslash.".into()));
                }
                Err(_) if spec.kind.as_deref() == Some("url") => {
                    let hosts = spec.allowed_hosts.as_deref().unwrap_or_default().join(", ");
                    problems.push(problem(format!(
                        "must be an https address on a host this server allows ({hosts})."
                    )));
                }
                Err(_) => problems.push(problem(not_in_form(spec.pattern.as_ref()))),
            }
        }
        checked
    }

    /// The last four characters of the credential's first secret field,
    /// after an ellipsis: how pages tell one key from another.
    pub fn credential_hint(&self, credential: &FieldCredential) -> String {
        let tail: String = self
            .primary_secret(credential)
            .chars()
            .rev()
            .take(4)
            .collect();
        format!("…{}", tail.chars().rev().collect::<String>())
    }

    /// The first secret field's value (empty when there is none).
    pub(super) fn primary_secret<'c>(&self, credential: &'c FieldCredential) -> &'c str {
        self.credential_fields()
            .iter()
            .find(|f| f.secret)
            .and_then(|f| credential.get(&f.name))
            .unwrap_or_default()
    }
}

impl FormProblem {
    /// The values make a URL the SSRF guard refuses.
    pub(super) fn unreachable(e: &ProviderError) -> Self {
        Self {
            name: String::new(),
            label: String::new(),
            message: format!("These values make an address this server will not call ({e})."),
        }
    }
}

fn not_in_form(pattern: Option<&Pattern>) -> String {
    match pattern {
        Some(p) => format!(
            "is not in the expected form (it must match {}).",
            p.as_str()
        ),
        None => "is not in the expected form.".into(),
    }
}

#[cfg(test)]
#[path = "credential_tests.rs"]
mod tests;
