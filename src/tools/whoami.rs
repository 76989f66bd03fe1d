//! `whoami`: the account as the provider itself reports it, fetched with
//! the stored token.

use rmcp::{
    ErrorData,
    model::{CallToolResponse, Tool, ToolAnnotations},
};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    ToolCall, ToolOutput, known_provider, output_schema_for,
    result::{Outcome, answer, provider_failure},
    schema_for, unless_ready,
};

pub const NAME: &str = "whoami";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider to ask, e.g. "github".
    pub provider: String,
    /// Which of several accounts at the provider to use: its label (as
    /// connections_list shows it) or account id. Omit when there is one;
    /// with several, the user is asked.
    #[serde(default)]
    pub account: Option<String>,
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "Show which account the user has connected at a provider, as the provider reports it right now \
         (its id and name). If no account is connected, the result asks the client to open a link where \
         the user connects one; retry the call after.",
        schema_for::<Args>(),
    )
    .with_raw_output_schema(output_schema_for::<Outcome>())
    .with_title("Who am I at a provider")
    .with_annotations(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(true))
}

impl ToolOutput for Outcome {
    fn from_outcome(outcome: Outcome) -> Self {
        outcome
    }
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = match call.arguments::<_, Outcome>() {
        Ok(args) => args,
        Err(refused) => return Ok(*refused),
    };
    if let Err(refused) = known_provider::<Outcome>(call.service, &args.provider) {
        return Ok(*refused);
    }
    let access = call
        .require_account(&args.provider, &[], args.account.as_deref(), false)
        .await?;
    let (token, provider) = match unless_ready::<Outcome>(access, &args.provider) {
        Ok(ready) => ready,
        Err(answer) => return Ok(*answer),
    };
    let (token, asked) = super::ask_account(call.service, provider, token).await;
    match asked {
        Ok(account) => {
            let sentence = format!(
                "Connected to {} as {} (id {}).",
                provider.display_name(),
                account.label,
                account.id
            );
            let outcome = Outcome::ok(provider.name(), &account.label, &account.id);
            Ok(CallToolResponse::Complete(answer(
                &outcome, false, sentence,
            )))
        }
        Err(e) => {
            tracing::warn!(provider = %provider.name(), error = %e, "whoami: provider call failed");
            if matches!(e, crate::providers::ProviderError::Denied(_)) {
                // As for api_request: the next call asks the user to connect
                // again, which is what `next_step: connect` promises.
                call.service
                    .token_rejected(&token)
                    .await
                    .map_err(super::internal)?;
            }
            let outcome = provider_failure(provider.name(), &e)
                .for_account(&token.account_label, &token.account_id);
            let sentence = format!(
                "{} did not answer as expected: {e}",
                provider.display_name()
            );
            Ok(CallToolResponse::Complete(answer(&outcome, true, sentence)))
        }
    }
}
