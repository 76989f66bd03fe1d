//! The MCP tools. Each tool is a thin file: its definition (name,
//! description, typed arguments whose doc comments become the input schema)
//! and a `call` that reads its arguments, asks the services, shapes the
//! result. Policy lives in the services, not here.

mod connections_list;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolRequestParams, CallToolResponse, JsonObject, Tool},
    service::RequestContext,
};
use serde::de::DeserializeOwned;

use crate::{auth::Principal, startup::AppState};

/// Everything a tool may use for one call.
pub struct ToolCall<'a> {
    pub state: &'a AppState,
    pub principal: &'a Principal,
    pub request: &'a CallToolRequestParams,
    pub context: &'a RequestContext<RoleServer>,
}

impl ToolCall<'_> {
    /// The call's arguments as the tool's typed struct; a mismatch is the
    /// caller's error (`-32602`), with the reason.
    pub fn arguments<T: DeserializeOwned>(&self) -> Result<T, ErrorData> {
        let value = serde_json::Value::Object(self.request.arguments.clone().unwrap_or_default());
        serde_json::from_value(value).map_err(|e| {
            ErrorData::invalid_params(
                format!("Invalid arguments for tool {}: {e}", self.request.name),
                None,
            )
        })
    }
}

/// Every tool this server offers.
pub fn definitions() -> Vec<Tool> {
    vec![connections_list::definition()]
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    match call.request.name.as_ref() {
        connections_list::NAME => connections_list::call(call).await,
        other => Err(ErrorData::invalid_params(
            format!("Unknown tool: {other}"),
            None,
        )),
    }
}

/// The JSON Schema of `T` as a tool's input schema.
pub(crate) fn schema_for<T: schemars::JsonSchema + 'static>() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_type::<T>()
}

/// A database failure inside a tool: logged with its cause, generic to the client.
pub(crate) fn internal(e: impl std::fmt::Display) -> ErrorData {
    tracing::error!(error = %e, "tool failed");
    ErrorData::internal_error("Internal error", None)
}
