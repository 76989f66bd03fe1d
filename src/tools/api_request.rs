//! `api_request`: a call to the provider's API as the user — only to the
//! provider's configured API base URL, only with allowed methods (the
//! provider module enforces both), response size bounded.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{
    ToolCall, ToolOutput, internal, known_provider, output_schema_for,
    result::{ErrorKind, Outcome, ToolError, answer, next_step_for_status, provider_failure},
    schema_for, unless_ready,
};
use crate::{
    connect::UsableToken,
    providers::{ApiRequest, ApiResponse, Credential, Provider, ProviderError, RateLimited},
};

pub const NAME: &str = "api_request";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider whose API to call, e.g. "github".
    pub provider: String,
    /// Which of several accounts at the provider to use: its label (as
    /// connections_list shows it) or account id. Omit when there is one;
    /// with several, the user is asked.
    #[serde(default)]
    pub account: Option<String>,
    /// HTTP method; GET when absent. Providers allow GET and HEAD unless configured otherwise.
    #[serde(default = "get")]
    pub method: String,
    /// Path relative to the provider's API base URL, e.g. "user/repos" for GitHub. No absolute URLs, no "..".
    pub path: String,
    /// Query parameters, e.g. {"per_page": 5}. Values are strings, numbers or booleans.
    #[serde(default)]
    pub query: Option<Map<String, Value>>,
    /// JSON body, for methods that take one.
    #[serde(default)]
    pub body: Option<Value>,
}

/// The provider's answer, or why the request was not made.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApiResult {
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The provider's HTTP status (absent when no request was made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The answer's Content-Type, if it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The body was cut at the provider's size limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    /// The answer's body: its JSON, or its text as a string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The provider is rate limiting and said how long to wait, in
    /// seconds, before trying again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

impl ToolOutput for ApiResult {
    fn from_outcome(outcome: Outcome) -> Self {
        Self {
            outcome,
            http_status: None,
            content_type: None,
            truncated: None,
            body: None,
            retry_after_secs: None,
        }
    }
}

fn get() -> String {
    "GET".to_owned()
}

/// The tool, its annotations as the operator's `allowed_methods` make it:
/// read-only unless some provider allows a method that writes, and then
/// able to destroy (a DELETE, a Dropbox `files/delete_v2` POST), so that
/// a client asks the person before it runs.
///
/// The description says which: "read-only by default" was not true of a
/// server with Dropbox or Linear configured, whose APIs take every call,
/// reads and writes alike, as a POST.
pub fn definition(writes: bool) -> Tool {
    let description = if writes {
        concat!(
            "Call a provider's HTTP API as the user, with the user's connected account (the server adds the ",
            "credentials; you never see them). Only the provider's own API is reachable, with the methods the ",
            "operator allowed for it; some allow methods that change or delete data (at Dropbox and Linear every ",
            "call is a POST, reads included): ask the user before a call that writes. Returns the HTTP status and ",
            "the JSON (or text) body, cut at a size limit. If the user has not connected the provider, the result ",
            "asks the client to open a link first; retry the call after."
        )
    } else {
        concat!(
            "Call a provider's HTTP API as the user, with the user's connected account (the server adds the ",
            "credentials; you never see them). Only the provider's own API is reachable, and only to read (the ",
            "operator allowed only methods that read). Returns the HTTP status and the JSON (or text) body, ",
            "cut at a size limit. If the user has not connected the provider, the result asks the client to open ",
            "a link first; retry the call after."
        )
    };
    Tool::new(NAME, description, schema_for::<Args>())
        .with_raw_output_schema(output_schema_for::<ApiResult>())
        .with_title("Call a provider API as the user")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(!writes)
                .destructive(writes)
                .idempotent(!writes)
                .open_world(true),
        )
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = match call.arguments::<_, ApiResult>() {
        Ok(args) => args,
        Err(refused) => return Ok(*refused),
    };
    let provider = match known_provider::<ApiResult>(call.service, &args.provider) {
        Ok(provider) => provider,
        Err(refused) => return Ok(*refused),
    };
    let request = ApiRequest {
        method: args.method,
        path: args.path,
        query: args.query,
        body: args.body,
    };
    // A request refused whatever the account is refused before the user
    // is sent to connect or approve one for it.
    if let Err(e) = provider.check_request(&request) {
        tracing::info!(provider = %provider.name(), error = %e, "api_request refused");
        let result = ApiResult::from_outcome(provider_failure(provider.name(), &e));
        return Ok(CallToolResponse::Complete(answer(
            &result,
            true,
            format!("Request not made: {e}"),
        )));
    }
    let access = call
        .require_account(&args.provider, &[], args.account.as_deref(), false)
        .await?;
    let (token, provider) = match unless_ready::<ApiResult>(access, &args.provider) {
        Ok(ready) => ready,
        Err(answer) => return Ok(*answer),
    };
    let mut token = token;
    let mut sent = send(&call, provider, &token, &request).await?;
    if matches!(&sent, Ok(r) if r.token_rejected)
        && let Some(fresh) = call.service.refreshed_after_refusal(&token, provider).await
    {
        // Refused before its time. A refused request was not carried out:
        // made again, once, with refreshed tokens.
        token = fresh;
        sent = send(&call, provider, &token, &request).await?;
    }
    let response = match sent {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(provider = %provider.name(), error = %e, "api_request refused or failed");
            let outcome = provider_failure(provider.name(), &e)
                .for_account(&token.account_label, &token.account_id);
            let sentence = match (&outcome.error, e.may_have_been_sent()) {
                (Some(error), true) => error.message.clone(),
                _ => format!("Request not made: {e}"),
            };
            let result = ApiResult::from_outcome(outcome);
            return Ok(CallToolResponse::Complete(answer(&result, true, sentence)));
        }
    };
    let token_dead = response.token_rejected && refused_everywhere(&call, provider, &token).await;
    if token_dead {
        // The provider no longer honours the token: the next call asks the
        // user to connect again instead of failing forever.
        call.service
            .token_rejected(&token)
            .await
            .map_err(internal)?;
    }
    let mut outcome = Outcome::ok(provider.name(), &token.account_label, &token.account_id);
    let failed =
        response.status >= 400 || response.token_rejected || response.envelope_error.is_some();
    let sentence = format!(
        "{} answered HTTP {}{}{}{}.",
        provider.display_name(),
        response.status,
        match &response.envelope_error {
            Some(code) => format!(" with the error {code}"),
            None => String::new(),
        },
        match response.rate_limited {
            Some(RateLimited {
                retry_after_secs: Some(secs),
            }) => format!(" (rate limited: try again in {secs} s)"),
            Some(_) => " (rate limited: try again later)".to_owned(),
            None => String::new(),
        },
        if response.truncated {
            " (body cut at the size limit)"
        } else {
            ""
        }
    );
    if failed {
        let kind = if token_dead {
            ErrorKind::TokenRejected
        } else {
            ErrorKind::HttpError
        };
        outcome.next_step = match (token_dead, response.token_rejected) {
            (true, _) => super::result::NextStep::Connect,
            // Refused here, honoured for who the user is: the token lacks
            // something this request needs (Atlassian answers a missing
            // scope with 401).
            (false, true) => super::result::NextStep::Approve,
            // GitHub's rate limits are 403s: not a permission to ask for.
            (false, false) if response.rate_limited.is_some() => {
                super::result::NextStep::RetryLater
            }
            (false, false) => match &response.envelope_error {
                Some(code) if response.status < 400 => next_step_for_envelope_error(code),
                _ => next_step_for_status(response.status),
            },
        };
        outcome.error = Some(ToolError {
            kind,
            message: sentence.clone(),
        });
    }
    let result = ApiResult {
        outcome,
        http_status: Some(response.status),
        content_type: response.content_type,
        truncated: Some(response.truncated),
        body: Some(response.body),
        retry_after_secs: response.rate_limited.and_then(|r| r.retry_after_secs),
    };
    Ok(CallToolResponse::Complete(answer(
        &result, failed, sentence,
    )))
}

/// Sends `request` with `token`.
async fn send(
    call: &ToolCall<'_>,
    provider: &Provider,
    token: &UsableToken,
    request: &ApiRequest,
) -> Result<Result<ApiResponse, ProviderError>, ErrorData> {
    // The refresh token is never sent, but a provider may echo it: it is
    // opened here only to be hidden from the answer.
    let refresh_token = call.service.refresh_token_of(token).map_err(internal)?;
    let credential = Credential {
        refresh_token: refresh_token.as_ref().map(|t| t.expose_secret()),
        ..token.credential()
    };
    Ok(provider
        .api_request_as(call.service.http(), &credential, request)
        .await)
}

/// What to do about a failure reported in the provider's envelope (Slack's
/// `ok: false`, whose codes are documented per method): a permission the
/// token lacks is approved, a busy provider retried, the rest is the
/// request's to change.
fn next_step_for_envelope_error(code: &str) -> super::result::NextStep {
    use super::result::NextStep;
    match code {
        "missing_scope"
        | "no_permission"
        | "not_allowed_token_type"
        | "access_denied"
        | "ekm_access_denied" => NextStep::Approve,
        "ratelimited"
        | "internal_error"
        | "fatal_error"
        | "service_unavailable"
        | "request_timeout" => NextStep::RetryLater,
        _ => NextStep::ChangeRequest,
    }
}

/// Whether a token the provider refused for a request the model chose is
/// refused for everything: the provider's identity endpoint is asked too.
/// Only then is the connection taken for dead — a 401 can be about the
/// request (a scope it lacks), and a model must not be able to make the
/// user connect again by asking for something the token may not do.
/// Unsure (the provider unreachable): not dead; the next call asks again.
async fn refused_everywhere(call: &ToolCall<'_>, provider: &Provider, token: &UsableToken) -> bool {
    match provider
        .account_as(call.service.http(), &token.credential())
        .await
    {
        Err(ProviderError::Denied(_)) => true,
        Ok(_) => false,
        Err(e) => {
            tracing::info!(provider = %provider.name(), error = %e, "could not tell whether a refused token is dead");
            false
        }
    }
}
