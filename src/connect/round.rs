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
        serde_json::from_value(self.answer?.get("action")?.clone()).ok()
    }

    /// A value of the answer's form content, by JSON pointer under `content`.
    pub fn content(&self, pointer: &str) -> Option<&Value> {
        self.answer?.get("content")?.pointer(pointer)
    }
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
