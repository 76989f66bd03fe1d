//! `api_request`: a call to the provider's API as the user — only to the
//! provider's configured API base URL, only with allowed methods (the
//! provider module enforces both), response size bounded.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, CallToolResult, ContentBlock, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ToolCall, error_result, internal, schema_for, unless_ready};
use crate::providers::ApiRequest;

pub const NAME: &str = "api_request";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider whose API to call, e.g. "github".
    pub provider: String,
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

fn get() -> String {
    "GET".to_owned()
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "Call a provider's HTTP API as the user, with the user's connected account (the server adds the \
         credentials; you never see them). Only the provider's own API is reachable, with the methods the \
         operator allowed (read-only by default). Returns the HTTP status and the JSON (or text) body, cut \
         at a size limit. If the user has not connected the provider, the result asks the client to open a \
         link first; retry the call after.",
        schema_for::<Args>(),
    )
    .with_title("Call a provider API as the user")
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(true))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = call.arguments()?;
    let access = call.require(&args.provider, &[]).await?;
    let (token, provider) = match unless_ready(access) {
        Ok(ready) => ready,
        Err(answer) => return Ok(*answer),
    };
    let request = ApiRequest {
        method: args.method,
        path: args.path,
        query: args.query,
        body: args.body,
    };
    let response = match provider
        .api_request(
            &call.state.http,
            token.access_token.expose_secret(),
            token.refresh_token.as_ref().map(|t| t.expose_secret()),
            &request,
        )
        .await
    {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(provider = provider.name(), error = %e, "api_request refused or failed");
            // A model may repeat a call it believes unsent: say so only
            // when it is true.
            let text = if e.may_have_been_sent() {
                format!(
                    "No answer: {e}. The request may have reached the provider and taken effect; \
                     check before repeating it."
                )
            } else {
                format!("Request not made: {e}")
            };
            return Ok(CallToolResponse::Complete(error_result(text)));
        }
    };
    if response.token_rejected {
        // The provider no longer honours the token: the next call asks the
        // user to connect again instead of failing forever.
        crate::connect::vault::token_rejected(call.state, &token)
            .await
            .map_err(internal)?;
    }
    let summary = json!({
        "status": response.status,
        "content_type": response.content_type,
        "truncated": response.truncated,
        "body": response.body,
    });
    let mut result = CallToolResult::structured(summary.clone());
    result.content = vec![ContentBlock::text(summary.to_string())];
    if response.status >= 400 {
        result.is_error = Some(true);
    }
    Ok(CallToolResponse::Complete(result))
}
