//! `connections_list`: the caller's connected accounts, and the providers
//! this server can connect (so a model picks a provider by its real name
//! instead of guessing). Never a token.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolCall, internal, output_schema_for,
    result::{ErrorKind, ToolError, answer},
    schema_for,
};
use crate::{db::connections::ConnectionSummary, providers::ProviderCatalog};

pub const NAME: &str = "connections_list";

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The user's connected accounts and the providers they can connect; also
/// the `connections://mine` resource.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectionsList {
    pub connections: Vec<ConnectionInfo>,
    /// Every provider this server can connect, connected or not.
    pub providers: Vec<ProviderInfo>,
    /// Present when the call failed (the result then has isError set); the
    /// lists are what they would have been.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

/// A provider this server can connect. The user always connects it on this
/// server's own page (a link the tools hand out), whatever the kind.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProviderInfo {
    /// The name tools take as `provider`, e.g. "github".
    pub provider: String,
    /// The name people know it by, e.g. "GitHub".
    pub display_name: String,
    /// How the user connects it: "oauth2" (signs in at the provider),
    /// "api_key" or "basic" (pastes a key or credentials on this server's
    /// page).
    pub credential: String,
    /// How many of the user's accounts of this provider are connected.
    pub connected_accounts: usize,
}

/// One connected account. Never a token. An account the calling client is
/// not approved for shows only its provider, status and age: which account
/// it is, at which scopes and when it was used is the business of the
/// clients the user allowed to use it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectionInfo {
    /// The provider's name, e.g. "github".
    pub provider: String,
    /// Whether the user allowed this client to use the account. A tool
    /// that needs one it is not allowed asks the user (a link to approve).
    pub approved_for_this_client: bool,
    /// The account's name at the provider (approved accounts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The account's id at the provider (approved accounts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// The scopes the provider granted (approved accounts only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Vec<String>>,
    /// "active"; "needs_reauth" when the provider stopped accepting it (the
    /// next call that needs it asks the user to connect again).
    pub status: String,
    /// When the account was connected (RFC 3339).
    #[schemars(extend("format" = "date-time"))]
    pub connected_at: String,
    /// When a tool last used it (RFC 3339), if ever (approved accounts
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_used_at: Option<String>,
}

impl ConnectionsList {
    /// The list for a client: `rows` are the user's connections, each with
    /// whether the client is approved for it.
    pub fn of(rows: &[(ConnectionSummary, bool)], catalog: &ProviderCatalog) -> Self {
        let time = |t: &chrono::DateTime<chrono::Utc>| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        Self {
            connections: rows
                .iter()
                .map(|(c, approved)| ConnectionInfo {
                    provider: c.provider.to_string(),
                    approved_for_this_client: *approved,
                    account: approved.then(|| c.account_label.clone()),
                    account_id: approved.then(|| c.account_id.clone()),
                    scopes: approved.then(|| c.scopes.clone()),
                    status: c.status.as_str().to_owned(),
                    connected_at: time(&c.created_at),
                    last_used_at: c.last_used_at.as_ref().map(time).filter(|_| *approved),
                })
                .collect(),
            providers: catalog
                .names()
                .into_iter()
                .filter_map(|name| catalog.get(name).map(|p| (name, p)))
                .map(|(name, p)| ProviderInfo {
                    provider: name.to_owned(),
                    display_name: p.display_name().to_owned(),
                    credential: p.credential_kind().to_owned(),
                    connected_accounts: rows.iter().filter(|(c, _)| c.provider == name).count(),
                })
                .collect(),
            error: None,
        }
    }
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "List the third-party accounts (GitHub, Google, Slack, …) the user has connected to this \
         server: provider, account, granted scopes, status and when it was connected and last used \
         (for an account this client is not approved for, only that it exists). \
         Also lists every provider this server can connect (its `provider` name for the other \
         tools, and how many accounts of it are connected). Returns no credentials.",
        schema_for::<Args>(),
    )
    .with_raw_output_schema(output_schema_for::<ConnectionsList>())
    .with_title("List connected accounts")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    // It takes no arguments: one it does not take is the model's to
    // correct, refused in a result (tools.mdx: input validation errors are
    // tool execution errors) that still lists what there is (a model that
    // meant to filter by provider has what it wanted, and no list it is
    // shown says what is not so).
    let refused = call.raw_arguments::<Args>().err();
    let p = call.principal;
    let rows = call
        .service
        .list_for_client(p.user(), &p.client_id)
        .await
        .map_err(internal)?;
    let catalog = call.service.providers();
    let connected = if rows.is_empty() {
        "No accounts are connected yet.".to_owned()
    } else {
        rows.iter()
            .map(|(c, approved)| match approved {
                true => format!("{}: {} ({})", c.provider, c.account_label, c.status),
                false => format!(
                    "{}: an account this client is not approved for ({}); a tool that needs it asks the user",
                    c.provider, c.status
                ),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let names = catalog.names().join(", ");
    let sentence = format!("{connected}\nProviders this server can connect: {names}.");
    let mut list = ConnectionsList::of(&rows, catalog);
    let answered = match refused {
        Some(message) => {
            list.error = Some(ToolError {
                kind: ErrorKind::Refused,
                message: message.clone(),
            });
            answer(&list, true, format!("{message}\n{sentence}"))
        }
        None => answer(&list, false, sentence),
    };
    Ok(CallToolResponse::Complete(answered))
}
