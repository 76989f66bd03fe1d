//! Ending a token at the provider: RFC 7009 revocation, and the shapes
//! providers use instead (`entry::Revocation`).

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use url::Url;

use super::{
    Endpoint, Provider, ProviderError, TokenHint,
    entry::Revocation,
    http::read_all,
    oauth::{MAX_ANSWER_BYTES, TIMEOUT},
    token_answer,
};
use crate::metrics::Call;

impl Provider {
    /// Revokes a token upstream (RFC 7009, or the entry's own shape), at
    /// the endpoint the connection's `params` make. A token the provider
    /// no longer knows counts as revoked: that is the state the caller
    /// wants.
    pub async fn revoke(
        &self,
        http: &reqwest::Client,
        token: &str,
        hint: TokenHint,
        params: &BTreeMap<String, String>,
    ) -> Result<(), ProviderError> {
        let url = self
            .url_for(Endpoint::Revocation, params)?
            .ok_or(ProviderError::Unsupported("token revocation"))?;
        let request = self.revocation_request(http, &url, token, hint)?;
        let (mut response, mut timer) = self.send(Call::Revoke, request).await?;
        let status = response.status().as_u16();
        let body = read_all(&mut response, MAX_ANSWER_BYTES, &mut timer).await?;
        timer.finish();
        // RFC 7009 promises no body; an error, if any, is RFC 6749 JSON.
        let fields = match serde_json::from_slice(&body) {
            Ok(Value::Object(map)) => map,
            _ => Default::default(),
        };
        let error = fields.get("error").and_then(Value::as_str);
        let slack_failed = self.quirks.ok_envelope && fields.get("ok") == Some(&Value::Bool(false));
        let outcome = match error {
            // Google answers an unknown or already revoked token this way.
            Some("invalid_token") => Ok(()),
            _ if self.no_longer_known(status, &fields) => Ok(()),
            Some(code) => Err(token_answer::oauth_error(
                code,
                fields.get("error_description"),
                &[token, self.secret()],
            )),
            None if slack_failed => Err(ProviderError::Rejected {
                error: "unknown_error".into(),
                description: None,
            }),
            None if (200..300).contains(&status) => Ok(()),
            None => Err(ProviderError::Status(status)),
        };
        let outcome = match outcome {
            Err(e) if self.may_be_ended_already(status) => {
                self.unless_unknown(http, &url, token, e).await
            }
            other => other,
        };
        match &outcome {
            Ok(()) => tracing::info!(provider = %self.name, status, "token revoked upstream"),
            Err(e) => {
                tracing::warn!(provider = %self.name, status, error = %e, "revocation failed")
            }
        }
        outcome
    }

    /// The request that revokes `token` at `url`, in the entry's shape.
    fn revocation_request(
        &self,
        http: &reqwest::Client,
        url: &Url,
        token: &str,
        hint: TokenHint,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        Ok(match self.quirks.revocation {
            Revocation::Rfc7009 => {
                let form = vec![("token", token), ("token_type_hint", hint.as_str())];
                self.authenticated_post(http, url, form)
            }
            Revocation::BearerAccessToken if hint == TokenHint::AccessToken => {
                // No body at all: Dropbox refuses an empty JSON body.
                let (request, _) = self.authorized(http, reqwest::Method::POST, url.clone(), token);
                request.timeout(TIMEOUT)
            }
            Revocation::AccessTokenOnly if hint == TokenHint::AccessToken => self
                .authenticated_post(http, url, vec![("token", token)])
                .headers(self.api_header_map()),
            Revocation::DeleteJsonAccessToken if hint == TokenHint::AccessToken => {
                self.app_token_request(http, reqwest::Method::DELETE, url.clone(), token)
            }
            Revocation::BearerAccessToken
            | Revocation::AccessTokenOnly
            | Revocation::DeleteJsonAccessToken => {
                return Err(ProviderError::Unsupported(
                    "revoking a refresh token on its own",
                ));
            }
        })
    }

    /// Whether an answer of a revocation shape other than RFC 7009's says
    /// the token is unknown there, that is already ended (a revocation
    /// tried again after one whose answer was lost): Dropbox answers 401
    /// `invalid_access_token` (not `expired_access_token`, which is a
    /// live grant's token that has expired). GitHub's 422 is not read so
    /// on its own: its reference gives it for a token it does not know and
    /// for "the endpoint has been spammed" alike, so `revoke` asks GitHub's
    /// check of the token then ([`Self::may_be_ended_already`]).
    fn no_longer_known(&self, status: u16, fields: &serde_json::Map<String, Value>) -> bool {
        match self.quirks.revocation {
            Revocation::BearerAccessToken => {
                status == 401
                    && fields
                        .get("error")
                        .and_then(|e| e.get(".tag"))
                        .and_then(Value::as_str)
                        == Some("invalid_access_token")
            }
            Revocation::Rfc7009
            | Revocation::AccessTokenOnly
            | Revocation::DeleteJsonAccessToken => false,
        }
    }

    /// Whether a failed revocation's `status` may be a token already
    /// ended, which only a second question can tell: GitHub's reference
    /// gives its deletion's 422 for a token it does not know (as when an
    /// earlier deletion's answer was lost) and for "the endpoint has been
    /// spammed" alike.
    fn may_be_ended_already(&self, status: u16) -> bool {
        self.quirks.revocation == Revocation::DeleteJsonAccessToken && status == 422
    }

    /// The deletion's `failure`, unless GitHub's "Check a token" answers
    /// 404, its word for a token it does not know: the token is already
    /// ended, which is what the deletion wanted. Any other answer (200 for
    /// a live token, 422 again for a flooded endpoint, none at all) leaves
    /// the deletion's own failure standing; the check's error is never
    /// returned, as it would hide why the deletion failed.
    async fn unless_unknown(
        &self,
        http: &reqwest::Client,
        url: &Url,
        token: &str,
        failure: ProviderError,
    ) -> Result<(), ProviderError> {
        match self.check_status(http, url, token).await {
            Some(404) => {
                tracing::info!(provider = %self.name, "token already deleted upstream");
                Ok(())
            }
            status => {
                tracing::debug!(provider = %self.name, ?status, "token check after a 422");
                Err(failure)
            }
        }
    }

    /// The status of GitHub's "Check a token" for `token` (a POST to
    /// [`check_url`], with the deletion's client authentication and
    /// headers), `None` when no whole answer came or there is no check to
    /// ask. Bounded and counted as the deletion is.
    async fn check_status(&self, http: &reqwest::Client, url: &Url, token: &str) -> Option<u16> {
        let url = check_url(url)?;
        let request = self.app_token_request(http, reqwest::Method::POST, url, token);
        let (mut response, mut timer) = self.send(Call::TokenCheck, request).await.ok()?;
        let status = response.status().as_u16();
        read_all(&mut response, MAX_ANSWER_BYTES, &mut timer)
            .await
            .ok()?;
        timer.finish();
        Some(status)
    }

    /// A request to GitHub's `/applications/{client_id}/…` about `token`
    /// (its deletion, its check): the client as HTTP Basic, the API's
    /// headers, the token in a JSON body.
    fn app_token_request(
        &self,
        http: &reqwest::Client,
        method: reqwest::Method,
        url: Url,
        token: &str,
    ) -> reqwest::RequestBuilder {
        http.request(method, url)
            .basic_auth(&self.client_id, Some(self.secret()))
            .headers(self.api_header_map())
            .json(&serde_json::json!({ "access_token": token }))
            .timeout(TIMEOUT)
    }

    /// Whether revoking one token may end every token of the person's grant
    /// to this client, those of a connection made since included: RFC
    /// 7009 lets a server do so (Google does), and Notion's revocation
    /// ends the integration's access. GitHub's deletion of a token ends the
    /// one token it is sent (its deletion of the grant, where configured,
    /// every one), Dropbox's the token's own refresh token and its access
    /// tokens.
    pub fn revocation_may_end_the_grant(&self) -> bool {
        match self.quirks.revocation {
            Revocation::Rfc7009 | Revocation::AccessTokenOnly => true,
            Revocation::BearerAccessToken => false,
            // Unless configured as GitHub's deletion of the whole grant
            // (`…/grant`), which ends every token of the app for the user.
            Revocation::DeleteJsonAccessToken => {
                self.templates.revocation.as_deref().is_some_and(|t| {
                    let path = t.split(['?', '#']).next().unwrap_or_default();
                    path.trim_end_matches('/').ends_with("/grant")
                })
            }
        }
    }

    /// The API's headers, to replace those of the same name (`Accept`)
    /// rather than add a second.
    fn api_header_map(&self) -> HeaderMap {
        self.quirks
            .api_headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_str(value).ok()?,
                ))
            })
            .collect()
    }
}

/// Where GitHub's "Check a token" is, beside the deletion's `url`: that
/// same `/applications/{client_id}/token` for a token's deletion, and its
/// sibling for a grant's (`…/grant`, which an operator may configure
/// instead): GitHub serves no POST there, and its 404 for any token would
/// pass every flooded deletion for done. `None` for another path, which
/// GitHub's reference does not describe: the 422 stands.
fn check_url(url: &Url) -> Option<Url> {
    match url.path_segments()?.next_back()? {
        "token" => Some(url.clone()),
        "grant" => {
            let mut check = url.clone();
            check.path_segments_mut().ok()?.pop().push("token");
            Some(check)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "revoke_tests.rs"]
mod tests;
