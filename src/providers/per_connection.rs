//! Per-connection parameters: values a user gives on the connect page
//! (a Zendesk subdomain, a Microsoft tenant) or the provider tells after
//! consent (Salesforce's `instance_url` in the token answer, Atlassian's
//! cloud id from a lookup). Every value is checked against its parameter
//! before any URL is built from it, and every URL built is checked again
//! as a whole: this is the SSRF guard of templated endpoints.

use std::{collections::BTreeMap, time::Duration};

use serde_json::Value;
use url::Url;

use super::{Provider, ProviderError, credential::FieldCredential, http::read_all, template};
use crate::metrics::Call;

const LOOKUP_TIMEOUT: Duration = Duration::from_secs(15);
const MAX_LOOKUP_BYTES: usize = 256 * 1024;

/// One connection's endpoints, its parameters filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionEndpoints {
    pub authorize: Option<Url>,
    pub token: Option<Url>,
    /// Where a refresh goes, when not to `token`.
    pub refresh: Option<Url>,
    pub revocation: Option<Url>,
    pub userinfo: Url,
    /// Ends with `/`.
    pub api_base: Url,
}

impl Provider {
    /// The parameters the connect page asks the user for: `(name, label,
    /// default)`. Learned ones are not asked.
    pub fn asked_params(&self) -> Vec<(&str, &str, Option<&str>)> {
        self.param_specs
            .iter()
            .filter(|(_, spec)| spec.source.is_none())
            .map(|(name, spec)| {
                let label = spec.label.as_deref().unwrap_or(name);
                (name.as_str(), label, spec.default.as_deref())
            })
            .collect()
    }

    /// The endpoints of a connection with these parameter values. Refuses,
    /// before anything is sent, a value that does not match its pattern, a
    /// URL value on a host the operator did not allow, an undeclared
    /// parameter, and a URL that is not https.
    pub fn endpoints_for(
        &self,
        given: &BTreeMap<String, String>,
    ) -> Result<ConnectionEndpoints, ProviderError> {
        self.endpoints_with(given, None)
    }

    /// [`Self::endpoints_for`], with the non-secret fields of an API-key or
    /// Basic credential (a Twilio account SID) as values too, each checked
    /// against its field's pattern. Secret fields never reach a URL.
    pub(super) fn endpoints_with(
        &self,
        given: &BTreeMap<String, String>,
        credential: Option<&FieldCredential>,
    ) -> Result<ConnectionEndpoints, ProviderError> {
        let values = self.values_with(given, credential)?;
        let url = |template: &Option<String>| -> Result<Option<Url>, ProviderError> {
            template
                .as_deref()
                .map(|t| self.filled(t, &values))
                .transpose()
        };
        let t = &self.templates;
        let missing =
            || ProviderError::SettingsRefused("the provider's entry lacks an endpoint".into());
        let mut api_base = url(&t.api_base)?.ok_or_else(missing)?;
        if !api_base.path().ends_with('/') {
            let path = format!("{}/", api_base.path());
            api_base.set_path(&path);
        }
        Ok(ConnectionEndpoints {
            authorize: url(&t.authorize)?,
            token: url(&t.token)?,
            refresh: url(&t.refresh)?,
            revocation: url(&t.revocation)?,
            userinfo: url(&t.userinfo)?.ok_or_else(missing)?,
            api_base,
        })
    }

    /// The values templates are filled with: the built-in ones and the
    /// operator's defaults, then `given` (each checked against its
    /// parameter) and the credential's non-secret fields (each checked
    /// against its field's pattern). Secret fields never reach a URL.
    pub(super) fn values_with(
        &self,
        given: &BTreeMap<String, String>,
        credential: Option<&FieldCredential>,
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        let refused = |m: String| ProviderError::SettingsRefused(m);
        let mut values = self.fixed_values.clone();
        for (name, value) in given {
            let spec = self
                .param_specs
                .get(name)
                .ok_or_else(|| refused(format!("`{name}` is not a parameter of this provider")))?;
            let checked = template::check_value(name, spec, value).map_err(refused)?;
            values.insert(name.clone(), checked);
        }
        let identifiers = self
            .field_specs
            .iter()
            .filter(|(_, spec)| spec.secret == Some(false));
        for (name, spec) in identifiers {
            let Some(value) = credential.and_then(|c| c.get(name)) else {
                continue;
            };
            let checked =
                template::check_text(name, spec.pattern.as_ref(), value).map_err(refused)?;
            values.insert(name.clone(), checked);
        }
        Ok(values)
    }

    /// `template` filled with checked `values`, as a URL credentials may
    /// travel to (`check_url`).
    pub(super) fn filled(
        &self,
        template: &str,
        values: &BTreeMap<String, String>,
    ) -> Result<Url, ProviderError> {
        let refused = |m: String| ProviderError::SettingsRefused(m);
        let text = template::fill(template, values).map_err(refused)?;
        let url = Url::parse(&text).map_err(|_| refused("a templated URL is invalid".into()))?;
        super::catalog::check_url(&url).map_err(refused)?;
        Ok(url)
    }

    /// The values the entry learns from a token answer, each checked
    /// against its pattern; one that is absent or does not match refuses
    /// the answer (it would otherwise steer API calls).
    pub(super) fn learned_from_token_answer(
        &self,
        answer: &Value,
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        self.learn(answer, "token_response")
    }

    /// Values the entry learns by a lookup after consent (Atlassian's cloud
    /// id from its accessible resources), each checked against its pattern.
    pub async fn lookup_params(
        &self,
        http: &reqwest::Client,
        access_token: &str,
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        let mut out = BTreeMap::new();
        for (name, spec) in &self.param_specs {
            let (Some("lookup"), Some(lookup)) = (spec.source.as_deref(), &spec.lookup_url) else {
                continue;
            };
            let url = Url::parse(lookup)
                .map_err(|_| ProviderError::BadResponse("the lookup URL is invalid".into()))?;
            super::catalog::check_url(&url).map_err(ProviderError::RequestRefused)?;
            let (request, _) = self.authorized(http, reqwest::Method::GET, url, access_token);
            let request = request.timeout(LOOKUP_TIMEOUT);
            let (mut response, mut timer) = self.send(Call::Lookup, request).await?;
            let status = response.status().as_u16();
            if status == 401 {
                return Err(ProviderError::Denied("HTTP 401".into()));
            }
            if !(200..300).contains(&status) {
                return Err(ProviderError::Status(status));
            }
            let body = read_all(&mut response, MAX_LOOKUP_BYTES, &mut timer).await?;
            timer.finish();
            let answer: Value = serde_json::from_slice(&body)
                .map_err(|_| ProviderError::BadResponse("the lookup answer is not JSON".into()))?;
            out.insert(name.clone(), self.learned_value(name, &answer)?);
        }
        Ok(out)
    }

    fn learn(
        &self,
        answer: &Value,
        source: &str,
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        self.param_specs
            .iter()
            .filter(|(_, spec)| spec.source.as_deref() == Some(source))
            .map(|(name, _)| Ok((name.clone(), self.learned_value(name, answer)?)))
            .collect()
    }

    /// The values a refresh answer tells again (Salesforce may move an org
    /// to another host): `stored` with each one present in `answer` that
    /// matches its parameter; one that does not is refused, keeping the
    /// stored value, and comes back as its error. Absent ones keep theirs.
    pub(super) fn relearned(
        &self,
        answer: &Value,
        stored: &BTreeMap<String, String>,
    ) -> (BTreeMap<String, String>, Vec<ProviderError>) {
        let mut params = stored.clone();
        let mut refused = Vec::new();
        let told = self.param_specs.iter().filter(|(_, spec)| {
            spec.source.as_deref() == Some("token_response")
                && answer
                    .pointer(spec.pointer.as_deref().unwrap_or_default())
                    .is_some()
        });
        for (name, _) in told {
            match self.learned_value(name, answer) {
                Ok(value) => {
                    params.insert(name.clone(), value);
                }
                Err(e) => refused.push(e),
            }
        }
        (params, refused)
    }

    fn learned_value(&self, name: &str, answer: &Value) -> Result<String, ProviderError> {
        let spec = self
            .param_specs
            .get(name)
            .ok_or_else(|| ProviderError::BadResponse(format!("no parameter `{name}`")))?;
        let unaccepted = |why: String| ProviderError::Unaccepted {
            label: spec.label.clone().unwrap_or_else(|| name.to_owned()),
            why,
        };
        let pointer = spec.pointer.as_deref().unwrap_or_default();
        let value = answer
            .pointer(pointer)
            .and_then(Value::as_str)
            .ok_or_else(|| unaccepted(format!("the answer has no `{pointer}` for `{name}`")))?;
        template::check_value(name, spec, value).map_err(unaccepted)
    }
}

#[cfg(test)]
#[path = "per_connection_tests.rs"]
mod tests;
