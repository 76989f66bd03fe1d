//! One round of a Multi Round-Trip Request as the client's retry presents
//! it: the sealed `requestState` opened and checked against this call, and
//! the client's answer to the elicitation the previous round asked. Every
//! round-based operation (`require`, the `disconnect` confirmation) reads
//! its retry through [`ConnectionService::open_round`].

use rmcp::{
    ErrorData,
    model::{ElicitationAction, InputResponses},
};
use serde_json::Value;

use super::{
    ConnectionService,
    state::{self, Binding, RoundState},
};
use crate::auth::Principal;

/// What a client's retry brought.
pub struct Round<'r> {
    pub state: RoundState,
    /// The client's answer under the key the previous round asked with.
    answer: Option<&'r Value>,
}

impl Round<'_> {
    /// Accept, Decline or Cancel, if the client answered.
    pub fn action(&self) -> Option<ElicitationAction> {
        action_of(self.answer?)
    }

    /// A value of the answer's form content, by JSON pointer under `content`.
    pub fn content(&self, pointer: &str) -> Option<&Value> {
        self.answer?.get("content")?.pointer(pointer)
    }
}

/// The `action` of an elicitation's answer: accept, decline or cancel, as
/// rmcp's `ElicitationAction` reads it (lowercase), without copying the
/// answer to deserialize it.
pub(crate) fn action_of(answer: &Value) -> Option<ElicitationAction> {
    match answer.get("action")?.as_str()? {
        "accept" => Some(ElicitationAction::Accept),
        "decline" => Some(ElicitationAction::Decline),
        "cancel" => Some(ElicitationAction::Cancel),
        _ => None,
    }
}

/// Whether `value` has the shape of an `ElicitResult` (schema.json): an
/// object with an `action` of accept, decline or cancel, and `content`, if
/// any, an object of primitive values or arrays of strings. The answers to
/// this server's own questions are checked (mrtr.mdx: servers SHOULD
/// validate them); a client's other keys are none of its business.
fn is_elicit_result(value: &Value) -> bool {
    let Some(result) = value.as_object() else {
        return false;
    };
    let action_known = result
        .get("action")
        .and_then(Value::as_str)
        .is_some_and(|a| matches!(a, "accept" | "decline" | "cancel"));
    let content_fits = match result.get("content") {
        None | Some(Value::Null) => true,
        Some(Value::Object(fields)) => fields.values().all(|v| match v {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
            Value::Array(items) => items.iter().all(Value::is_string),
            _ => false,
        }),
        Some(_) => false,
    };
    action_known && content_fits
}

/// Where a round comes from: the call and what its retry carried.
pub struct Retry<'a> {
    pub principal: &'a Principal,
    pub binding: &'a Binding<'a>,
    pub request_state: Option<&'a str>,
    pub input_responses: Option<&'a InputResponses>,
    /// The provider the round must be about.
    pub provider: &'a str,
    /// The key of the elicitation the previous round asked.
    pub key: &'a str,
}

impl ConnectionService {
    /// The round a retry continues, or `None` on a first call. A state that
    /// does not open for this call, or names another provider, is logged,
    /// audited and answered with the one fixed error.
    pub async fn open_round<'r>(&self, retry: Retry<'r>) -> Result<Option<Round<'r>>, ErrorData> {
        let Some(sealed) = retry.request_state else {
            return Ok(None);
        };
        let reason = match state::open(&self.keys, retry.binding, sealed) {
            Ok(round) if round.provider == retry.provider => {
                // The question this round's retry answers, and the account
                // question, which any round about the provider may have
                // asked (a confirmation's key is the first, the connect's
                // too).
                let answers = [retry.key, &super::accounts::input_key(retry.provider)];
                for key in answers {
                    if let Some(value) = retry.input_responses.and_then(|r| r.get(key))
                        && !is_elicit_result(value)
                    {
                        tracing::info!(key, "retry with a malformed answer to an elicitation");
                        return Err(super::errors::RequestError::MalformedAnswer {
                            key: key.to_owned(),
                        }
                        .into());
                    }
                }
                return Ok(Some(Round {
                    state: round,
                    answer: retry.input_responses.and_then(|r| r.get(retry.key)),
                }));
            }
            Ok(_) => "provider",
            Err(e) => e.reason_code(),
        };
        Err(super::reject_state(
            self,
            retry.principal,
            retry.provider,
            retry.binding.target,
            reason,
        )
        .await)
    }

    /// Seals the state of a round that waits for the user's answer, bound
    /// to this call and valid for the configured round lifetime.
    pub fn seal_round(
        &self,
        binding: &Binding<'_>,
        round: &RoundState,
    ) -> Result<String, ErrorData> {
        state::seal(
            &self.keys,
            binding,
            round,
            self.settings.flow.request_state_ttl(),
        )
        .map_err(super::internal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn elicitation_results_are_told_from_anything_else() {
        for fits in [
            json!({"action": "accept"}),
            json!({"action": "decline"}),
            json!({"action": "cancel", "content": null}),
            json!({"action": "accept", "content": {"confirm": true, "n": 2, "s": "x", "many": ["a"]}}),
            json!({"action": "accept", "_meta": {}}),
        ] {
            assert!(is_elicit_result(&fits), "{fits}");
        }
        for misfit in [
            json!("yes"),
            json!(null),
            json!({}),
            json!({"action": "ok"}),
            json!({"action": 1}),
            json!({"action": "accept", "content": "yes"}),
            json!({"action": "accept", "content": {"nested": {"a": 1}}}),
            json!({"action": "accept", "content": {"list": [1, 2]}}),
        ] {
            assert!(!is_elicit_result(&misfit), "{misfit}");
        }
    }
}
