//! `connections_list`: the caller's connected accounts. Never a token.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, CallToolResult, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{ToolCall, internal, schema_for};
use crate::db::connections;

pub const NAME: &str = "connections_list";

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "List the third-party accounts (GitHub, Google, Slack, …) the user has connected to this \
         server: provider, account, granted scopes, status and when it was connected and last used. \
         Returns no credentials.",
        schema_for::<Args>(),
    )
    .with_title("List connected accounts")
    .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let _: Args = call.arguments()?;
    let p = call.principal;
    let rows = connections::list_for_user(&call.state.db, &p.issuer, &p.subject)
        .await
        .map_err(internal)?;
    let items: Vec<_> = rows
        .iter()
        .map(|c| {
            json!({
                "provider": c.provider,
                "account": c.account_label,
                "account_id": c.account_id,
                "scopes": c.scopes,
                "status": c.status,
                "connected_at": c.created_at,
                "last_used_at": c.last_used_at,
            })
        })
        .collect();
    let text = if items.is_empty() {
        "No accounts are connected yet.".to_owned()
    } else {
        rows.iter()
            .map(|c| format!("{}: {} ({})", c.provider, c.account_label, c.status))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut result = CallToolResult::structured(json!({ "connections": items }));
    result.content = vec![rmcp::model::ContentBlock::text(text)];
    Ok(CallToolResponse::Complete(result))
}
