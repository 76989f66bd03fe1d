//! `connections_list`: the caller's connected accounts. Never a token.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolCall, internal, output_schema_for, result::answer, schema_for};
use crate::db::connections::ConnectionSummary;

pub const NAME: &str = "connections_list";

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The user's connected accounts; also the `connections://mine` resource.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectionsList {
    pub connections: Vec<ConnectionInfo>,
}

/// One connected account. Never a token.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectionInfo {
    /// The provider's name, e.g. "github".
    pub provider: String,
    /// The account's name at the provider.
    pub account: String,
    /// The account's id at the provider.
    pub account_id: String,
    /// The scopes the provider granted.
    pub scopes: Vec<String>,
    /// "active"; "needs_reauth" when the provider stopped accepting it (the
    /// next call that needs it asks the user to connect again).
    pub status: String,
    /// When the account was connected (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub connected_at: String,
    /// When a tool last used it (RFC 3339), if ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_used_at: Option<String>,
}

impl ConnectionsList {
    pub fn of(rows: &[ConnectionSummary]) -> Self {
        let time = |t: &chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        Self {
            connections: rows
                .iter()
                .map(|c| ConnectionInfo {
                    provider: c.provider.clone(),
                    account: c.account_label.clone(),
                    account_id: c.account_id.clone(),
                    scopes: c.scopes.clone(),
                    status: c.status.as_str().to_owned(),
                    connected_at: time(&c.created_at),
                    last_used_at: c.last_used_at.as_ref().map(time),
                })
                .collect(),
        }
    }
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "List the third-party accounts (GitHub, Google, Slack, …) the user has connected to this \
         server: provider, account, granted scopes, status and when it was connected and last used. \
         Returns no credentials.",
        schema_for::<Args>(),
    )
    .with_raw_output_schema(output_schema_for::<ConnectionsList>())
    .with_title("List connected accounts")
    .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let _: Args = call.arguments()?;
    let p = call.principal;
    let rows = call
        .service
        .list(&p.issuer, &p.subject)
        .await
        .map_err(internal)?;
    let sentence = if rows.is_empty() {
        "No accounts are connected yet.".to_owned()
    } else {
        rows.iter()
            .map(|c| format!("{}: {} ({})", c.provider, c.account_label, c.status))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let list = ConnectionsList::of(&rows);
    Ok(CallToolResponse::Complete(answer(&list, false, sentence)))
}
