//! `disconnect`: asks the user to confirm (a form-mode elicitation, yes or
//! no), then revokes the tokens upstream where the provider supports RFC 7009
//! and deletes the connection. The confirmation round is bound to this call
//! by a sealed `requestState`, like the connect flow's.

use rmcp::{
    ErrorData,
    model::{
        CallToolResponse, CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams,
        ElicitationAction, ElicitationSchema, ErrorCode, InputRequest, InputRequests,
        InputRequiredResult, Tool, ToolAnnotations,
    },
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::{ToolCall, error_result, internal, schema_for};
use crate::{
    connect::{ClientKind, reject_state, vault},
    db,
    mcp::state::{self as request_state, RoundState},
};

pub const NAME: &str = "disconnect";
const CONFIRM_KEY: &str = "confirm_disconnect";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider to disconnect, e.g. "github".
    pub provider: String,
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "Disconnect the user's account at a provider: after the user confirms, the server revokes its \
         tokens at the provider (where supported) and forgets them. The user is asked to confirm first.",
        schema_for::<Args>(),
    )
    .with_title("Disconnect an account")
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(true))
}

fn done(text: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = call.arguments()?;
    let state = call.state;
    let p = call.principal;
    let Some(provider) = state.providers.get(&args.provider) else {
        return Err(ErrorData::invalid_params(
            format!("Unknown provider `{}`.", args.provider),
            None,
        ));
    };
    let binding = call.binding();

    if let Some(sealed) = call.request.request_state.as_deref() {
        match request_state::open(&state.keys, &binding, sealed) {
            Ok(round) if round.provider == provider.name() => {}
            Ok(_) => return Err(reject_state(state, p, provider.name(), NAME, "provider").await),
            Err(e) => {
                return Err(reject_state(state, p, provider.name(), NAME, e.reason_code()).await);
            }
        }
        let answer = call
            .request
            .input_responses
            .as_ref()
            .and_then(|r| r.get(CONFIRM_KEY));
        let action = answer.and_then(|a| {
            serde_json::from_value::<ElicitationAction>(a.get("action")?.clone()).ok()
        });
        let confirmed = action == Some(ElicitationAction::Accept)
            && answer
                .and_then(|a| a.pointer("/content/confirm"))
                .and_then(|v| v.as_bool())
                == Some(true);
        if !confirmed {
            return Ok(done(format!(
                "Nothing changed: {} stays connected.",
                provider.display_name()
            )));
        }
        let removed = vault::disconnect(state, &p.issuer, &p.subject, provider.name())
            .await
            .map_err(internal)?;
        return Ok(done(if removed {
            format!(
                "{} is disconnected; its tokens were revoked where the provider allows.",
                provider.display_name()
            )
        } else {
            format!("No {} account was connected.", provider.display_name())
        }));
    }

    let Some(connection) = db::connections::find(&state.db, &p.issuer, &p.subject, provider.name())
        .await
        .map_err(internal)?
    else {
        return Ok(done(format!(
            "No {} account is connected.",
            provider.display_name()
        )));
    };
    let can_ask = match super::client_kind(call.context) {
        ClientKind::Legacy => false,
        ClientKind::Modern { .. } => call
            .context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            // An empty `elicitation` object means form support (2025-11-25 rule).
            .is_some_and(|e| e.form.is_some() || e.url.is_none()),
    };
    if !can_ask {
        let page = format!("{}/connections", state.settings.base_url());
        if super::client_kind(call.context) == ClientKind::Legacy {
            return Ok(CallToolResponse::Complete(error_result(format!(
                "This client cannot ask the user to confirm. Disconnect at {page}."
            ))));
        }
        return Err(ErrorData::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "Disconnecting needs the user's confirmation (elicitation.form). Or disconnect at {page}."
            ),
            Some(json!({ "requiredCapabilities": { "elicitation": { "form": {} } } })),
        ));
    }
    let schema = ElicitationSchema::builder()
        .required_bool("confirm")
        .description("Set confirm to true to disconnect.")
        .build()
        .map_err(|e| internal(anyhow::anyhow!("{e}")))?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Disconnect your {} account {} from this server? Its tokens will be revoked and forgotten.",
            provider.display_name(),
            connection.account_label
        ),
        requested_schema: schema,
    };
    let mut requests = InputRequests::new();
    requests.insert(
        CONFIRM_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    let round = RoundState {
        ticket_id: Uuid::nil(),
        ticket: String::new(),
        provider: provider.name().to_owned(),
        round: 1,
    };
    let sealed = request_state::seal(
        &state.keys,
        &binding,
        &round,
        state.settings.flow.request_state_ttl(),
    );
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(sealed),
    )))
}
