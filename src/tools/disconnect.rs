//! `disconnect`: asks the user to confirm (a form-mode elicitation, yes or
//! no), then deletes the connection and revokes the tokens upstream where
//! the provider supports RFC 7009 (a failed revocation is tried again
//! later). A retry that brings no answer is asked
//! again; only the user's no, decline or cancel keeps the account. The confirmation round is bound to this call
//! by a sealed `requestState`, like the connect flow's, and names the one
//! connection it asked about. With several accounts at the provider and none
//! named, the user is first asked which (the account question every tool
//! asks); it never picks one for them.

use crate::connect::errors::{ElicitationMode, RequestError};
use rmcp::{
    ErrorData,
    model::{
        CallToolResponse, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
        InputRequest, InputRequests, InputRequiredResult, Tool, ToolAnnotations,
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    ToolCall, ToolOutput, internal, known_provider, output_schema_for,
    result::{ErrorKind, NextStep, Outcome, answer},
    schema_for,
};
use crate::connect::{
    Access, ClientKind, Retry,
    accounts::{Chosen, ChosenAccount},
    state::RoundState,
    vault,
};

pub const NAME: &str = "disconnect";
const CONFIRM_KEY: &str = "confirm_disconnect";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The provider to disconnect, e.g. "github".
    pub provider: String,
    /// Which of several accounts at the provider to disconnect: its label
    /// (as connections_list shows it) or account id. Omit when there is
    /// one; with several, the user is asked which.
    #[serde(default)]
    pub account: Option<String>,
}

/// What became of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Disconnection {
    /// Forgotten here (`revocation` says whether the provider ended the
    /// access too).
    Disconnected,
    /// There was no connection to act on: none to the provider, or the
    /// account chosen was disconnected meanwhile (the message says which).
    NotConnected,
    /// Nothing changed: the user chose to keep it, could not be asked, or
    /// the request was refused before any connection was looked at
    /// (`error` says why).
    Kept,
}

/// What the provider was told when the connection was removed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Revocation {
    /// The provider revoked the tokens: the access has ended there too.
    Revoked,
    /// The provider offers no revocation: its tokens end when they expire.
    NotOffered,
    /// The provider could not be told (it refused or did not answer): the
    /// access may still be live there until the user removes it in the
    /// account's settings at the provider. The server tries again for a
    /// while where it can (the message says how long).
    Failed,
    /// Not revoked, on purpose: the same account is also connected here
    /// (by another person using this server, or by this user since), and
    /// revoking at this provider would end that connection too. The access
    /// stays live there for it.
    Shared,
}

impl From<vault::Revocation> for Revocation {
    fn from(r: vault::Revocation) -> Self {
        match r {
            vault::Revocation::Revoked => Self::Revoked,
            vault::Revocation::NotOffered => Self::NotOffered,
            vault::Revocation::Retrying | vault::Revocation::Failed => Self::Failed,
            vault::Revocation::Shared => Self::Shared,
        }
    }
}

/// The disconnection, as it ended.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DisconnectResult {
    #[serde(flatten)]
    pub outcome: Outcome,
    pub connection: Disconnection,
    /// Present when the connection was disconnected: whether the provider
    /// ended the access too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revocation: Option<Revocation>,
}

/// A failure before any connection was looked up (arguments refused, a
/// provider this server does not have): nothing changed, and nothing is
/// known of the user's connections — "not connected" would tell the model
/// what nobody looked at.
impl ToolOutput for DisconnectResult {
    fn from_outcome(outcome: Outcome) -> Self {
        Self {
            outcome,
            connection: Disconnection::Kept,
            revocation: None,
        }
    }
}

pub fn definition() -> Tool {
    Tool::new(
        NAME,
        "Disconnect the user's account at a provider: after the user confirms, the server revokes its \
         tokens at the provider (where supported, and unless the same account is also connected here, \
         whose access revoking would end: `revocation` says which) and forgets them. The user is asked \
         to confirm first, and, with several accounts at the provider and none named in `account`, \
         which one.",
        schema_for::<Args>(),
    )
    .with_raw_output_schema(output_schema_for::<DisconnectResult>())
    .with_title("Disconnect an account")
    .with_annotations(ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(true))
}

/// Nothing to disconnect: no account at `provider`, or, when one was
/// `chosen`, that one gone meanwhile (the user's others are not "not
/// connected", and are left as they are).
fn not_connected(provider: &crate::providers::Provider, chosen: bool) -> CallToolResponse {
    let name = provider.display_name();
    let sentence = if chosen {
        format!(
            "That {name} account is no longer connected (it was disconnected meanwhile); \
             nothing else was changed."
        )
    } else {
        format!("No {name} account is connected.")
    };
    done(provider.name(), None, Disconnection::NotConnected, sentence)
}

/// A completed disconnect call for `provider` (and the account, when known).
fn done(
    provider: &str,
    account: Option<(&str, &str)>,
    connection: Disconnection,
    sentence: String,
) -> CallToolResponse {
    let outcome = Outcome {
        provider: provider.to_owned(),
        account: account.map(|a| a.0.to_owned()),
        account_id: account.map(|a| a.1.to_owned()),
        next_step: NextStep::None,
        error: None,
    };
    let result = DisconnectResult {
        outcome,
        connection,
        revocation: None,
    };
    CallToolResponse::Complete(answer(&result, false, sentence))
}

/// A completed disconnect of `account`, saying what the provider was told.
/// Where it could not be told, the user has to end the access there: a
/// tool error asking for that, though the connection is gone here.
fn disconnected(
    provider: &crate::providers::Provider,
    account: &ChosenAccount,
    told: vault::Revocation,
    retry_hours: u32,
) -> CallToolResponse {
    let revocation = Revocation::from(told);
    let name = provider.display_name();
    let outcome = Outcome::ok(provider.name(), &account.account_label, &account.account_id);
    // In words, as the confirmation named it.
    let label = &account.name;
    let (outcome, sentence) = match revocation {
        Revocation::Revoked => (
            outcome,
            format!("{name} account {label} is disconnected; its tokens were revoked at {name}."),
        ),
        Revocation::NotOffered => (
            outcome,
            format!(
                "{name} account {label} is disconnected; its tokens are forgotten here. {name} offers \
                 no way to revoke them from here: remove this server's access in the account's \
                 settings at {name} to end it there too."
            ),
        ),
        Revocation::Shared => (
            outcome,
            format!(
                "{name} account {label} is disconnected; its tokens are forgotten here. Its access \
                 was not revoked at {name}: the same account is also connected here (by another \
                 person using this server, or by you since), and revoking it would end that \
                 connection too."
            ),
        ),
        Revocation::Failed => {
            let again = if told == vault::Revocation::Retrying {
                format!(
                    " This server tries again for up to {retry_hours} hours; to end it now, remove \
                     this server's access in the account's settings at {name}."
                )
            } else {
                format!(" Remove this server's access in the account's settings at {name}.")
            };
            let message = format!(
                "{name} account {label} is disconnected from this server, but {name} could not be told to \
                 revoke its access, which may still be live there.{again}"
            );
            let failed = Outcome::failed(
                provider.name(),
                ErrorKind::RevocationFailed,
                message.clone(),
                NextStep::AskUser,
            )
            .for_account(&account.account_label, &account.account_id);
            (failed, message)
        }
    };
    let is_error = outcome.error.is_some();
    let result = DisconnectResult {
        outcome,
        connection: Disconnection::Disconnected,
        revocation: Some(revocation),
    };
    CallToolResponse::Complete(answer(&result, is_error, sentence))
}

/// A disconnect that was not carried out: nothing changed, and `next`
/// says who acts — the user outside this client (`message` says where), or
/// the model with another request. `account` is named only to a client
/// approved for it.
fn kept_unchanged(
    provider: &str,
    account: Option<&ChosenAccount>,
    kind: ErrorKind,
    message: String,
    next: NextStep,
) -> CallToolResponse {
    let outcome = Outcome::failed(provider, kind, message.clone(), next);
    let result = DisconnectResult {
        outcome: match account {
            Some(a) => outcome.for_account(&a.account_label, &a.account_id),
            None => outcome,
        },
        connection: Disconnection::Kept,
        revocation: None,
    };
    CallToolResponse::Complete(answer(&result, true, message))
}

pub async fn call(call: ToolCall<'_>) -> Result<CallToolResponse, ErrorData> {
    let args: Args = match call.arguments::<_, DisconnectResult>() {
        Ok(args) => args,
        Err(refused) => return Ok(*refused),
    };
    let service = call.service;
    let p = call.principal;
    let provider = match known_provider::<DisconnectResult>(service, &args.provider) {
        Ok(provider) => provider,
        Err(refused) => return Ok(*refused),
    };
    let binding = call.binding();

    let round = service
        .open_round(Retry {
            principal: p,
            binding: &binding,
            request_state: call.request.request_state.as_deref(),
            input_responses: call.request.input_responses.as_ref(),
            provider: provider.name(),
            key: CONFIRM_KEY,
        })
        .await?;
    // Which account: a destructive tool never guesses among several. The
    // confirmation round carries the account it asked about; an earlier
    // round may have asked which one.
    let need = call.need(provider.name(), &[], args.account.as_deref(), false);
    let chosen = match service
        .choose_account(&need, round.as_ref().map(|r| &r.state))
        .await?
    {
        Chosen::Connection(id) => id,
        Chosen::Answer(Access::InputRequired(question)) => {
            return Ok(CallToolResponse::InputRequired(question));
        }
        Chosen::Answer(Access::AccountAmbiguous { message }) => {
            return Ok(kept_unchanged(
                provider.name(),
                None,
                ErrorKind::Refused,
                message,
                NextStep::ChangeRequest,
            ));
        }
        Chosen::Answer(_) => {
            return Ok(done(
                provider.name(),
                None,
                Disconnection::Kept,
                format!(
                    "Nothing changed: no {} account was chosen.",
                    provider.display_name()
                ),
            ));
        }
    };
    let Some(account) = service
        .chosen_account(p.user(), provider.name(), chosen)
        .await
        .map_err(internal)?
    else {
        return Ok(not_connected(provider, chosen.is_some()));
    };
    let names = Some((account.account_label.as_str(), account.account_id.as_str()));
    // A connection serves only the clients its user approved for it, and
    // disconnecting is the most final use of all (its refresh token is
    // spent on the revocation). This client's own form is no approval: it
    // answers that itself. Nor does the refusal say which account it is:
    // like connections_list, it tells an unapproved client only that one
    // exists.
    if !service
        .client_may_use(account.connection, &p.client_id)
        .await?
    {
        let page = format!("{}/connections", service.base_url());
        let message = format!(
            "This client is not approved to use the user's {} account. The user can disconnect it at \
             {page}, or approve this client for it first (call connect for {}).",
            provider.display_name(),
            provider.name()
        );
        return Ok(kept_unchanged(
            provider.name(),
            None,
            ErrorKind::ClientNotApproved,
            message,
            NextStep::AskUser,
        ));
    }

    // The answer to the confirmation: yes, no, or none at all — a retry
    // that carries no answer (or an accept without the field) is asked
    // again, as MRTR wants for missing input; only the user's own "no",
    // decline or cancel keeps the account.
    let confirmed = round
        .as_ref()
        .filter(|r| r.state.account.is_some())
        .and_then(|round| match round.action() {
            Some(ElicitationAction::Accept) => round.content("/confirm").and_then(|v| v.as_bool()),
            Some(ElicitationAction::Decline | ElicitationAction::Cancel) => Some(false),
            _ => None,
        });
    if let Some(confirmed) = confirmed {
        if !confirmed {
            return Ok(done(
                provider.name(),
                names,
                Disconnection::Kept,
                format!(
                    "Nothing changed: {} account {} stays connected.",
                    provider.display_name(),
                    account.name
                ),
            ));
        }
        let removed = service
            .disconnect_account(p.user(), provider.name(), Some(account.connection))
            .await
            .map_err(internal)?;
        return Ok(match removed {
            Some(revocation) => disconnected(
                provider,
                &account,
                revocation,
                service.settings().revocation.retry_hours,
            ),
            None => not_connected(provider, true),
        });
    }

    let kind = super::client_kind(call.context);
    if let ClientKind::Legacy = kind {
        let page = format!("{}/connections", service.base_url());
        let message = format!("This client cannot ask the user to confirm. Disconnect at {page}.");
        return Ok(kept_unchanged(
            provider.name(),
            Some(&account),
            ErrorKind::ConfirmationUnavailable,
            message,
            NextStep::AskUser,
        ));
    }
    if let ClientKind::Modern {
        form_elicitation: false,
        ..
    } = kind
    {
        let page = format!("{}/connections", service.base_url());
        return Err(RequestError::MissingCapability {
            mode: ElicitationMode::Form,
            how: format!(
                "Disconnecting needs the user's confirmation (elicitation.form). Or disconnect at {page}."
            ),
        }
        .into());
    }
    let schema = ElicitationSchema::builder()
        .required_bool("confirm")
        .description("Set confirm to true to disconnect.")
        .build()
        .map_err(|e| internal(anyhow::anyhow!("{e}")))?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: if provider.supports_revocation() {
            format!(
                "Disconnect your {name} account {} from this server? Its tokens will be revoked at {name} and forgotten here.",
                account.name,
                name = provider.display_name(),
            )
        } else {
            format!(
                "Disconnect your {name} account {} from this server? Its tokens will be forgotten here ({name} offers no way to revoke them from here).",
                account.name,
                name = provider.display_name(),
            )
        },
        requested_schema: schema,
    };
    let mut requests = InputRequests::new();
    requests.insert(
        CONFIRM_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    // The confirmation is about this very connection: the retry removes
    // it, not whichever is oldest by then.
    let next = RoundState {
        ticket: None,
        provider: provider.name().to_owned(),
        round: round
            .as_ref()
            .map_or(1, |r| r.state.round.saturating_add(1)),
        account: Some(account.connection),
        offered: Vec::new(),
    };
    let sealed = service.seal_round(&binding, &next)?;
    Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
        Some(requests),
        Some(sealed),
    )))
}
