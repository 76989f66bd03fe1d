//! `connect`: connect an account, or add scopes to an existing connection.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, CallToolResult, ContentBlock, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{ToolCall, check_scopes, schema_for, unless_ready};

pub const NAME: &str = "connect";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider to connect, e.g. "github", "google", "slack" (see connections_list for what is configured).
    pub provider: String,
    /// Which of several accounts at the provider to use: its label (as
    /// connections_list shows it) or account id. Omit when there is one;
    /// with several, the user is asked.
    #[serde(default)]
    pub account: Option<String>,
    /// Extra OAuth scopes to request, e.g. ["repo"]. Omit for the provider's defaults. If the existing
    /// connection lacks any of them, the user is asked to approve again.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// true: connect another account at this provider (e.g. a work account beside a personal one);
    /// the provider is asked to show its account chooser.
    #[serde(default)]
    pub another_account: bool,
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "Connect the user's account at a third-party provider (GitHub, Google, Slack, …) to this server, \
         or grant additional scopes to an existing connection. If the user has not connected yet, the \
         result asks the client to open a link where the user signs in and approves; retry the call after. \
         Completes with the connected account's identity. No credentials are ever returned.",
        schema_for::<Args>(),
    )
    .with_title("Connect an account")
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(true))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = call.arguments()?;
    check_scopes(&args.scopes)?;
    let access = call
        .require_account(
            &args.provider,
            &args.scopes,
            args.account.as_deref(),
            args.another_account,
        )
        .await?;
    let (token, provider) = match unless_ready(access) {
        Ok(ready) => ready,
        Err(answer) => return Ok(*answer),
    };
    let text = format!(
        "{} is connected as {} (scopes: {}).",
        provider.display_name(),
        token.account_label,
        if token.scopes.is_empty() {
            "none reported".to_owned()
        } else {
            token.scopes.join(", ")
        }
    );
    let mut result = CallToolResult::structured(json!({
        "provider": provider.name(),
        "account": token.account_label,
        "account_id": token.account_id,
        "scopes": token.scopes,
    }));
    result.content = vec![ContentBlock::text(text)];
    Ok(CallToolResponse::Complete(result))
}
