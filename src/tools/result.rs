//! The shape of every tool result, as a model receives it. A tool's result
//! type is declared as its `outputSchema` (generated from the Rust type, for
//! what it serializes), goes out as `structuredContent`, and again as the
//! first text block, serialized: some clients hand a model only the
//! structured JSON, others only the text. Failures are results of the same
//! type, so a model reads one shape whatever happened, with `next_step`
//! telling it what to do. Nothing here ever holds a credential.

use rmcp::model::{CallToolResult, ContentBlock};
use schemars::JsonSchema;
use serde::Serialize;

use crate::providers::ProviderError;

/// What the model should do after this result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NextStep {
    /// Nothing: the call did what was asked, or the user decided.
    None,
    /// The user must connect (or reconnect) the account: call the tool again;
    /// the client is given a link for the user.
    Connect,
    /// The account may lack a permission for this: call `connect` with the
    /// scopes the request needs, and the user is asked to approve them.
    Approve,
    /// The provider is busy or unreachable: try again later.
    RetryLater,
    /// The request itself was refused: change it rather than repeat it.
    ChangeRequest,
    /// The user has to act outside this client: tell them the error message.
    AskUser,
}

/// Why a call did not do what was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The user declined to connect the account.
    Declined,
    /// The user dismissed the request to connect.
    Cancelled,
    /// The provider refused the authorization the user was sent to give
    /// (the message names its error code, and says what would help).
    AuthorizationRefused,
    /// The provider no longer accepts the connection's token.
    TokenRejected,
    /// The provider answered with an HTTP error status, or reported an
    /// error in its own envelope (Slack's `ok: false`).
    HttpError,
    /// The provider could not be reached, or could not renew the
    /// account's access now. (An API's own answer, a 429 included, is an
    /// `http_error` with `next_step` "retry_later".)
    ProviderUnavailable,
    /// The provider answered something unexpected.
    ProviderError,
    /// Refused before anything was sent: a provider this server does not
    /// have, a path, method, query or body it does not allow for the
    /// provider, or an `account` that is the label of several accounts (or,
    /// for a client that cannot ask the user, of none).
    Refused,
    /// This client cannot ask the user to confirm.
    ConfirmationUnavailable,
    /// The user has not approved this client for the account.
    ClientNotApproved,
    /// The connection was removed here, but the provider could not be
    /// told to end its access: the user should remove it at the provider.
    RevocationFailed,
}

/// A failure, in a stable code and in words.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ToolError {
    pub kind: ErrorKind,
    /// What happened, for the user.
    pub message: String,
}

/// What every result that concerns one account says: which provider and
/// account, what to do next, and what went wrong if anything did.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Outcome {
    /// The provider's name, e.g. "github".
    pub provider: String,
    /// The account's name at the provider, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The account's id at the provider, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// What to do next; "none" when the call did what was asked.
    pub next_step: NextStep,
    /// Present when the call failed (the result then has isError set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
}

impl Outcome {
    /// [`Self::ok`] with the account's label and id given, not copied.
    pub fn ok_owned(provider: &str, account: String, account_id: String) -> Self {
        Self {
            provider: provider.to_owned(),
            account: Some(account),
            account_id: Some(account_id),
            next_step: NextStep::None,
            error: None,
        }
    }

    /// A call that did what was asked, for `account` (label, id).
    pub fn ok(provider: &str, account: &str, account_id: &str) -> Self {
        Self {
            provider: provider.to_owned(),
            account: Some(account.to_owned()),
            account_id: Some(account_id.to_owned()),
            next_step: NextStep::None,
            error: None,
        }
    }

    /// A call that failed before an account was known.
    pub fn failed(provider: &str, kind: ErrorKind, message: String, next_step: NextStep) -> Self {
        Self {
            provider: provider.to_owned(),
            account: None,
            account_id: None,
            next_step,
            error: Some(ToolError { kind, message }),
        }
    }

    /// `self` with the account named.
    pub fn for_account(mut self, account: &str, account_id: &str) -> Self {
        self.account = Some(account.to_owned());
        self.account_id = Some(account_id.to_owned());
        self
    }
}

/// A provider call that failed, as a model can act on it.
pub fn provider_failure(provider: &str, e: &ProviderError) -> Outcome {
    let (kind, next) = match e {
        ProviderError::InvalidGrant | ProviderError::Denied(_) => {
            (ErrorKind::TokenRejected, NextStep::Connect)
        }
        ProviderError::Http(_) => (ErrorKind::ProviderUnavailable, NextStep::RetryLater),
        ProviderError::Status(s) if *s == 429 || *s >= 500 => {
            (ErrorKind::ProviderUnavailable, NextStep::RetryLater)
        }
        ProviderError::PathRefused(_)
        | ProviderError::MethodRefused(_)
        | ProviderError::RequestRefused(_) => (ErrorKind::Refused, NextStep::ChangeRequest),
        ProviderError::Status(_)
        | ProviderError::Rejected { .. }
        | ProviderError::BadResponse(_)
        | ProviderError::Unaccepted { .. }
        | ProviderError::Unsupported(_) => (ErrorKind::ProviderError, NextStep::None),
        // Connecting again stores it afresh: the user's to do (or the
        // operator's, for an entry that no longer takes what it stored).
        ProviderError::UnreadableCredential(_) => (ErrorKind::ProviderError, NextStep::AskUser),
        ProviderError::SettingsRefused(_) => (ErrorKind::Refused, NextStep::AskUser),
    };
    // Provider errors carry no credential by construction (see its docs).
    // A model may repeat a call it believes unsent: say it may have been
    // sent whenever that is possible.
    let message = if e.may_have_been_sent() {
        format!(
            "No answer: {e}. The request may have reached the provider and taken effect; \
             check before repeating it."
        )
    } else {
        e.to_string()
    };
    Outcome::failed(provider, kind, message, next)
}

/// What an HTTP error status from a provider's API asks of the model.
pub fn next_step_for_status(status: u16) -> NextStep {
    match status {
        401 => NextStep::Connect,
        403 => NextStep::Approve,
        429 | 500.. => NextStep::RetryLater,
        400.. => NextStep::ChangeRequest,
        _ => NextStep::None,
    }
}

/// The result for `value`: the same JSON as `structuredContent` and as the
/// first text block, then `sentence` for people. `is_error` when it failed.
pub fn answer<T: Serialize>(value: &T, is_error: bool, sentence: String) -> CallToolResult {
    // Our result types are plain data and cannot fail to serialize; if one
    // ever did, say so rather than send a result that breaks the schema.
    let (structured, text) = match (serde_json::to_value(value), serde_json::to_string(value)) {
        (Ok(structured), Ok(text)) => (structured, text),
        (Err(e), _) | (_, Err(e)) => {
            tracing::error!(error = %e, "tool result did not serialize");
            return CallToolResult::error(vec![ContentBlock::text("Internal error")]);
        }
    };
    // The text in the type's own field order (provider first), which a
    // model reads more easily than the map's sorted keys; the same JSON.
    // (Not rmcp's `structured`, which would print the map a second time
    // only for this text to replace it.)
    let content = vec![ContentBlock::text(text), ContentBlock::text(sentence)];
    let mut result = if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = Some(structured);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_text_block_is_the_structured_json_and_failures_are_errors() {
        let failed = Outcome::failed("demo", ErrorKind::Declined, "no".into(), NextStep::None);
        let result = answer(&failed, true, "The user declined.".into());
        assert_eq!(result.is_error, Some(true));
        let text = result.content[0].as_text().map(|t| t.text.clone());
        let parsed: serde_json::Value = serde_json::from_str(&text.unwrap_or_default()).unwrap();
        assert_eq!(Some(parsed), result.structured_content);
        assert_eq!(
            result.content[1].as_text().map(|t| t.text.as_str()),
            Some("The user declined.")
        );

        let fine = answer(
            &serde_json::json!({"provider": "demo"}),
            false,
            "Done.".into(),
        );
        assert_eq!(fine.is_error, Some(false));
        assert_eq!(fine.result_type, Some(rmcp::model::ResultType::COMPLETE));
        assert_eq!(
            fine.structured_content,
            Some(serde_json::json!({"provider": "demo"}))
        );
        assert_eq!(
            fine.content[0].as_text().map(|t| t.text.as_str()),
            Some(r#"{"provider":"demo"}"#)
        );
    }

    #[test]
    fn status_codes_map_to_what_the_model_can_do() {
        assert_eq!(next_step_for_status(401), NextStep::Connect);
        assert_eq!(next_step_for_status(403), NextStep::Approve);
        assert_eq!(next_step_for_status(404), NextStep::ChangeRequest);
        assert_eq!(next_step_for_status(429), NextStep::RetryLater);
        assert_eq!(next_step_for_status(503), NextStep::RetryLater);
        assert_eq!(next_step_for_status(200), NextStep::None);
    }
}
