//! Ending a token at the provider: RFC 7009 revocation, and the shapes
//! providers use instead (`entry::Revocation`).

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

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
        let request = match self.quirks.revocation {
            Revocation::Rfc7009 => {
                let form = vec![("token", token), ("token_type_hint", hint.as_str())];
                self.authenticated_post(http, &url, form)
            }
            Revocation::BearerAccessToken if hint == TokenHint::AccessToken => {
                // No body at all: Dropbox refuses an empty JSON body.
                let (request, _) = self.authorized(http, reqwest::Method::POST, url, token);
                request.timeout(TIMEOUT)
            }
            Revocation::AccessTokenOnly if hint == TokenHint::AccessToken => self
                .authenticated_post(http, &url, vec![("token", token)])
                .headers(self.api_header_map()),
            Revocation::DeleteJsonAccessToken if hint == TokenHint::AccessToken => http
                .delete(url)
                .basic_auth(&self.client_id, Some(self.secret()))
                .headers(self.api_header_map())
                .json(&serde_json::json!({ "access_token": token }))
                .timeout(TIMEOUT),
            Revocation::BearerAccessToken
            | Revocation::AccessTokenOnly
            | Revocation::DeleteJsonAccessToken => {
                return Err(ProviderError::Unsupported(
                    "revoking a refresh token on its own",
                ));
            }
        };
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
        match &outcome {
            Ok(()) => tracing::info!(provider = %self.name, status, "token revoked upstream"),
            Err(e) => {
                tracing::warn!(provider = %self.name, status, error = %e, "revocation failed")
            }
        }
        outcome
    }

    /// Whether an answer of a revocation shape other than RFC 7009's says
    /// the token is unknown there, that is already ended (a revocation
    /// tried again after one whose answer was lost): Dropbox answers 401
    /// `invalid_access_token` (not `expired_access_token`, which is a
    /// live grant's token that has expired). GitHub's 422 is not read so:
    /// its reference gives it for a token it does not know and for "the
    /// endpoint has been spammed" alike.
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

    /// Whether revoking one token may end every token of the person's grant
    /// to this client, those of a connection made since included: RFC
    /// 7009 lets a server do so (Google does), and Notion's revocation
    /// ends the integration's access. GitHub's deletion ends the one token
    /// it is sent, Dropbox's the token's own refresh token and its access
    /// tokens.
    pub fn revocation_may_end_the_grant(&self) -> bool {
        match self.quirks.revocation {
            Revocation::Rfc7009 | Revocation::AccessTokenOnly => true,
            Revocation::BearerAccessToken | Revocation::DeleteJsonAccessToken => false,
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
