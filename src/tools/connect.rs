//! `connect`: connect an account, or add scopes to an existing connection.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolCall, ToolOutput, check_scopes, known_provider, output_schema_for,
    result::{Outcome, answer},
    schema_for, unless_ready,
};

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
    /// Extra OAuth scopes to request, one scope per string, e.g. ["repo"]. Omit for the provider's defaults. If the existing
    /// connection lacks any of them, the user is asked to approve again.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// true: connect another account at this provider (e.g. a work account beside a personal one);
    /// the provider is asked to show its account chooser.
    #[serde(default)]
    pub another_account: bool,
}

/// The connection, or why there is none.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectResult {
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The scopes the connection holds, as the provider granted them
    /// (absent when the call failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
}

impl ToolOutput for ConnectResult {
    fn from_outcome(outcome: Outcome) -> Self {
        Self {
            outcome,
            scopes: None,
        }
    }
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
    .with_raw_output_schema(output_schema_for::<ConnectResult>())
    .with_title("Connect an account")
    // Not idempotent: with `another_account` every call adds an account.
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(true))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = match call.arguments::<_, ConnectResult>() {
        Ok(args) => args,
        Err(refused) => return Ok(*refused),
    };
    if let Err(refused) = known_provider::<ConnectResult>(call.service, &args.provider) {
        return Ok(*refused);
    }
    if let Err(refused) = check_scopes::<ConnectResult>(&args.provider, &args.scopes) {
        return Ok(*refused);
    }
    let access = call
        .require_account(
            &args.provider,
            &args.scopes,
            args.account.as_deref(),
            args.another_account,
        )
        .await?;
    let (token, provider) = match unless_ready::<ConnectResult>(access, &args.provider) {
        Ok(ready) => ready,
        Err(answer) => return Ok(*answer),
    };
    let mut sentence = format!(
        "{} is connected as {} (scopes: ",
        provider.display_name(),
        token.account_label,
    );
    if token.scopes.is_empty() {
        sentence.push_str("none reported");
    }
    for (i, scope) in token.scopes.iter().enumerate() {
        if i > 0 {
            sentence.push_str(", ");
        }
        sentence.push_str(scope);
    }
    sentence.push_str(").");
    let result = ConnectResult {
        outcome: Outcome::ok_owned(provider.name(), token.account_label, token.account_id),
        scopes: Some(token.scopes),
    };
    Ok(CallToolResponse::Complete(answer(&result, false, sentence)))
}
