//! API calls as the user (`api_request` tool): guarded by `guard`, sent with
//! the credential as the entry presents it, never redirected, and read up to the provider's
//! `max_response_bytes`. The answer goes to a model, so every secret of the
//! connection is redacted from it should the provider echo one back.

use reqwest::header::LOCATION;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use std::collections::BTreeMap;

use super::{
    ApiRequest, ApiResponse, Credential, Provider, ProviderError,
    credential::FieldCredential,
    entry::ApiPathRules,
    error::clean_code,
    guard,
    http::{is_json, media_type_as_sent, read_bounded},
    identity::SLACK_TOKEN_ERRORS,
    redact::Redactor,
};
use crate::metrics::Call;

impl Provider {
    /// Calls the provider's API as the user. Refuses, before sending, a path
    /// outside the API base URL, a method the provider does not allow, query
    /// values other than scalars and a body on a method that takes none.
    /// Any HTTP status comes back as an [`ApiResponse`]; a redirect is
    /// reported, not followed. `access_token`, `refresh_token` and the
    /// client secret never appear in the answer, in any encoding.
    pub async fn api_request(
        &self,
        http: &reqwest::Client,
        access_token: &str,
        refresh_token: Option<&str>,
        req: &ApiRequest,
    ) -> Result<ApiResponse, ProviderError> {
        static NO_PARAMS: BTreeMap<String, String> = BTreeMap::new();
        let credential = Credential {
            secret: access_token,
            refresh_token,
            params: &NO_PARAMS,
        };
        self.api_request_as(http, &credential, req).await
    }

    /// What [`Self::api_request`] refuses of `req` whatever the account:
    /// a method the operator did not allow, a path that would leave any
    /// API base (a URL, `//host`, dot segments, backslashes, control
    /// characters), query values other than scalars, a body on a method
    /// that takes none (and, for Slack, a method name that writes). Checked before the user is asked to
    /// connect or approve anything, so that nobody goes through a consent
    /// for a request that would be refused after it. Answers the method
    /// and the query's pairs.
    pub fn check_request(
        &self,
        req: &ApiRequest,
    ) -> Result<(reqwest::Method, Vec<(String, String)>), ProviderError> {
        let method = guard::method(&self.allowed_methods, &req.method)?;
        guard::relative_path(&req.path)?;
        let query = guard::query_pairs(req.query.as_ref())?;
        guard::body_allowed(&method, req.body.as_ref())?;
        if self.quirks.path_rules == Some(ApiPathRules::SlackMethods) {
            guard::slack_method(&self.allowed_methods, &req.path)?;
        }
        Ok((method, query))
    }

    /// [`Self::api_request`] with a stored connection's credential of any
    /// kind: an API-key or Basic credential is presented as its entry
    /// says, beneath the API base URL its parameters (and identifying
    /// fields) make; every secret field is redacted from the answer.
    pub async fn api_request_as(
        &self,
        http: &reqwest::Client,
        credential: &Credential<'_>,
        req: &ApiRequest,
    ) -> Result<ApiResponse, ProviderError> {
        let (access_token, refresh_token) = (credential.secret, credential.refresh_token);
        let fields = if self.is_oauth() {
            None
        } else {
            Some(FieldCredential::from_secret(access_token)?)
        };
        // The API base, and the endpoints that manage the grant itself,
        // which may sit beneath it (Dropbox's and Linear's revocation).
        let (base, grant) = match (&self.api_base_url, &fields) {
            (Some(base), None) if credential.params.is_empty() => {
                let grant = [&self.token_url, &self.refresh_url, &self.revocation_url];
                (base.clone(), grant.into_iter().flatten().cloned().collect())
            }
            _ => {
                let e = self.endpoints_with(credential.params, fields.as_ref())?;
                let grant: Vec<url::Url> = [e.token, e.refresh, e.revocation]
                    .into_iter()
                    .flatten()
                    .collect();
                (e.api_base, grant)
            }
        };
        let (method, query) = self.check_request(req)?;
        let mut url = guard::resolve(&base, &req.path)?;
        guard::not_a_grant_endpoint(&url, &grant)?;
        guard::not_under_grant_paths(&url, &base, &self.grant_paths)?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(&query);
        }
        guard::no_credential_params(&url, &self.credential_query_params(fields.is_some()))?;
        let (request, url) = match &fields {
            Some(fields) => self.presented(http, method.clone(), url, fields),
            None => self.authorized(http, method.clone(), url, access_token),
        };
        let mut request = request.timeout(self.api_timeout);
        if let Some(body) = &req.body {
            request = request.json(body);
        }
        let (mut response, mut timer) = self.send(Call::Api, request).await?;
        // The client we are given must not follow redirects; if one did,
        // the answer came from somewhere we did not vet.
        if response.url() != &url {
            return Err(ProviderError::BadResponse(
                "the HTTP client followed a redirect; it must not".into(),
            ));
        }
        let status = response.status().as_u16();
        let content_type = media_type_as_sent(&response).map(str::to_owned);
        let rate_limited = super::rate_limit::read(status, response.headers(), chrono::Utc::now());
        tracing::info!(provider = %self.name, %method, status, "api request");
        // Whatever of the answer reaches the model loses every secret we
        // sent, however the provider echoes it.
        let client_secret = self.client_secret.as_ref().map(|s| s.expose_secret());
        let field_secrets = fields
            .as_ref()
            .map(|f| self.credential_secrets(f))
            .unwrap_or_default();
        let redactor = Redactor::new(
            [Some(access_token), refresh_token, client_secret]
                .into_iter()
                .flatten()
                .chain(field_secrets.iter().map(String::as_str)),
        );
        // The provider's header reaches the model too: cleaned as sent,
        // then lowercased.
        let content_type = content_type.map(|t| redactor.text(&t).to_ascii_lowercase());

        if response.status().is_redirection() {
            timer.finish();
            return Ok(ApiResponse {
                status,
                content_type,
                body: redirect_body(&response, &url, &redactor),
                truncated: false,
                token_rejected: false,
                envelope_error: None,
                rate_limited: None,
            });
        }
        let read = read_bounded(&mut response, self.max_response_bytes, &mut timer).await?;
        timer.finish();
        let length = read.bytes.len();
        let text = match String::from_utf8(read.bytes) {
            Ok(text) => Some(text),
            // A cut may split a character: keep the valid prefix.
            Err(e) if read.truncated && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                String::from_utf8(bytes).ok()
            }
            Err(_) => None,
        };
        let body = match text {
            _ if method == reqwest::Method::HEAD => Value::Null,
            None => Value::String(format!("[{length} bytes of binary content not shown]")),
            Some(text) => {
                // Raw text first (escapes are still visible), then every
                // string and key of what the parser decoded.
                let text = redactor.text(&text);
                match serde_json::from_str(&text) {
                    Ok(value) if is_json(content_type.as_deref()) && !read.truncated => {
                        redactor.value(value)
                    }
                    _ => Value::String(text),
                }
            }
        };
        // Slack answers nearly every failure with HTTP 200 and `ok: false`.
        let envelope_error = (self.quirks.ok_envelope
            && body.get("ok") == Some(&Value::Bool(false)))
        .then(|| {
            let code = body.get("error").and_then(Value::as_str).unwrap_or("");
            Some(clean_code(code)).filter(|c| !c.is_empty())
        })
        .map(|code| code.unwrap_or_else(|| "unknown_error".to_owned()));
        let token_rejected = status == 401
            || envelope_error
                .as_deref()
                .is_some_and(|e| SLACK_TOKEN_ERRORS.contains(&e));
        Ok(ApiResponse {
            status,
            content_type,
            body,
            truncated: read.truncated,
            token_rejected,
            envelope_error,
            rate_limited,
        })
    }
}

/// Only the target's path: its host is not ours to send the model to, and
/// its query may carry a signed download token. A provider that puts a
/// secret we sent into the path (`/x/<token>`) gets it redacted.
fn redirect_body(response: &reqwest::Response, from: &url::Url, redactor: &Redactor) -> Value {
    let path = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|location| from.join(location).ok())
        .map(|target| redactor.text(target.path()));
    json!({ "redirect": "not followed", "location_path": path })
}

#[cfg(test)]
mod tests {
    use provider_fakes::scripted::{DEMO_TOKEN, RFC_TOKEN};
    use serde_json::json;

    use super::*;
    use crate::providers::test_catalog::{Fakes, http};

    fn get(path: &str) -> ApiRequest {
        ApiRequest {
            method: "GET".into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[actix_web::test]
    async fn github_calls_carry_its_headers_and_the_query() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let gh = catalog.get("github").unwrap();
        let (token, _) = fakes.github.issue_grant("repo", false);
        let mut req = get("/repos/octocat/hello");
        req.method = "get".into();
        req.query = json!({"per_page": 5, "sort": "updated", "all": true})
            .as_object()
            .cloned();
        let r = gh.api_request(&http(), &token, None, &req).await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(r.body["full_name"], "octocat/hello");
        assert!(!r.truncated && !r.token_rejected);
        let seen = &fakes.github.seen("/repos/octocat/hello")[0];
        assert_eq!(seen.headers["accept"], "application/vnd.github+json");
        assert_eq!(seen.headers["x-github-api-version"], "2022-11-28");
        // Sorted by name: the map is serde_json's ordered map.
        assert_eq!(seen.query, "all=true&per_page=5&sort=updated");
        assert_eq!(seen.headers["authorization"], format!("Bearer {token}"));
        assert!(seen.headers["user-agent"].starts_with("mcp-connect/"));
    }

    #[actix_web::test]
    async fn refused_requests_never_reach_the_provider() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let gh = catalog.get("github").unwrap();
        let (token, _) = fakes.github.issue_grant("repo", false);
        let cases = [
            get("https://evil.example/x"),
            get("//evil.example/x"),
            get("../outside"),
            get("%2e%2e/outside"),
            get("a/../../outside"),
            get("\\evil"),
            get("//user@evil.example/x"),
            get("a/..;/..;/outside"),
            ApiRequest {
                method: "DELETE".into(),
                ..get("repos/octocat/hello")
            },
            ApiRequest {
                method: "POST".into(),
                body: Some(json!({})),
                ..get("user")
            },
            ApiRequest {
                query: json!({"q": {"nested": 1}}).as_object().cloned(),
                ..get("user")
            },
        ];
        for req in cases {
            let e = gh
                .api_request(&http(), &token, None, &req)
                .await
                .unwrap_err();
            assert!(!e.to_string().contains(&token), "{e}");
        }
        let demo = catalog.get("demo").unwrap();
        let body_on_get = ApiRequest {
            body: Some(json!({"x": 1})),
            ..get("echo")
        };
        let e = demo
            .api_request(&http(), DEMO_TOKEN, None, &body_on_get)
            .await
            .unwrap_err();
        assert!(matches!(e, ProviderError::RequestRefused(_)), "{e}");
        assert!(fakes.github.seen("/outside").is_empty());
        assert_eq!(fakes.github.calls().api, 0, "nothing reached GitHub");
        assert!(fakes.scripted.seen("/dev/demo/api/echo").is_empty());
    }

    #[actix_web::test]
    async fn redirects_are_reported_not_followed() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let gh = catalog.get("github").unwrap();
        let (token, _) = fakes.github.issue_grant("repo", false);
        let r = gh
            .api_request(&http(), &token, None, &get("repos/octocat/hello/tarball"))
            .await
            .unwrap();
        assert_eq!(r.status, 302);
        assert_eq!(
            r.body["location_path"],
            "/octocat/hello/legacy.tar.gz/refs/heads/main"
        );
        // The download URL's host and its token stay out of the answer.
        let shown = r.body.to_string();
        assert!(
            !shown.contains("codeload") && !shown.contains("token="),
            "{shown}"
        );
        // A provider that puts the token it was sent into the path.
        let moved = gh
            .api_request(&http(), &token, None, &get("hostile/moved"))
            .await
            .unwrap();
        assert_eq!(moved.status, 302);
        let path = moved.body["location_path"].as_str().unwrap();
        assert_eq!(path, "/files/[redacted]/report.pdf");
    }

    #[actix_web::test]
    async fn large_answers_are_cut_and_marked() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let rfc = catalog.get("rfc").unwrap();
        let r = rfc
            .api_request(&http(), RFC_TOKEN, None, &get("big"))
            .await
            .unwrap();
        assert!(r.truncated);
        assert_eq!(r.body.as_str().unwrap().len(), 1000);
        let r = rfc
            .api_request(&http(), RFC_TOKEN, None, &get("items"))
            .await
            .unwrap();
        assert!(!r.truncated);
        assert_eq!(r.body["query"], "");
    }

    #[actix_web::test]
    async fn echoed_tokens_are_redacted() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let demo = catalog.get("demo").unwrap();
        let req = ApiRequest {
            method: "post".into(),
            path: "echo".into(),
            query: None,
            body: Some(json!({"message": "hi"})),
        };
        let r = demo
            .api_request(&http(), DEMO_TOKEN, None, &req)
            .await
            .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body["method"], "POST");
        assert_eq!(r.body["body"]["message"], "hi");
        assert_eq!(r.body["content_type"], "application/json");
        assert_eq!(r.body["authorization"], "Bearer [redacted]");
        let gh = catalog.get("github").unwrap();
        let (token, _) = fakes.github.issue_grant("repo", false);
        let mut echo = get("hostile/echo");
        echo.query = json!({"as": "text"}).as_object().cloned();
        let r = gh.api_request(&http(), &token, None, &echo).await.unwrap();
        let text = r.body.as_str().unwrap();
        assert!(text.contains("[redacted]"), "{text}");
        assert!(!text.contains(&token), "{text}");
        // A media type that names the token is cleaned as well.
        echo.query = json!({"as": "typed"}).as_object().cloned();
        let r = gh.api_request(&http(), &token, None, &echo).await.unwrap();
        let media = r.content_type.unwrap_or_default();
        assert!(media.contains("[redacted]"), "{media}");
        assert!(!media.contains(&token.to_ascii_lowercase()), "{media}");
    }

    #[actix_web::test]
    async fn refused_tokens_are_flagged() {
        let fakes = Fakes::start().await;
        let catalog = fakes.catalog();
        let slack = catalog.get("slack").unwrap();
        let r = slack
            .api_request(&http(), "xoxp-stale", None, &get("conversations.list"))
            .await
            .unwrap();
        assert_eq!((r.status, r.token_rejected), (200, true));
        assert_eq!(r.body["error"], "invalid_auth");
        assert_eq!(r.envelope_error.as_deref(), Some("invalid_auth"));
        let (token, _) = fakes.slack.issue_grant("channels:read,chat:write", false);
        let r = slack
            .api_request(&http(), &token, None, &get("conversations.list"))
            .await
            .unwrap();
        assert_eq!(r.body["ok"], true, "{:?}", r.body);
        assert!(!r.token_rejected && r.envelope_error.is_none());
        let rfc = catalog.get("rfc").unwrap();
        let r = rfc
            .api_request(&http(), "stale", None, &get("items"))
            .await
            .unwrap();
        assert_eq!((r.status, r.token_rejected), (401, true));
    }
}
