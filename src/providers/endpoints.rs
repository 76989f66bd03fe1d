//! One OAuth connection's endpoints, built from its parameters: the
//! authorize, token, refresh, revocation, identity and API base URLs of a
//! Microsoft tenant, a Zendesk subdomain or a Salesforce org. Every value
//! is checked against its parameter and every URL as a whole (`check_url`)
//! each time one is built, so a stored value that no longer passes (an
//! operator narrowed `allowed_hosts`) is never called.

use std::collections::BTreeMap;

use url::Url;

use super::{FormProblem, Provider, ProviderError, template};

/// The endpoints an OAuth connection calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Authorize,
    Token,
    Refresh,
    Revocation,
    Userinfo,
    ApiBase,
}

const ALL: [Endpoint; 6] = [
    Endpoint::Authorize,
    Endpoint::Token,
    Endpoint::Refresh,
    Endpoint::Revocation,
    Endpoint::Userinfo,
    Endpoint::ApiBase,
];

impl Provider {
    /// The URL of `which` for a connection with these parameters; `None`
    /// when the entry has no such endpoint. Without parameters, the one the
    /// catalog resolved at start-up.
    pub fn url_for(
        &self,
        which: Endpoint,
        params: &BTreeMap<String, String>,
    ) -> Result<Option<Url>, ProviderError> {
        let t = &self.templates;
        let (fixed, template) = match which {
            Endpoint::Authorize => (&self.authorize_url, &t.authorize),
            Endpoint::Token => (&self.token_url, &t.token),
            Endpoint::Refresh => (
                &self.refresh_url,
                if t.refresh.is_some() {
                    &t.refresh
                } else {
                    &t.token
                },
            ),
            Endpoint::Revocation => (&self.revocation_url, &t.revocation),
            Endpoint::Userinfo => (&self.userinfo_url, &t.userinfo),
            Endpoint::ApiBase => (&self.api_base_url, &t.api_base),
        };
        if params.is_empty()
            && let Some(url) = fixed
        {
            return Ok(Some(url.clone()));
        }
        let Some(template) = template else {
            return Ok(None);
        };
        let values = self.values_with(params, None)?;
        let mut url = self.filled(template, &values)?;
        if which == Endpoint::ApiBase && !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        Ok(Some(url))
    }

    /// What the consent page of an OAuth provider posted, checked: each
    /// asked parameter against its pattern (an empty one takes its
    /// default), then every URL they make that does not wait for a learned
    /// value, against the SSRF guard. Nothing is sent.
    pub fn check_connect_params(
        &self,
        given: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, Vec<FormProblem>> {
        let mut problems = Vec::new();
        let checked = self.check_asked_params(given, &mut problems);
        if !problems.is_empty() {
            return Err(problems);
        }
        for which in ALL {
            if self.waits_for_learned(which) {
                continue;
            }
            if let Err(e) = self.url_for(which, &checked) {
                return Err(vec![FormProblem::unreachable(&e)]);
            }
        }
        Ok(checked)
    }

    /// Whether the template of `which` names a value only consent tells.
    fn waits_for_learned(&self, which: Endpoint) -> bool {
        let t = &self.templates;
        let template = match which {
            Endpoint::Authorize => &t.authorize,
            Endpoint::Token => &t.token,
            Endpoint::Refresh => &t.refresh,
            Endpoint::Revocation => &t.revocation,
            Endpoint::Userinfo => &t.userinfo,
            Endpoint::ApiBase => &t.api_base,
        };
        let names = template
            .as_deref()
            .and_then(|t| template::names(t).ok())
            .unwrap_or_default();
        names.iter().any(|name| {
            self.param_specs
                .get(*name)
                .is_some_and(|spec| spec.source.is_some())
        })
    }
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
