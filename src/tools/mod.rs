//! The MCP tools. Each tool is a thin file: its definition (name,
//! description, typed arguments whose doc comments become the input schema)
//! and a `call` that reads its arguments, asks the connection service, calls
//! the provider, shapes the result. Policy lives in `crate::connect`.

mod api_request;
mod connect;
mod connections_list;
mod disconnect;
pub mod resources;
pub mod result;
mod whoami;

use rmcp::{
    ErrorData, RoleServer,
    model::{CallToolRequestParams, CallToolResponse, JsonObject, Tool},
    service::RequestContext,
};
use serde::{Serialize, de::DeserializeOwned};

use crate::{
    auth::Principal,
    connect::{Access, ClientKind, Need},
    mcp::state::Binding,
    startup::AppState,
};

/// Everything a tool may use for one call.
pub struct ToolCall<'a> {
    pub state: &'a AppState,
    pub principal: &'a Principal,
    pub request: &'a CallToolRequestParams,
    pub context: &'a RequestContext<RoleServer>,
}

impl<'a> ToolCall<'a> {
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

    /// What this call is, for binding a `requestState` to it.
    pub fn binding(&self) -> Binding<'a> {
        Binding {
            audience: self.state.settings.mcp_resource_str(),
            issuer: &self.principal.issuer,
            subject: &self.principal.subject,
            client_id: &self.principal.client_id,
            method: "tools/call",
            target: &self.request.name,
            arguments: self.request.arguments.as_ref(),
        }
    }

    /// Asks the connection service for the user's account at `provider`.
    pub async fn require(
        &self,
        provider: &'a str,
        scopes: &'a [String],
    ) -> Result<Access<'a>, ErrorData> {
        crate::connect::require(
            self.state,
            Need {
                principal: self.principal,
                provider,
                scopes,
                binding: self.binding(),
                input_responses: self.request.input_responses.as_ref(),
                request_state: self.request.request_state.as_deref(),
                client: client_kind(self.context),
                cancel: &self.context.ct,
            },
        )
        .await
    }
}

/// Whether the client speaks MRTR, and whether it can open URLs for its user.
pub fn client_kind(context: &RequestContext<RoleServer>) -> ClientKind {
    let modern = context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str());
    if !modern {
        return ClientKind::Legacy;
    }
    let url_elicitation = context
        .client_capabilities()
        .and_then(|c| c.elicitation)
        .is_some_and(|e| e.url.is_some());
    ClientKind::Modern { url_elicitation }
}

/// The names of every tool this server offers, in [`definitions`] order.
pub const NAMES: [&str; 5] = [
    connections_list::NAME,
    connect::NAME,
    whoami::NAME,
    api_request::NAME,
    disconnect::NAME,
];

/// Every tool this server offers.
pub fn definitions() -> Vec<Tool> {
    vec![
        connections_list::definition(),
        connect::definition(),
        whoami::definition(),
        api_request::definition(),
        disconnect::definition(),
    ]
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    match call.request.name.as_ref() {
        connections_list::NAME => connections_list::call(call).await,
        connect::NAME => connect::call(call).await,
        whoami::NAME => whoami::call(call).await,
        api_request::NAME => api_request::call(call).await,
        disconnect::NAME => disconnect::call(call).await,
        other => Err(ErrorData::invalid_params(
            format!("Unknown tool: {other}"),
            None,
        )),
    }
}

/// A tool's result type: it can say, in its own shape, that the call
/// failed for one account.
pub(crate) trait ToolOutput: Serialize {
    fn from_outcome(outcome: result::Outcome) -> Self;
}

/// The answer for an [`Access`] that is not `Ready`: the connect round, or
/// a result of the tool's type saying the user declined or cancelled.
/// `provider` is the provider's name as the caller gave it (known to exist).
pub(crate) fn unless_ready<'s, T: ToolOutput>(
    access: Access<'s>,
    provider: &str,
) -> Result<(crate::connect::UsableToken, &'s crate::providers::Provider), Box<CallToolResponse>> {
    use result::{ErrorKind, NextStep, Outcome, answer};
    let failed = |kind, message: String, next| {
        let output = T::from_outcome(Outcome::failed(provider, kind, message.clone(), next));
        Box::new(CallToolResponse::Complete(answer(&output, true, message)))
    };
    match access {
        Access::Ready { token, provider } => Ok((token, provider)),
        Access::InputRequired(result) => Err(Box::new(CallToolResponse::InputRequired(result))),
        Access::Declined { provider_name } => Err(failed(
            ErrorKind::Declined,
            format!("The user declined to connect {provider_name}."),
            NextStep::None,
        )),
        Access::Cancelled { provider_name } => Err(failed(
            ErrorKind::Cancelled,
            format!("Connecting {provider_name} was cancelled. Call the tool again to retry."),
            NextStep::Connect,
        )),
    }
}

/// Provider names and scopes from a model: short, plain tokens.
pub(crate) fn check_scopes(scopes: &[String]) -> Result<(), ErrorData> {
    let ok = scopes.len() <= 32
        && scopes
            .iter()
            .all(|s| !s.is_empty() && s.len() <= 200 && s.chars().all(|c| c.is_ascii_graphic()));
    if ok {
        Ok(())
    } else {
        Err(ErrorData::invalid_params(
            "scopes must be at most 32 non-empty scope names without spaces or control characters",
            None,
        ))
    }
}

/// The JSON Schema of `T` as a tool's input schema.
pub(crate) fn schema_for<T: schemars::JsonSchema + 'static>() -> std::sync::Arc<JsonObject> {
    rmcp::handler::server::tool::schema_for_type::<T>()
}

/// The JSON Schema of what `T` serializes, as a tool's output schema.
pub(crate) fn output_schema_for<T: schemars::JsonSchema>() -> std::sync::Arc<JsonObject> {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    absent_not_null(&mut schema);
    if let Some(root) = schema.as_object_mut() {
        // The Rust type's name and doc are no use to a model.
        root.remove("title");
        root.remove("description");
    }
    match schema {
        serde_json::Value::Object(object) => std::sync::Arc::new(object),
        // A struct's schema is always an object; an empty schema accepts anything.
        _ => std::sync::Arc::default(),
    }
}

/// Our result types skip an optional field rather than write `null`, and
/// what a type serializes leaves exactly those out of `required`: describe
/// them as what they are when present, without `null`, so that a model does
/// not expect one.
fn absent_not_null(schema: &mut serde_json::Value) {
    use serde_json::Value;
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let required: Vec<Value> = match object.get("required") {
        Some(Value::Array(r)) => r.clone(),
        _ => Vec::new(),
    };
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !required.contains(&Value::String(name.clone())) {
                strip_null(property);
            }
        }
    }
    for value in object.values_mut() {
        match value {
            Value::Object(_) => absent_not_null(value),
            Value::Array(items) => items.iter_mut().for_each(absent_not_null),
            _ => {}
        }
    }
}

fn strip_null(property: &mut serde_json::Value) {
    use serde_json::Value;
    let null = serde_json::json!({ "type": "null" });
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(any)) = object.get_mut("anyOf") {
        any.retain(|s| *s != null);
        if let [Value::Object(only)] = any.as_slice() {
            let only = only.clone();
            object.remove("anyOf");
            for (k, v) in only {
                object.entry(k).or_insert(v);
            }
        }
    }
}

/// A failure inside a tool: logged with its cause, generic to the client.
pub(crate) fn internal(e: impl std::fmt::Display) -> ErrorData {
    tracing::error!(error = %e, "tool failed");
    ErrorData::internal_error("Internal error", None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_schemas_leave_skipped_fields_out_instead_of_allowing_null() {
        let mut schema = serde_json::json!({
            "type": "object",
            "required": ["kept"],
            "properties": {
                "kept": {"type": ["string", "null"]},
                "skipped": {"type": ["string", "null"], "description": "d"},
                "nested": {"anyOf": [{"$ref": "#/$defs/X"}, {"type": "null"}], "description": "n"},
            },
        });
        absent_not_null(&mut schema);
        assert_eq!(
            schema["properties"]["kept"]["type"],
            serde_json::json!(["string", "null"])
        );
        assert_eq!(
            schema["properties"]["skipped"],
            serde_json::json!({"type": "string", "description": "d"})
        );
        assert_eq!(
            schema["properties"]["nested"],
            serde_json::json!({"$ref": "#/$defs/X", "description": "n"})
        );
    }

    #[test]
    fn names_list_every_definition() {
        let defined: Vec<String> = definitions().iter().map(|t| t.name.to_string()).collect();
        assert_eq!(defined, NAMES);
    }
}
